// tg::cpu_info(): the public view of cpu/features, cpu/gemm_kernel and cpu/vector_isa.
#include "tapegrad/cpu.hpp"

#include "cpu/features.hpp"
#include "cpu/gemm_kernel.hpp"
#include "cpu/vector_isa.hpp"
#include "tapegrad/error.hpp"

namespace tg {

CpuInfo cpu_info() {
  const detail::CpuFeatures& f = detail::cpu_features();
  const detail::GemmKernel& gemm = detail::gemm_kernel();
  const detail::GemmKernel& bf16_gemm = detail::bf16_gemm_kernel();
  CpuInfo info{.brand = f.brand,
               .vendor = f.vendor,
               .family = f.family,
               .model = f.model,
               .features = {},
               .gemm_kernel = gemm.name,
               .gemm_reason = gemm.reason,
               .gemm_kernels = detail::gemm_kernel_names(),
               .bf16_gemm_kernel = bf16_gemm.name,
               .bf16_gemm_reason = bf16_gemm.reason,
               .row_kernel_isa = detail::name(detail::vector_isa()),
               .row_kernel_isas = {"auto"}};
  for (detail::VectorIsa isa : {detail::VectorIsa::v2, detail::VectorIsa::v3, detail::VectorIsa::avx512})
    if (detail::cpu_supports(isa)) info.row_kernel_isas.emplace_back(detail::name(isa));
  const std::pair<bool, const char*> flags[] = {{f.sse42, "sse4.2"},      {f.avx, "avx"},
                                                {f.avx2, "avx2"},         {f.fma, "fma"},
                                                {f.avx512f, "avx512f"},   {f.avx512dq, "avx512dq"},
                                                {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"},
                                                {f.avx512bf16, "avx512bf16"}};
  for (const auto& [present, name] : flags)
    if (present) info.features.emplace_back(name);
  return info;
}

std::string to_string(const CpuInfo& info) {
  std::string features;
  for (const std::string& name : info.features) features += (features.empty() ? "" : " ") + name;
  return detail::concat(info.brand.empty() ? "unnamed CPU" : info.brand, " (", info.vendor, " family ", info.family,
                        " model ", info.model, "; ", features, "); GEMM ", info.gemm_kernel, ": ", info.gemm_reason,
                        "; bf16 GEMM ", info.bf16_gemm_kernel, ": ", info.bf16_gemm_reason, "; row kernels ",
                        info.row_kernel_isa);
}

}  // namespace tg
