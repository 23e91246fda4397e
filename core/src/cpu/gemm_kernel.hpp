// Which GEMM kernel this process runs, chosen once from the vector level in force and, at v2, from
// what the CPU can do (its cpuid features), never from its name: BLIS's own table of CPU families lags behind new CPUs (BLIS 0.9 detects
// 'generic' on AMD family 26 and would run its reference kernels at a sixth of the core's speed).
//
// TG_GEMM_KERNEL=auto (the default), tapegrad, blis-<configuration> or eigen forces a choice; see
// gemm_kernel_names() for the values this build and CPU accept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#ifdef TG_HAVE_BLIS
#include <blis.h>
#endif

namespace tg::detail {

struct Bf16MicroKernel;

struct GemmKernel {
  std::string name;    // as TG_GEMM_KERNEL spells it: "tapegrad", "blis-skx", "blis-haswell", ..., "eigen"
  std::string reason;  // why this one, e.g. "vector level avx512: tapegrad's micro-kernel (avx512) from ..."
  // A product of M·N·K multiply-adds runs in the blocked loops (ops/gemm_blocked.cpp), when
  // `packed`, from packed_from multiply-adds (packed_from_trans_b when op(B) = Bᵀ, whose packing
  // costs more), else on the small-product kernel below.
  bool packed = false;
#ifdef TG_HAVE_BLIS
  // The blocked loops' micro-kernel: BLIS's of this context, or tapegrad's own (per vector level,
  // ops/gemm_micro_kernels.cpp) when null.
  cntx_t* blis = nullptr;
#endif
  int64_t packed_from = 0;
  int64_t packed_from_trans_b = 0;
  // The products the blocked loops do not take run on tapegrad's own kernel, compiled per vector
  // level (ops/small_gemm_kernels.cpp), when set, else on Eigen (compiled with the library's flags).
  bool small_on_vector_kernel = false;
  // "medium" matmul precision (bf16_gemm_kernel()): the factors are rounded to bf16 and every
  // multiply-add runs with FTZ and DAZ (ops/gemm_bf16.hpp), on the AVX512-BF16 micro-kernel in the
  // blocked loops when `bf16` is set, else on tapegrad's float32 kernels.
  bool flush_denormals = false;
  const Bf16MicroKernel* bf16 = nullptr;
  // The factors are bf16 values already (products of bfloat16 tensors, ops/matmul_precision.hpp):
  // no rounding, FTZ and DAZ only — the same bits, without the rounding's pass over the factors.
  bool factors_bf16 = false;
};

// Chosen on first use (thread-safe), then constant for the process. Throws tg::Error when
// TG_GEMM_KERNEL names a kernel that does not exist or that this CPU cannot run, or when
// BLIS_ARCH_TYPE holds a value BLIS would abort on; the next call tries again.
const GemmKernel& gemm_kernel();

// The kernel of float32 products at "medium" precision: tapegrad's kernels only, whatever
// TG_GEMM_KERNEL says (its choice of BLIS or Eigen does not run bf16 products), on AVX512-BF16
// when the CPU has it and the vector level is avx512. Chosen on first use, as gemm_kernel().
const GemmKernel& bf16_gemm_kernel();
// The same kernel for factors that are bf16 values already (factors_bf16).
const GemmKernel& bf16_values_gemm_kernel();

// The values TG_GEMM_KERNEL accepts on this CPU, "auto" first.
std::vector<std::string> gemm_kernel_names();

}  // namespace tg::detail
