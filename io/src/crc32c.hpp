// CRC-32C (Castagnoli), the checksum of checkpoint data sections.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tg::detail {

uint32_t crc32c(const void* data, size_t size);

}  // namespace tg::detail
