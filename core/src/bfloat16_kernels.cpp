// The float32 <-> bfloat16 row conversions (bfloat16_kernels.hpp has the contract), compiled once
// per vector level by tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
// Plain loops of integer operations that the compiler vectorises at each level's width; integer
// arithmetic rounds nothing, so every level gives the same bits.
#include "bfloat16_kernels.hpp"

#include <bit>

namespace tg::detail::TG_ISA {

namespace {

// out[i] = BFloat16(in[i]), BFloat16::round_to_nearest_even written without a branch so that it
// vectorises: the rounded upper half, or 0x7FC0 where in[i] is NaN.
//   bits = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
void to_bfloat16(const float* in, BFloat16* out, int64_t n) {
  uint16_t* bits = reinterpret_cast<uint16_t*>(out);  // BFloat16 is its 16 bits (static_assert below)
  for (int64_t i = 0; i < n; ++i) {
    const float value = in[i];
    const uint32_t u = std::bit_cast<uint32_t>(value);
    const uint16_t rounded = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    bits[i] = value != value ? uint16_t{0x7FC0} : rounded;
  }
}

// out[i] = float(in[i]): the 16 bits become the upper half of the float32's.
void to_float(const BFloat16* in, float* out, int64_t n) {
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(in);
  for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(bits[i]) << 16);
}

static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2, "BFloat16 is exactly its 16 bits");

}  // namespace

const BFloat16Kernels bfloat16_kernels = {.to_bfloat16 = to_bfloat16, .to_float = to_float};

}  // namespace tg::detail::TG_ISA
