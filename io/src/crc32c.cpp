#include "crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define TG_CRC32C_INSTRUCTION 1
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

namespace {

uint32_t crc32c_table(const unsigned char* bytes, size_t size, uint32_t crc) {
  for (size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ kTable[(crc ^ bytes[i]) & 0xff];
  return crc;
}

#if defined(TG_CRC32C_INSTRUCTION)
// SSE4.2's crc32 instruction computes exactly this polynomial, 8 bytes at a time (a table lookup
// per byte is ~10x slower: a checkpoint of a few MB spent milliseconds here). Compiled for SSE4.2
// alone, called only where the CPU has it: the library itself is built for plain x86-64.
__attribute__((target("sse4.2"))) uint32_t crc32c_instruction(const unsigned char* bytes, size_t size, uint32_t crc) {
  uint64_t crc64 = crc;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    crc64 = _mm_crc32_u64(crc64, word);
  }
  crc = static_cast<uint32_t>(crc64);
  for (; i < size; ++i) crc = _mm_crc32_u8(crc, bytes[i]);
  return crc;
}

bool cpu_has_crc32_instruction() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t size, uint32_t previous) {
  const auto* bytes = static_cast<const unsigned char*>(data);
#if defined(TG_CRC32C_INSTRUCTION)
  if (cpu_has_crc32_instruction()) return ~crc32c_instruction(bytes, size, ~previous);
#endif
  return ~crc32c_table(bytes, size, ~previous);
}

}  // namespace tg::detail
