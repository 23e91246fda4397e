// tg::cpu_info(): the public view of cpu/features and cpu/gemm_kernel.
#include "tapegrad/cpu.hpp"

#include "cpu/features.hpp"
#include "cpu/gemm_kernel.hpp"
#include "tapegrad/error.hpp"

namespace tg {

CpuInfo cpu_info() {
  const detail::CpuFeatures& f = detail::cpu_features();
  const detail::GemmKernel& gemm = detail::gemm_kernel();
  CpuInfo info{.brand = f.brand,
               .vendor = f.vendor,
               .family = f.family,
               .model = f.model,
               .features = {},
               .gemm_kernel = gemm.name,
               .gemm_reason = gemm.reason,
               .gemm_kernels = detail::gemm_kernel_names()};
  const std::pair<bool, const char*> flags[] = {{f.sse42, "sse4.2"},      {f.avx, "avx"},
                                                {f.avx2, "avx2"},         {f.fma, "fma"},
                                                {f.avx512f, "avx512f"},   {f.avx512dq, "avx512dq"},
                                                {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"}};
  for (const auto& [present, name] : flags)
    if (present) info.features.emplace_back(name);
  return info;
}

std::string to_string(const CpuInfo& info) {
  std::string features;
  for (const std::string& name : info.features) features += (features.empty() ? "" : " ") + name;
  return detail::concat(info.brand.empty() ? "unnamed CPU" : info.brand, " (", info.vendor, " family ", info.family,
                        " model ", info.model, "; ", features, "); GEMM ", info.gemm_kernel, ": ", info.gemm_reason);
}

}  // namespace tg
