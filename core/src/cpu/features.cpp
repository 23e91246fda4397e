#include "cpu/features.hpp"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

namespace tg::detail {

namespace {

struct Registers {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Registers cpuid(unsigned leaf, unsigned subleaf = 0) {
  Registers r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

bool bit(unsigned reg, int index) { return (reg >> index) & 1u; }

// XCR0 says which register states the OS saves on a context switch: a CPU may support AVX-512
// while the OS (or a hypervisor) leaves the zmm state off, and then AVX-512 code faults.
uint64_t xcr0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

CpuFeatures read_cpu_features() {
  CpuFeatures f;
  const unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf == 0) return f;

  const Registers leaf0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor + 0, &leaf0.ebx, 4);
  std::memcpy(vendor + 4, &leaf0.edx, 4);
  std::memcpy(vendor + 8, &leaf0.ecx, 4);
  f.vendor = vendor;

  const Registers leaf1 = cpuid(1);
  const int base_family = (leaf1.eax >> 8) & 0xf;
  const int base_model = (leaf1.eax >> 4) & 0xf;
  const int ext_family = (leaf1.eax >> 20) & 0xff;
  const int ext_model = (leaf1.eax >> 16) & 0xf;
  f.family = base_family == 0xf ? base_family + ext_family : base_family;
  f.model = (base_family == 0x6 || base_family == 0xf) ? (ext_model << 4) + base_model : base_model;

  const bool osxsave = bit(leaf1.ecx, 27);
  const uint64_t xcr = osxsave ? xcr0() : 0;
  const bool os_saves_avx = (xcr & 0x6) == 0x6;                // xmm + ymm
  const bool os_saves_avx512 = os_saves_avx && (xcr & 0xe0) == 0xe0;  // opmask + zmm halves
  f.sse42 = bit(leaf1.ecx, 20);
  f.avx = bit(leaf1.ecx, 28) && os_saves_avx;
  f.fma = bit(leaf1.ecx, 12) && os_saves_avx;
  if (max_leaf >= 7) {
    const Registers leaf7 = cpuid(7, 0);
    f.avx2 = bit(leaf7.ebx, 5) && os_saves_avx;
    f.avx512f = bit(leaf7.ebx, 16) && os_saves_avx512;
    f.avx512dq = bit(leaf7.ebx, 17) && os_saves_avx512;
    f.avx512bw = bit(leaf7.ebx, 30) && os_saves_avx512;
    f.avx512vl = bit(leaf7.ebx, 31) && os_saves_avx512;
    // Leaf 7's EAX is its highest subleaf; subleaf 1 lists the newer extensions.
    if (leaf7.eax >= 1) f.avx512bf16 = bit(cpuid(7, 1).eax, 5) && os_saves_avx512;
  }

  if (__get_cpuid_max(0x80000000u, nullptr) >= 0x80000004u) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Registers r = cpuid(0x80000002u + i);
      std::memcpy(brand + 16 * i + 0, &r.eax, 4);
      std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
      std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
      std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    f.brand = brand;
    const auto first = f.brand.find_first_not_of(' ');
    const auto last = f.brand.find_last_not_of(' ');
    f.brand = first == std::string::npos ? std::string() : f.brand.substr(first, last - first + 1);
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_cpu_features();
  return features;
}

}  // namespace tg::detail
