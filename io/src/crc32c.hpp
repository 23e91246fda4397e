// CRC-32C (Castagnoli), the checksum of checkpoint files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tg::detail {

// The CRC-32C of `size` bytes. Chains: crc32c(b, nb, crc32c(a, na)) is the CRC of a followed by b.
uint32_t crc32c(const void* data, size_t size, uint32_t previous = 0);

}  // namespace tg::detail
