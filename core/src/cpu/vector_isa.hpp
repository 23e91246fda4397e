// The vector instruction set of the hot row kernels (LayerNorm, reductions, elementwise), chosen
// once per process at run time, as ATen's CPU-capability dispatch does.
//
// Each kernel source, <name>_kernels.cpp in any layer, is compiled once per level into that level's
// namespace (tg::detail::v2, ::v3, ::avx512; CMake's tg_add_isa_kernels) and defines there a small
// table of function pointers, <name>_kernels, that its <name>_kernels.hpp declares with
// TG_DECLARE_ISA_KERNELS; callers take the chosen level's table, <name>_kernels_for_cpu(). The
// library itself is built for plain x86-64, so one binary runs on every x86-64 CPU and still uses
// AVX-512 where there is one.
#pragma once

#include <string_view>
#include <type_traits>

#include "cpu/features.hpp"

namespace tg::detail {

enum class VectorIsa {
  v2,      // x86-64-v2: SSE4.2 (128-bit vectors)
  v3,      // AVX2 + FMA (256-bit vectors), the vector part of x86-64-v3
  avx512,  // AVX-512 F/BW/DQ/VL (512-bit vectors), the vector part of x86-64-v4
};

// "v2", "v3", "avx512": the names TG_CPU_ISA accepts.
const char* name(VectorIsa isa);

// Whether a CPU with these features (by default this one, and its OS) can run kernels compiled
// for `isa`.
bool cpu_supports(VectorIsa isa, const CpuFeatures& cpu = cpu_features());

// The level the kernels run at: the environment variable TG_CPU_ISA (v2, v3, avx512, or auto =
// unset) when set, else the best level the CPU supports. Read on first use. A value that is not
// one of these names, or a level the CPU lacks, throws tg::Error naming the valid values (on
// every call, from the first op that runs a dispatched kernel).
VectorIsa vector_isa();

// Makes every later kernel call run at `isa` (tests compare the levels in one process); throws
// tg::Error when the CPU lacks it. Not for use while other threads run kernels.
void set_vector_isa(VectorIsa isa);

// The level named by a TG_CPU_ISA value; "auto" is the best level the CPU supports. Throws
// tg::Error for anything else and for a level the CPU lacks.
VectorIsa parse_vector_isa(std::string_view value, const CpuFeatures& cpu = cpu_features());

// The kernel table of the chosen level, from one table per level.
template <typename Table>
const Table& for_vector_isa(const Table& v2, const Table& v3, const Table& avx512) {
  switch (vector_isa()) {
    case VectorIsa::avx512:
      return avx512;
    case VectorIsa::v3:
      return v3;
    case VectorIsa::v2:
      break;
  }
  return v2;
}

// One kernel table per dtype: Kernels<float> and Kernels<double>.
template <template <typename> class Kernels>
struct DtypeKernels {
  Kernels<float> f32;
  Kernels<double> f64;
  template <typename T>
  const Kernels<T>& of() const {
    if constexpr (std::is_same_v<T, float>) return f32;
    else return f64;
  }
};

}  // namespace tg::detail

// Declares a kernel table `name` of type `Table` in each level's namespace inside the current
// namespace (its definitions: one per level, from a source compiled by tg_add_isa_kernels with
// TG_ISA naming the level), and `name##_for_cpu()`, the chosen level's table.
#define TG_DECLARE_ISA_KERNELS(Table, name)                                       \
  namespace v2 {                                                                  \
  extern const Table name;                                                        \
  }                                                                               \
  namespace v3 {                                                                  \
  extern const Table name;                                                        \
  }                                                                               \
  namespace avx512 {                                                              \
  extern const Table name;                                                        \
  }                                                                               \
  inline const Table& name##_for_cpu() {                                          \
    return ::tg::detail::for_vector_isa<Table>(v2::name, v3::name, avx512::name); \
  }
