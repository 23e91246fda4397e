// What the CPU this process runs on can do, read once from cpuid. Kernel choices (GEMM, the
// vectorised row kernels) are made from these features, never from the CPU's name or family:
// a CPU newer than any table still gets the kernels its instruction set supports.
#pragma once

#include <string>

namespace tg::detail {

struct CpuFeatures {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel", ...
  std::string brand;   // the marketing name, e.g. "AMD EPYC 9R45"
  int family = 0;      // display family (base + extended), e.g. 25 = Zen 3/4, 26 = Zen 5
  int model = 0;       // display model
  bool sse42 = false;
  bool avx = false;    // and the OS saves the AVX state (XCR0)
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;  // and the OS saves the AVX-512 state (XCR0)
  bool avx512bw = false;
  bool avx512dq = false;
  bool avx512vl = false;
  // vdpbf16ps and the bf16 conversions (AMD Zen 4 and later, Intel Cooper Lake and later), with the
  // OS saving the AVX-512 state.
  bool avx512bf16 = false;
};

// Read on first use (thread-safe: a function-local static), then constant for the process.
const CpuFeatures& cpu_features();

}  // namespace tg::detail
