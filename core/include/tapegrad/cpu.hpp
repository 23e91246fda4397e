/// @file
/// tg::cpu_info(): the CPU this process runs on, and which GEMM kernel tapegrad chose for it and why.
///
/// @code
///   std::cout << tg::to_string(tg::cpu_info()) << "\n";
/// @endcode
///
/// The GEMM kernel is chosen once, from the CPU's features (cpuid), not from its name: a CPU newer
/// than BLIS's table of CPU families still gets the vector kernels it can run. The environment
/// variable TG_GEMM_KERNEL (`auto`, `blis-<configuration>`, `eigen`) forces a choice.
#pragma once

#include <string>
#include <vector>

namespace tg {

/// What tg::cpu_info() reports: the CPU, and the kernels tapegrad chose for it.
struct CpuInfo {
  std::string brand;   ///< e.g. "AMD EPYC 9R45"; empty when the CPU does not say
  std::string vendor;  ///< "AuthenticAMD", "GenuineIntel", ...
  int family = 0;      ///< display family (base + extended): 25 = AMD Zen 3/4, 26 = Zen 5, 6 = most Intel cores
  int model = 0;       ///< display model (base + extended)
  std::vector<std::string> features;  ///< of "sse4.2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512bf16"
  std::string gemm_kernel;            ///< as TG_GEMM_KERNEL spells it: "blis-skx", "blis-haswell", ..., "eigen"
  std::string gemm_reason;            ///< why that kernel, e.g. "BLIS detected 'generic' for AuthenticAMD family 26 ..."
  std::vector<std::string> gemm_kernels;  ///< every value TG_GEMM_KERNEL accepts on this CPU, "auto" first
  /// The kernel of float32 products at "medium" matmul precision (tapegrad/matmul_precision.hpp):
  /// "tapegrad-avx512bf16" (vdpbf16ps) or "tapegrad-bf16-emulated" (the same bits on float32 FMAs).
  std::string bf16_gemm_kernel;
  std::string bf16_gemm_reason;  ///< why that kernel, e.g. "no AVX512-BF16: bf16-rounded factors on ..."
  /// The vector level of the row kernels (LayerNorm, reductions), as TG_CPU_ISA spells it: "v2"
  /// (SSE4.2), "v3" (AVX2 + FMA) or "avx512"; by default the best one the CPU has.
  std::string row_kernel_isa;
  std::vector<std::string> row_kernel_isas;  ///< every value TG_CPU_ISA accepts on this CPU, "auto" first
};

/// Throws tg::Error when TG_GEMM_KERNEL (or BLIS_ARCH_TYPE) or TG_CPU_ISA holds a value this CPU
/// cannot use, with the list of valid values.
CpuInfo cpu_info();

/// One line: `"<brand> (<vendor> family F model M; <features>); GEMM <kernel>: <reason>; bf16 GEMM <kernel>:
/// <reason>; row kernels <isa>"`.
std::string to_string(const CpuInfo& info);

}  // namespace tg
