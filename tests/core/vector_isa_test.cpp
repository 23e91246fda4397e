// The vector level of the row kernels: TG_CPU_ISA's values, refusal of a level the CPU lacks,
// and the reduction kernel at every level the CPU has, against a plain double sum.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core_test_util.hpp"
#include "support/vector_isa_levels.hpp"

using tg::Shape;
using tg::Tensor;
using tg::detail::CpuFeatures;
using tg::detail::VectorIsa;

namespace {

CpuFeatures cpu_with(bool sse42, bool avx2_fma, bool avx512) {
  CpuFeatures cpu;
  cpu.brand = "Test CPU";
  cpu.sse42 = sse42;
  cpu.avx = cpu.avx2 = cpu.fma = avx2_fma;
  cpu.avx512f = cpu.avx512bw = cpu.avx512dq = cpu.avx512vl = avx512;
  return cpu;
}

}  // namespace

TEST_CASE("TG_CPU_ISA values: each level by name, auto = the best the CPU has", "[core][vector_isa]") {
  const CpuFeatures everything = cpu_with(true, true, true), no_avx512 = cpu_with(true, true, false),
                    sse42_only = cpu_with(true, false, false);
  REQUIRE(tg::detail::parse_vector_isa("auto", everything) == VectorIsa::avx512);
  REQUIRE(tg::detail::parse_vector_isa("auto", no_avx512) == VectorIsa::v3);
  REQUIRE(tg::detail::parse_vector_isa("auto", sse42_only) == VectorIsa::v2);
  REQUIRE(tg::detail::parse_vector_isa("v2", everything) == VectorIsa::v2);
  REQUIRE(tg::detail::parse_vector_isa("v3", everything) == VectorIsa::v3);
  REQUIRE(tg::detail::parse_vector_isa("avx512", everything) == VectorIsa::avx512);
  // AVX-512 F alone is not enough: the level is compiled with BW, DQ and VL too.
  CpuFeatures avx512f_only = everything;
  avx512f_only.avx512bw = false;
  REQUIRE(tg::detail::parse_vector_isa("auto", avx512f_only) == VectorIsa::v3);
}

TEST_CASE("a level the CPU lacks, or an unknown value, is a tg::Error naming the valid values",
          "[core][vector_isa]") {
  const CpuFeatures sse42_only = cpu_with(true, false, false);
  REQUIRE_THROWS_MATCHES(tg::detail::parse_vector_isa("avx512", sse42_only), tg::Error,
                         Catch::Message("TG_CPU_ISA: this CPU (Test CPU) cannot run the 'avx512' kernels; valid "
                                        "values here: v2, v3, avx512 or auto up to 'v2'"));
  REQUIRE_THROWS_WITH(tg::detail::parse_vector_isa("v3", sse42_only), Catch::Contains("'v3'"));
  REQUIRE_THROWS_MATCHES(tg::detail::parse_vector_isa("AVX512", sse42_only), tg::Error,
                         Catch::Message("TG_CPU_ISA: expected v2, v3, avx512 or auto, got 'AVX512'"));
  REQUIRE_THROWS_WITH(tg::detail::parse_vector_isa("", sse42_only), Catch::Contains("got ''"));
  // A CPU without even SSE4.2 gets an error, not an illegal instruction.
  REQUIRE_THROWS_WITH(tg::detail::parse_vector_isa("auto", cpu_with(false, false, false)),
                      Catch::Contains("x86-64-v2"));
}

TEST_CASE("this CPU: the chosen level is one it supports, and forcing one it lacks is refused",
          "[core][vector_isa]") {
  REQUIRE(tg::detail::cpu_supports(tg::detail::vector_isa()));
  for (VectorIsa isa : {VectorIsa::v2, VectorIsa::v3, VectorIsa::avx512}) {
    CAPTURE(tg::detail::name(isa));
    if (tg::detail::cpu_supports(isa)) continue;
    REQUIRE_THROWS_AS(tg::detail::set_vector_isa(isa), tg::Error);
    REQUIRE_THROWS_AS(tg::detail::parse_vector_isa(tg::detail::name(isa)), tg::Error);
  }
}

// Run by ctest with TG_CPU_ISA=sse9 (tests/core/CMakeLists.txt), hidden from the plain run.
TEST_CASE("with TG_CPU_ISA set to an unknown value, the first dispatched kernel throws", "[.][isa_env_unknown]") {
  REQUIRE_THROWS_MATCHES(tg::ones({4, 3}).sum(), tg::Error,
                         Catch::Message("TG_CPU_ISA: expected v2, v3, avx512 or auto, got 'sse9'"));
}

TEST_CASE("sums at every vector level equal a plain sum and each other, bit for bit",
          "[core][vector_isa][reduction]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  // [A, R, B] shapes of each kernel path: B = 1 (a row sum, with a tail after the lanes), narrow B,
  // and B wide enough for column blocks; R long enough for several chunks.
  const Shape shape = GENERATE(Shape{3, 1000, 1}, Shape{2, 70001, 1}, Shape{4, 333, 5}, Shape{2, 20000, 3},
                               Shape{3, 17, 700});
  CAPTURE(dtype, shape);
  tg::manual_seed(41);
  const Tensor x = tg::randn(shape, dtype) * 3.0 + 1.0;
  const auto per_level = tg::testing::at_every_supported_level([&] { return x.sum({1}).to(tg::kFloat64); });

  const std::vector<double> values = x.to(tg::kFloat64).to_vector<double>();
  const int64_t A = shape[0], R = shape[1], B = shape[2];
  const std::vector<double> first = per_level.front().second.to_vector<double>();
  for (const auto& [level, sum] : per_level) {
    CAPTURE(level);
    const std::vector<double> got = sum.to_vector<double>();
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b) {
        // The reference: a sequential sum in long double. The kernel sums in double and rounds
        // once to the dtype: within half an ulp of the dtype, plus double rounding.
        long double reference = 0, magnitude = 0;
        for (int64_t r = 0; r < R; ++r) {
          reference += values[(a * R + r) * B + b];
          magnitude += std::fabs(values[(a * R + r) * B + b]);
        }
        const double ulp = dtype == tg::kFloat32 ? 0x1p-24 : 0.0;
        const double tolerance = ulp * std::fabs(static_cast<double>(reference)) + 1e-15 * static_cast<double>(magnitude);
        REQUIRE(std::fabs(got[a * B + b] - static_cast<double>(reference)) <= tolerance);
      }
    REQUIRE(std::memcmp(got.data(), first.data(), sizeof(double) * got.size()) == 0);
  }
}

TEST_CASE("cpu_info names the row kernels' level and every value TG_CPU_ISA accepts here", "[core][vector_isa]") {
  const tg::CpuInfo info = tg::cpu_info();
  CHECK(info.row_kernel_isa == tg::detail::name(tg::detail::vector_isa()));
  REQUIRE(!info.row_kernel_isas.empty());
  CHECK(info.row_kernel_isas.front() == "auto");
  for (VectorIsa isa : {VectorIsa::v2, VectorIsa::v3, VectorIsa::avx512}) {
    const bool listed = std::find(info.row_kernel_isas.begin(), info.row_kernel_isas.end(), tg::detail::name(isa)) !=
                        info.row_kernel_isas.end();
    CHECK(listed == tg::detail::cpu_supports(isa));
  }
  CHECK_THAT(tg::to_string(info), Catch::EndsWith("; row kernels " + info.row_kernel_isa));
}
