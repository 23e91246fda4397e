// The GEMM kernel choice (core/src/cpu/gemm_kernel.cpp): tapegrad's micro-kernel at v3 and avx512
// (the same bits at both), BLIS's detection forced to 'generic', forced and refused kernels, and the matmul tests on every kernel this CPU has. The kernel is
// chosen once per process, so each choice runs in a child process: this test binary again
// (/proc/self/exe), with the environment variable under test.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core_test_util.hpp"
#include "cpu/vector_isa.hpp"

#ifdef TG_TEST_HAVE_BLIS
#include <blis.h>
#endif

using Catch::Matchers::Contains;

namespace {

struct ChildResult {
  int status = -1;     // exit status, or -1 when it did not exit normally (a signal: SIGILL, abort)
  std::string output;  // stdout and stderr
};

// Runs this test binary with `env` (VAR=value ... ; variables not named are unset) and Catch2's
// `arguments`.
// A child process running this test program with `env` set and the given Catch2 arguments, started
// at once: several children run side by side, and finish_child collects each one's output and exit
// status in turn.
struct Child {
  std::string command;
  FILE* pipe = nullptr;
};

Child start_child(const std::string& env, const std::string& arguments) {
  std::array<char, 4096> self{};
  const ssize_t length = readlink("/proc/self/exe", self.data(), self.size() - 1);
  REQUIRE(length > 0);
  Child child;
  child.command = "env -u TG_GEMM_KERNEL -u BLIS_ARCH_TYPE " + env + " '" + std::string(self.data()) + "' " +
                  arguments + " 2>&1";
  child.pipe = popen(child.command.c_str(), "r");
  REQUIRE(child.pipe != nullptr);
  return child;
}

ChildResult finish_child(const Child& child) {
  ChildResult result;
  std::array<char, 4096> buffer{};
  while (size_t n = std::fread(buffer.data(), 1, buffer.size(), child.pipe)) result.output.append(buffer.data(), n);
  const int status = pclose(child.pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  INFO(child.command << "\n" << result.output);
  return result;
}

ChildResult run_self(const std::string& env, const std::string& arguments) {
  return finish_child(start_child(env, arguments));
}

// The value after "key=" on the probe's line, up to the end of the line.
std::string probe_value(const std::string& output, const std::string& key) {
  const std::string marker = "gemm_probe " + key + "=";
  const size_t at = output.find(marker);
  if (at == std::string::npos) return "";
  const size_t begin = at + marker.size();
  return output.substr(begin, output.find('\n', begin) - begin);
}

// FNV-1a over the bytes of the products the probe computes: equal hashes, bitwise equal results.
std::string products_hash() {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](const tg::Tensor& t) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(t.data<float>());
    for (int64_t i = 0; i < t.numel() * 4; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  };
  // Sizes that take each path: tiny (Eigen), small, packed in one tile, packed in two tiles.
  for (const auto& [M, K, N] : {std::array<int64_t, 3>{3, 5, 4}, {64, 32, 64}, {300, 200, 250}, {600, 300, 500}}) {
    tg::manual_seed(41);
    tg::Tensor a = tg::randn({M, K}).requires_grad_();
    tg::Tensor b = tg::randn({K, N}).requires_grad_();
    const tg::Tensor c = tg::matmul(a, b);
    c.backward(tg::randn({M, N}));  // dA = dC·Bᵀ, dB = Aᵀ·dC: the other two operand layouts
    mix(c);
    mix(a.grad());
    mix(b.grad());
  }
  return std::to_string(hash);
}

bool has(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

// Run by the tests below in a child process only ("[.]": hidden from a plain run).
TEST_CASE("gemm probe: the kernel chosen in this process and a hash of its products", "[.gemm_probe]") {
  try {
    const tg::CpuInfo info = tg::cpu_info();
    std::printf("gemm_probe kernel=%s\ngemm_probe hash=%s\n", info.gemm_kernel.c_str(), products_hash().c_str());
  } catch (const tg::Error& error) {
    std::printf("gemm_probe error=%s\n", error.what());
  }
}

TEST_CASE("gemm kernel: cpu_info names the chosen kernel, why, and the valid choices", "[core][gemm_kernel]") {
  const tg::CpuInfo info = tg::cpu_info();
  CHECK(!info.gemm_reason.empty());
  REQUIRE(info.gemm_kernels.size() >= 2);
  CHECK(info.gemm_kernels.front() == "auto");
  CHECK(has(info.gemm_kernels, "eigen"));
  CHECK(has(info.gemm_kernels, info.gemm_kernel));
  const std::string line = tg::to_string(info);
  CHECK_THAT(line, Contains(info.vendor) && Contains("family " + std::to_string(info.family)) &&
                       Contains(info.gemm_kernel) && Contains(info.gemm_reason));
  const bool avx2_fma = has(info.features, "avx2") && has(info.features, "fma");
  // At v3 and avx512, tapegrad's micro-kernel. At v2 (a CPU without AVX2+FMA, or TG_CPU_ISA=v2),
  // a CPU with AVX2+FMA still gets a vector kernel of BLIS's, whatever BLIS's own detection says.
  const bool v2 = tg::detail::vector_isa() == tg::detail::VectorIsa::v2;
  CHECK(has(info.gemm_kernels, "tapegrad"));
  if (!v2) CHECK(info.gemm_kernel == "tapegrad");
#ifdef TG_TEST_HAVE_BLIS
  if (v2 && avx2_fma) CHECK(info.gemm_kernel != "blis-generic");
  if (v2 && avx2_fma) CHECK(info.gemm_kernel.rfind("blis-", 0) == 0);
#else
  if (v2) CHECK(info.gemm_kernel == "eigen");
  (void)avx2_fma;
#endif
}

TEST_CASE("gemm kernel: products have the same bits at v3 and avx512 (one chain of FMAs per element)",
          "[core][gemm_kernel]") {
  std::vector<std::string> hashes;
  for (const auto level : {tg::detail::VectorIsa::v3, tg::detail::VectorIsa::avx512}) {
    if (!tg::detail::cpu_supports(level)) {
      WARN("skipped: this CPU has no " << tg::detail::name(level));
      continue;
    }
    const ChildResult child = run_self(std::string("TG_CPU_ISA=") + tg::detail::name(level), "'[.gemm_probe]'");
    INFO(child.output);
    REQUIRE(probe_value(child.output, "kernel") == "tapegrad");
    hashes.push_back(probe_value(child.output, "hash"));
  }
  if (hashes.size() == 2) CHECK(hashes[0] == hashes[1]);
}

#ifdef TG_TEST_HAVE_BLIS
TEST_CASE("gemm kernel: with BLIS's detection forced to 'generic', an AVX2 CPU still runs a vector kernel, "
          "bitwise the same as the default path",
          "[core][gemm_kernel]") {
  const tg::CpuInfo info = tg::cpu_info();
  // BLIS 0.9 reads BLIS_ARCH_TYPE as a number ("generic" would read as 0, which is skx).
  const ChildResult forced = run_self("BLIS_ARCH_TYPE=" + std::to_string(static_cast<int>(BLIS_ARCH_GENERIC)),
                                      "'[.gemm_probe]'");
  REQUIRE(forced.status == 0);
  const std::string kernel = probe_value(forced.output, "kernel");
  INFO(forced.output);
  REQUIRE(!kernel.empty());
  if (has(info.features, "avx2") && has(info.features, "fma")) {
    CHECK(kernel != "blis-generic");
    CHECK(kernel != "eigen");
  }
  // The default path for that kernel, where BLIS's own detection names its configuration: this
  // process when it chose the same kernel (BLIS detects it, or 'generic' as on AMD family 26), else
  // a child in which BLIS detects it (BLIS_ARCH_TYPE). Not TG_GEMM_KERNEL, which also moves the
  // size from which products go to BLIS, and so changes the bits of the mid-sized ones.
  std::string default_hash;
  if (kernel == info.gemm_kernel) {
    default_hash = products_hash();
  } else {
    const std::string config = kernel.substr(std::string("blis-").size());
    int id = 0;
    while (id < BLIS_NUM_ARCHS && config != bli_arch_string(static_cast<arch_t>(id))) ++id;
    REQUIRE(id < BLIS_NUM_ARCHS);
    const ChildResult detected = run_self("BLIS_ARCH_TYPE=" + std::to_string(id), "'[.gemm_probe]'");
    INFO(detected.output);
    REQUIRE(probe_value(detected.output, "kernel") == kernel);
    default_hash = probe_value(detected.output, "hash");
  }
  CHECK(probe_value(forced.output, "hash") == default_hash);
}

TEST_CASE("gemm kernel: at v2, where BLIS detects an AVX2 configuration on a CPU with AVX-512, auto takes skx; "
          "on an AVX2 CPU it keeps BLIS's",
          "[core][gemm_kernel]") {
  const tg::CpuInfo info = tg::cpu_info();
  if (!has(info.features, "avx2") || !has(info.features, "fma")) return;  // no AVX2 kernel can run here
  const bool avx512 = has(info.features, "avx512f") && has(info.features, "avx512dq") &&
                      has(info.features, "avx512bw") && has(info.features, "avx512vl");
  for (const arch_t id : {BLIS_ARCH_HASWELL, BLIS_ARCH_ZEN3}) {
    const ChildResult child =
        run_self("TG_CPU_ISA=v2 BLIS_ARCH_TYPE=" + std::to_string(static_cast<int>(id)), "'[.gemm_probe]'");
    INFO(child.output);
    CHECK(probe_value(child.output, "kernel") == (avx512 ? std::string("blis-skx") : "blis-" + std::string(bli_arch_string(id))));
  }
}

TEST_CASE("gemm kernel: a BLIS_ARCH_TYPE that BLIS would abort on is a tg::Error where BLIS is chosen (at v2)",
          "[core][gemm_kernel]") {
  for (const std::string value : {"99", "-1"}) {
    const ChildResult child = run_self("TG_CPU_ISA=v2 BLIS_ARCH_TYPE=" + value, "'[.gemm_probe]'");
    CHECK(child.status == 0);  // no abort
    CHECK_THAT(probe_value(child.output, "error"), Contains("BLIS_ARCH_TYPE='" + value + "'") && Contains("generic"));
  }
}
#endif

TEST_CASE("gemm kernel: TG_GEMM_KERNEL forces a kernel; a bad value or one this CPU cannot run is refused",
          "[core][gemm_kernel]") {
  const tg::CpuInfo info = tg::cpu_info();
  const ChildResult eigen = run_self("TG_GEMM_KERNEL=eigen", "'[.gemm_probe]'");
  CHECK(probe_value(eigen.output, "kernel") == "eigen");

  // knl (Xeon Phi) is in Debian's libblis but never a choice; skx needs AVX-512.
  std::vector<std::string> refused{"blis-foo", "openblas", "blis-knl", "", "Auto"};
  if (!has(info.features, "avx512f")) refused.emplace_back("blis-skx");
  if (!has(info.features, "avx2")) refused.emplace_back("blis-haswell");
  for (const std::string& value : refused) {
    const ChildResult child = run_self("TG_GEMM_KERNEL='" + value + "'", "'[.gemm_probe]'");
    CHECK(child.status == 0);
    const std::string error = probe_value(child.output, "error");
    CHECK_THAT(error, Contains("TG_GEMM_KERNEL='" + value + "'") && Contains("valid: auto") && Contains("eigen"));
  }
}

TEST_CASE("gemm kernel: the matmul tests pass on every kernel this CPU has", "[core][gemm_kernel]") {
  // One child per kernel, all started before any is waited for: they run side by side (one after
  // another they made this the suite's longest test, 76 s on 2 cores).
  std::vector<std::string> kernels;
  std::vector<Child> probes, suites;
  for (const std::string& kernel : tg::cpu_info().gemm_kernels) {
    if (kernel == "auto") continue;  // this process
    kernels.push_back(kernel);
    probes.push_back(start_child("TG_GEMM_KERNEL=" + kernel, "'[.gemm_probe]'"));
    suites.push_back(start_child("TG_GEMM_KERNEL=" + kernel, "'[matmul]'"));
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    INFO("TG_GEMM_KERNEL=" << kernels[k]);
    const ChildResult probe = finish_child(probes[k]);
    CHECK(probe_value(probe.output, "kernel") == kernels[k]);
    const ChildResult tests = finish_child(suites[k]);
    CHECK(tests.status == 0);
  }
}
