#include "crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace tg::detail {

namespace {
// The reflected Castagnoli polynomial 0x1EDC6F41.
constexpr uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? kPolynomial : 0);
    table[byte] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kTable = make_table();
}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t previous) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = ~previous;
  size_t i = 0;
#if defined(__SSE4_2__)
  // The CPU's crc32 instruction computes exactly this polynomial, 8 bytes at a time.
  uint64_t crc64 = crc;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    crc64 = _mm_crc32_u64(crc64, word);
  }
  crc = static_cast<uint32_t>(crc64);
#endif
  for (; i < size; ++i) crc = (crc >> 8) ^ kTable[(crc ^ bytes[i]) & 0xff];
  return ~crc;
}

}  // namespace tg::detail
