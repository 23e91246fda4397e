// The GEMM kernel choice. At vector level v3 or avx512 (the level in force: TG_CPU_ISA may lower
// it): tapegrad's own micro-kernel of that level (ops/gemm_micro_kernels.cpp), in the blocked
// loops, for large products. At v2:
// BLIS's detection when it knows the CPU and uses its widest instruction set, else the best BLIS
// configuration the CPU's features can run, handed to BLIS as an explicit context; or Eigen.
#include "cpu/gemm_kernel.hpp"

#include <bit>
#include <cerrno>
#include <cstdlib>

#include "cpu/features.hpp"
#include "cpu/vector_isa.hpp"
#include "ops/gemm_bf16.hpp"
#include "tapegrad/error.hpp"

namespace tg::detail {

namespace {

// tapegrad's micro-kernel in the blocked loops from these sizes (multiply-adds; op(B) = B, op(B) =
// Bᵀ), its small-product kernel below: the break-even of the two on one core (bench/README.md,
// "tapegrad's micro-kernel"). The small-product kernel reads a row-major B in place, as fast as
// the blocked loops up to about 256³ (an LSTM's 32 × 1024 × 256: 10% faster; the blocked loops win
// by their L2 blocking beyond); a Bᵀ it first transposes element by element, which the blocked
// loops' packing does by vector tiles, faster from 32³ on.
constexpr int64_t kOursFrom = int64_t{1} << 24;
constexpr int64_t kOursFromTransB = int64_t{1} << 15;

GemmKernel tapegrad_kernel(std::string reason) {
  return {.name = "tapegrad",
          .reason = concat(reason, "tapegrad's micro-kernel (", name(vector_isa()), ") from 2^",
                           std::countr_zero(static_cast<uint64_t>(kOursFrom)),
                           " multiply-adds, its small-product kernel below"),
          .packed = true,
          .packed_from = kOursFrom,
          .packed_from_trans_b = kOursFromTransB,
          .small_on_vector_kernel = true};
}

// Below this many multiply-adds (e.g. 16³) a product costs less than the blocked loops' fixed
// set-up per call (BLIS's: an order of magnitude more than Eigen's on a product of a few
// elements), so it never goes to the blocked loops.
constexpr int64_t kTinyProduct = int64_t{1} << 12;

// The instruction set Eigen's GEMM was compiled for: the library's own flags (TG_NATIVE), not the
// CPU's. A wide Eigen beats BLIS's packing on small products; an SSE2 one does not.
#if defined(__AVX512F__)
constexpr const char* kEigenIsa = "AVX-512";
constexpr bool kEigenIsWide = true;
#elif defined(__AVX2__) && defined(__FMA__)
constexpr const char* kEigenIsa = "AVX2+FMA";
constexpr bool kEigenIsWide = true;
#else
constexpr const char* kEigenIsa = "SSE2";
constexpr bool kEigenIsWide = false;
#endif

std::string eigen_name() { return std::string("Eigen (") + kEigenIsa + ")"; }

#ifdef TG_HAVE_BLIS

enum class Isa { Avx512, Avx2, Avx, Portable };

// The BLIS configurations tapegrad may use, best first, with what each needs from the CPU. Debian's
// libblis also holds knl (Xeon Phi: AVX-512PF/ER), penryn and the AMD bulldozer family (FMA4):
// none is ever the best choice on a CPU that can run one of these.
struct BlisConfig {
  const char* name;
  arch_t id;
  Isa isa;
};
constexpr BlisConfig kBlisConfigs[] = {
    {"skx", BLIS_ARCH_SKX, Isa::Avx512},       {"zen3", BLIS_ARCH_ZEN3, Isa::Avx2},
    {"zen2", BLIS_ARCH_ZEN2, Isa::Avx2},       {"zen", BLIS_ARCH_ZEN, Isa::Avx2},
    {"haswell", BLIS_ARCH_HASWELL, Isa::Avx2}, {"sandybridge", BLIS_ARCH_SANDYBRIDGE, Isa::Avx},
    {"generic", BLIS_ARCH_GENERIC, Isa::Portable},
};

bool cpu_runs(Isa isa, const CpuFeatures& f) {
  switch (isa) {
    case Isa::Avx512: return f.avx512f && f.avx512dq && f.avx512bw && f.avx512vl && f.avx2 && f.fma;
    case Isa::Avx2: return f.avx2 && f.fma;
    case Isa::Avx: return f.avx;
    case Isa::Portable: return true;
  }
  return false;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "AVX-512F/DQ/BW/VL";
    case Isa::Avx2: return "AVX2+FMA";
    case Isa::Avx: return "AVX";
    case Isa::Portable: return "portable C";
  }
  return "";
}

bool registered(arch_t id) {
  cntx_t** contexts = bli_gks_lookup_id(id);
  return contexts != nullptr && contexts[BLIS_NAT] != nullptr;
}

const BlisConfig* find_config(arch_t id) {
  for (const BlisConfig& config : kBlisConfigs)
    if (config.id == id) return &config;
  return nullptr;
}

// BLIS 0.9 reads BLIS_ARCH_TYPE as a number (strtol: "generic" reads as 0, which is skx) and
// aborts the process on a number it has no configuration for. Check it before BLIS sees it.
void check_blis_arch_type() {
  const char* value = std::getenv("BLIS_ARCH_TYPE");
  if (value == nullptr) return;
  errno = 0;
  char* end = nullptr;
  const long id = std::strtol(value, &end, 10);
  bool valid = errno == 0 && id >= 0 && id < BLIS_NUM_ARCHS;
  if (valid) {
    // Which ids this build holds is known only after bli_init(), which itself aborts on an invalid
    // id: so ask the context table through a valid id only.
    bli_init();
    valid = registered(static_cast<arch_t>(id));
  }
  if (!valid) {
    std::string choices;
    for (const BlisConfig& config : kBlisConfigs)
      choices += concat(choices.empty() ? "" : ", ", static_cast<int>(config.id), " = ", config.name);
    throw Error(concat("gemm: BLIS_ARCH_TYPE='", value,
                       "' is not a BLIS configuration of this build, and BLIS would abort on it; BLIS 0.9 takes a "
                       "number (", choices, "), or unset it"));
  }
}

// Sets the context and the sizes from which it runs, for BLIS configuration `config` chosen by
// `auto`; smaller products run on tapegrad's small-product kernel (ops/small_gemm_kernels.cpp).
// The thresholds are break-even sizes measured single-threaded in float32 against Eigen compiled
// for AVX-512 (skx) and for AVX2 (haswell) (bench/README.md); the small-product kernel is at least
// as fast as that Eigen, and faster than BLIS's own small-product ("sup") kernels, on a training
// step's small products, so they stand:
//   skx: from 2^20 multiply-adds (2^21 when op(B) = Bᵀ); below, BLIS's packing costs more than it
//   saves.
//   AVX2 configurations: from 32³ when op(B) = B, from 160³ when op(B) = Bᵀ, against a wide Eigen
//   (TG_NATIVE); from 2^12 in the portable build.
void set_auto_thresholds(GemmKernel& kernel, const BlisConfig& config) {
  kernel.packed = true;
  kernel.blis = bli_gks_lookup_nat_cntx(config.id);
  kernel.small_on_vector_kernel = true;
  if (config.isa == Isa::Avx512) {
    kernel.packed_from = int64_t{1} << 20;
    kernel.packed_from_trans_b = int64_t{1} << 21;
  } else if (kEigenIsWide) {
    kernel.packed_from = int64_t{1} << 15;
    kernel.packed_from_trans_b = int64_t{1} << 22;
  } else {
    kernel.packed_from = kernel.packed_from_trans_b = kTinyProduct;
  }
}

std::string small_products(const GemmKernel& kernel) {
  if (kernel.small_on_vector_kernel) return ", tapegrad's small-product kernel (per vector level) below";
  return concat(", ", eigen_name(), " below");
}

GemmKernel choose_auto() {
  const CpuFeatures& f = cpu_features();
  check_blis_arch_type();
  bli_init();
  const arch_t detected = bli_arch_query_id();
  const std::string detected_name = bli_arch_string(detected);
  const std::string cpu = concat(f.vendor.empty() ? "an unknown vendor" : f.vendor, " family ", f.family, " model ",
                                 f.model);
  // The best configuration by the CPU's features: the widest instruction set it runs and, of the
  // AVX2 configurations, AMD's newest (zen3: larger dgemm blocks, so a faster dgemm than haswell's)
  // on AMD, haswell elsewhere; their sgemm kernels are the same.
  const arch_t avx2_config = f.vendor == "AuthenticAMD" ? BLIS_ARCH_ZEN3 : BLIS_ARCH_HASWELL;
  const BlisConfig* best = nullptr;
  for (const BlisConfig& config : kBlisConfigs)
    if (cpu_runs(config.isa, f) && registered(config.id) && (config.isa != Isa::Avx2 || config.id == avx2_config)) {
      best = &config;
      break;
    }
  if (best == nullptr || best->isa == Isa::Portable) {
    GemmKernel kernel;
    kernel.name = "eigen";
    kernel.reason = concat("BLIS detected '", detected_name, "' for ", cpu, "; no AVX2+FMA: using ", eigen_name());
    return kernel;
  }
  // BLIS's own choice stands where it uses the same instruction set (it knows the CPU's cache
  // sizes and kernels better than a feature list does). It is overridden where it is 'generic' (a
  // CPU newer than its table: AMD family 26) or narrower than the CPU: BLIS 0.9 counts a Xeon's
  // AVX-512 FMA units from the brand string's Platinum/Gold/... and a number, so it takes a VM's
  // bare "Intel(R) Xeon(R) Processor" (family 6 model 207) for a Haswell, where its skx kernel,
  // twice as wide, is faster (bench/README.md).
  const BlisConfig* chosen = find_config(detected);
  std::string why;
  if (chosen && chosen->isa == best->isa && cpu_runs(chosen->isa, f)) {
    why = concat("BLIS detected '", detected_name, "' for ", cpu, "; using it");
  } else {
    chosen = best;
    const std::string detected_what =
        detected == BLIS_ARCH_GENERIC
            ? ""
            : concat(", which is narrower than this CPU's ", isa_name(best->isa), " or not one tapegrad uses");
    why = concat("BLIS detected '", detected_name, "' for ", cpu, detected_what, "; using '", chosen->name, "' (",
                 isa_name(chosen->isa), ")");
  }
  GemmKernel kernel;
  kernel.name = concat("blis-", chosen->name);
  set_auto_thresholds(kernel, *chosen);
  kernel.reason = concat(why, " from 2^", std::countr_zero(static_cast<uint64_t>(kernel.packed_from)),
                         " multiply-adds", small_products(kernel));
  return kernel;
}

#endif  // TG_HAVE_BLIS

GemmKernel choose_kernel() {
  const char* forced = std::getenv("TG_GEMM_KERNEL");
  const std::string value = forced ? forced : "auto";
  if (value == "eigen") return {.name = "eigen", .reason = concat("TG_GEMM_KERNEL=eigen: ", eigen_name())};
  if (value == "tapegrad") {
    // Forced means every product but the tiny ones, so that tests exercise the blocked loops.
    GemmKernel kernel = tapegrad_kernel("TG_GEMM_KERNEL=tapegrad: ");
    kernel.packed_from = kernel.packed_from_trans_b = kTinyProduct;
    kernel.reason = concat("TG_GEMM_KERNEL=tapegrad: tapegrad's micro-kernel (", name(vector_isa()),
                           ") from 2^12 multiply-adds, its small-product kernel below");
    return kernel;
  }
  // The vector level decides: at v3 and avx512 (the level in force: TG_CPU_ISA may lower it),
  // tapegrad's own kernel; at v2, BLIS's choice for the CPU, or Eigen.
  if (value == "auto" && vector_isa() != VectorIsa::v2)
    return tapegrad_kernel(concat("vector level ", name(vector_isa()), ": "));
#ifdef TG_HAVE_BLIS
  if (value == "auto") return choose_auto();
  const CpuFeatures& f = cpu_features();
  for (const BlisConfig& config : kBlisConfigs) {
    if (value != concat("blis-", config.name) || !cpu_runs(config.isa, f)) continue;
    check_blis_arch_type();
    bli_init();
    if (!registered(config.id)) break;
    // Forced means every product BLIS can take, so that tests exercise this kernel: all but the
    // tiny ones, whose cost is the call itself.
    GemmKernel kernel{.name = value, .reason = concat("TG_GEMM_KERNEL=", value, " (", isa_name(config.isa), ")")};
    kernel.packed = true;
    kernel.blis = bli_gks_lookup_nat_cntx(config.id);
    kernel.packed_from = kernel.packed_from_trans_b = kTinyProduct;
    kernel.small_on_vector_kernel = true;
    kernel.reason += concat(" from 2^12 multiply-adds", small_products(kernel));
    return kernel;
  }
#else
  if (value == "auto") return {.name = "eigen", .reason = concat("built without BLIS (TG_GEMM=eigen): ", eigen_name())};
#endif
  std::string names;
  for (const std::string& name : gemm_kernel_names()) names += (names.empty() ? "" : ", ") + name;
  throw Error(concat("gemm: TG_GEMM_KERNEL='", value, "' is not a kernel this build can run on this CPU; valid: ",
                     names));
}

}  // namespace

std::vector<std::string> gemm_kernel_names() {
  std::vector<std::string> names{"auto", "tapegrad"};
#ifdef TG_HAVE_BLIS
  const CpuFeatures& f = cpu_features();
  for (const BlisConfig& config : kBlisConfigs)
    if (cpu_runs(config.isa, f)) names.push_back(concat("blis-", config.name));
#endif
  names.emplace_back("eigen");
  return names;
}

namespace {

// The AVX512-BF16 kernel packs both factors (its panels hold bf16 pairs) and runs at twice the
// float32 rate, so it takes products down to 32³ (as the float32 kernel does with a Bᵀ, whose
// packing it needs too); below, the small-product kernel on rounded copies of the factors.
constexpr int64_t kBf16From = int64_t{1} << 15;

GemmKernel choose_bf16_kernel() {
  const char* forced = std::getenv("TG_GEMM_KERNEL");
  const bool tapegrad_forced = forced != nullptr && std::string(forced) == "tapegrad";
  GemmKernel kernel = tapegrad_kernel("");
  kernel.flush_denormals = true;
  kernel.bf16 = bf16_micro_kernel();
  if (kernel.bf16) {
    kernel.name = "tapegrad-avx512bf16";
    kernel.packed_from = kernel.packed_from_trans_b = kBf16From;
  } else {
    kernel.name = "tapegrad-bf16-emulated";
  }
  // TG_GEMM_KERNEL=tapegrad: every product but the tiny ones in the blocked loops, as for float32.
  if (tapegrad_forced) kernel.packed_from = kernel.packed_from_trans_b = kTinyProduct;
  kernel.reason =
      kernel.bf16 ? concat("AVX512-BF16: vdpbf16ps from 2^", std::countr_zero(static_cast<uint64_t>(kernel.packed_from)),
                           " multiply-adds, the small-product kernel (", name(vector_isa()),
                           ") on bf16-rounded factors below")
                  : concat(cpu_features().avx512bf16 ? "vector level " + std::string(name(vector_isa())) + " (AVX512-BF16 off)"
                                                     : std::string("no AVX512-BF16"),
                           ": bf16-rounded factors on tapegrad's float32 kernels (", name(vector_isa()),
                           ") with FTZ and DAZ, the same bits");
  return kernel;
}

}  // namespace

const GemmKernel& bf16_gemm_kernel() {
  static const GemmKernel kernel = choose_bf16_kernel();
  return kernel;
}

const GemmKernel& bf16_values_gemm_kernel() {
  static const GemmKernel kernel = [] {
    GemmKernel values = bf16_gemm_kernel();
    values.factors_bf16 = true;
    return values;
  }();
  return kernel;
}

const GemmKernel& gemm_kernel() {
  // A function-local static: initialised once, thread-safely; when the choice throws (a bad
  // TG_GEMM_KERNEL) it stays uninitialised, so every later call throws again.
  static const GemmKernel kernel = choose_kernel();
  return kernel;
}

}  // namespace tg::detail
