#include "cpu/vector_isa.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include "cpu/features.hpp"
#include "tapegrad/error.hpp"

namespace tg::detail {

namespace {

constexpr VectorIsa kLevels[] = {VectorIsa::v2, VectorIsa::v3, VectorIsa::avx512};
constexpr const char* kValidValues = "v2, v3, avx512 or auto";

// The lowest level is x86-64-v2 (every x86-64 CPU since 2009); an older CPU gets an error, not
// an illegal instruction.
VectorIsa best_supported(const CpuFeatures& cpu) {
  check(cpu_supports(VectorIsa::v2, cpu), "TG_CPU_ISA", "this CPU (", cpu.brand,
        ") lacks SSE4.2; tapegrad's kernels need at least x86-64-v2");
  VectorIsa best = VectorIsa::v2;
  for (VectorIsa isa : kLevels)
    if (cpu_supports(isa, cpu)) best = isa;
  return best;
}

VectorIsa from_environment() {
  const char* value = std::getenv("TG_CPU_ISA");
  return parse_vector_isa(value ? value : "auto");
}

// The chosen level, set on first use (or by set_vector_isa); an atomic so that threads that run
// kernels read it without a lock once it is set.
std::atomic<int> chosen{-1};

}  // namespace

const char* name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::v3:
      return "v3";
    case VectorIsa::avx512:
      return "avx512";
    case VectorIsa::v2:
      break;
  }
  return "v2";
}

bool cpu_supports(VectorIsa isa, const CpuFeatures& cpu) {
  switch (isa) {
    case VectorIsa::avx512:
      return cpu.avx512f && cpu.avx512bw && cpu.avx512dq && cpu.avx512vl && cpu.avx2 && cpu.fma;
    case VectorIsa::v3:
      return cpu.avx2 && cpu.fma;
    case VectorIsa::v2:
      break;
  }
  return cpu.sse42;
}

VectorIsa parse_vector_isa(std::string_view value, const CpuFeatures& cpu) {
  if (value == "auto") return best_supported(cpu);
  for (VectorIsa isa : kLevels) {
    if (value != name(isa)) continue;
    check(cpu_supports(isa, cpu), "TG_CPU_ISA", "this CPU (", cpu.brand, ") cannot run the '", name(isa),
          "' kernels; valid values here: ", kValidValues, " up to '", name(best_supported(cpu)), "'");
    return isa;
  }
  throw Error(concat("TG_CPU_ISA: expected ", kValidValues, ", got '", std::string(value), "'"));
}

VectorIsa vector_isa() {
  int level = chosen.load(std::memory_order_acquire);
  if (level < 0) {
    // Concurrent first calls all parse the same environment and store the same level.
    level = static_cast<int>(from_environment());
    chosen.store(level, std::memory_order_release);
  }
  return static_cast<VectorIsa>(level);
}

void set_vector_isa(VectorIsa isa) {
  check(cpu_supports(isa), "set_vector_isa", "this CPU (", cpu_features().brand, ") cannot run the '", name(isa),
        "' kernels");
  chosen.store(static_cast<int>(isa), std::memory_order_release);
}

}  // namespace tg::detail
