// Dropout's keep decisions and products (dropout_kernels.hpp), compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Plain loops the compiler vectorises at each level's width (the baseline build cannot compare
// 64-bit integers or widen bytes to floats in vectors, so there both loops stayed scalar). The
// decision is an integer comparison and the product x · (keep ? kept : 0) is computed as
// x · (float(keep) · kept), exact either way (kept · 1 is kept, kept · 0 is 0, and x · 0 keeps
// NaN as PyTorch's x * noise does), so every level gives the same bits.
#include "dropout_kernels.hpp"

namespace tg::detail::TG_ISA {

namespace {

constexpr uint64_t kMantissa = (uint64_t{1} << 53) - 1;

// The masks are read and written as the bytes of the bools (0 or 1): GCC 12 vectorises no loop
// that loads or stores bool itself.
void keep_mask(const uint32_t* __restrict words, int64_t count, uint64_t keep_below, bool* __restrict keep) {
  auto* keep_bytes = reinterpret_cast<uint8_t*>(keep);
  for (int64_t k = 0; k < count; ++k) {
    const uint64_t bits = (uint64_t{words[2 * k]} << 32) | words[2 * k + 1];  // random64()
    keep_bytes[k] = (bits & kMantissa) < keep_below;
  }
}

template <typename T>
void times_noise(const T* __restrict in, const bool* __restrict keep, T kept, T* __restrict out, int64_t n) {
  const auto* keep_bytes = reinterpret_cast<const uint8_t*>(keep);
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] * (static_cast<T>(static_cast<int32_t>(keep_bytes[i])) * kept);
}

}  // namespace

const DropoutKernels dropout_kernels = {.mask = {.keep_mask = keep_mask},
                                        .noise = {.f32 = {.times_noise = times_noise<float>},
                                                  .f64 = {.times_noise = times_noise<double>}}};

}  // namespace tg::detail::TG_ISA
