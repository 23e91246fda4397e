// Dropout's keep decisions and products, compiled once per vector level (dropout_kernels.cpp,
// cpu/vector_isa.hpp); dropout.cpp calls the chosen level's. Private to nn/.
#pragma once

#include <cstdint>

#include "cpu/vector_isa.hpp"

namespace tg::detail {

// The keep decisions of `count` elements from 2·count generator words: element k is kept when the
// low 53 bits of (words[2k] << 32) | words[2k + 1] are below `keep_below` (⌈(1 − p) · 2^53⌉).
struct DropoutMaskKernels {
  void (*keep_mask)(const uint32_t* words, int64_t count, uint64_t keep_below, bool* keep);
};

template <typename T>
struct DropoutNoiseKernels {
  // out[i] = in[i] · (keep[i] ? kept : 0), for i < n; sequential (the caller splits the work).
  void (*times_noise)(const T* in, const bool* keep, T kept, T* out, int64_t n);
};

struct DropoutKernels {
  DropoutMaskKernels mask;
  DtypeKernels<DropoutNoiseKernels> noise;
};

TG_DECLARE_ISA_KERNELS(DropoutKernels, dropout_kernels)

}  // namespace tg::detail
