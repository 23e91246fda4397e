// Random numbers against PyTorch: tests/fixtures/random.txt and random_native.txt, written by
// tests/fixtures/make_random_fixtures.py from torch's scalar CPU kernels (ATEN_CPU_CAPABILITY=
// default) and from its vectorised ones. The twister itself is checked against std::mt19937.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <tbb/task_arena.h>

#include "core_test_util.hpp"

using tg::Tensor;
using tg::testing::fixture;

namespace {

const tg::testing::FixtureCase& random_case(const std::string& name) { return fixture("random.txt", name); }

uint64_t case_seed(const tg::testing::FixtureCase& c) { return static_cast<uint64_t>(c.scalar("seed")); }

tg::DType dtype_of(const std::string& case_name) {
  return case_name.ends_with("f64") ? tg::kFloat64 : tg::kFloat32;
}

// REQUIRE that `actual` holds exactly the bits of `expected` (same shape and dtype).
void require_bitwise_equal(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(actual.dtype() == expected.dtype());
  const std::vector<double> got = tg::testing::values(actual), want = tg::testing::values(expected);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " of " << got.size());
    REQUIRE(got[i] == want[i]);
  }
}

const std::vector<int64_t> kSizes = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 100, 1000, 4097};

}  // namespace

TEST_CASE("Generator: the twister draws std::mt19937's words, seeded with the low 32 bits", "[core][random]") {
  const uint64_t seed = GENERATE(uint64_t{0}, uint64_t{5489}, (uint64_t{1} << 40) + 5);
  tg::Generator gen(seed);
  std::mt19937 reference(static_cast<uint32_t>(seed));
  for (int i = 0; i < 2000; ++i) REQUIRE(gen.random() == reference());  // crosses three regenerations
  std::mt19937 reference64(static_cast<uint32_t>(seed));
  tg::Generator gen64(seed);
  const uint64_t high = reference64(), low = reference64();
  CHECK(gen64.random64() == ((high << 32) | low));
  CHECK(gen.initial_seed() == seed);
}

TEST_CASE("random: torch's check values after manual_seed(0)", "[core][random]") {
  // Written down from PyTorch's documentation of its own outputs, to 4 decimals.
  tg::manual_seed(0);
  tg::testing::require_ieee_equal(tg::randn({4, 4}).reshape({16}).to(tg::kFloat64)
                                      .reshape({16}),
                                  {-1.1258, -1.1524, -0.2506, -0.4339, 0.8487, 0.6920, -0.3160, -2.1152, 0.3223,
                                   -1.2633, 0.3500, 0.3081, 0.1198, 1.2377, 1.1168, -0.2473},
                                  1e-4);
  tg::manual_seed(0);
  tg::testing::require_ieee_equal(tg::randn({3}), {1.5410, -0.2934, -2.1788}, 1e-4);
  tg::manual_seed(0);
  tg::testing::require_ieee_equal(tg::rand({4}), {0.4963, 0.7682, 0.0885, 0.1320}, 1e-4);
  // And bitwise against the fixture.
  for (const char* name : {"check_randn_4x4", "check_randn_3", "check_rand_4"}) {
    INFO(name);
    const auto& c = random_case(name);
    tg::manual_seed(case_seed(c));
    const Tensor expected = c.at("values");
    require_bitwise_equal(std::string(name).find("randn") != std::string::npos ? tg::randn(expected.shape())
                                                                                 : tg::rand(expected.shape()),
                          expected);
  }
}

TEST_CASE("random: rand and randn equal torch's scalar kernels bit for bit", "[core][random]") {
  const int64_t size = GENERATE_COPY(from_range(kSizes));
  const std::string tag = GENERATE(as<std::string>{}, "f32", "f64");
  for (const std::string op : {"rand", "randn"}) {
    const std::string name = op + "_" + std::to_string(size) + "_" + tag;
    INFO(name);
    const auto& c = random_case(name);
    tg::manual_seed(case_seed(c));
    const Tensor actual = op == "rand" ? tg::rand({size}, dtype_of(name)) : tg::randn({size}, dtype_of(name));
    require_bitwise_equal(actual, c.at("values"));
  }
}

TEST_CASE("random: randn near torch's vectorised kernel, equal to it below 16 elements and in float64",
          "[core][random]") {
  // torch's AVX2 build approximates log, sin and cos (avx_mathfun.h) on float32 blocks of 16; below
  // 16 elements, and in float64, it takes the scalar path and tapegrad equals it bit for bit.
  // Measured on the fixture: float32 values ≥ 16 differ in about a third of the elements, by at
  // most 1.5e-6·max(1, |x|) (22 ulps where |x| ≥ 0.5; more ulps only for values near 0).
  for (int64_t size : kSizes) {
    for (const std::string tag : {"f32", "f64"}) {
      const std::string name = "randn_" + std::to_string(size) + "_" + tag;
      INFO(name);
      const auto& c = fixture("random_native.txt", name);
      tg::manual_seed(case_seed(c));
      const Tensor actual = tg::randn({size}, dtype_of(tag));
      if (size < 16 || tag == "f64") {
        require_bitwise_equal(actual, c.at("values"));
        continue;
      }
      const std::vector<float> got = actual.to_vector<float>(), want = c.at("values").to_vector<float>();
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i << ": " << got[i] << " vs " << want[i]);
        REQUIRE(std::fabs(got[i] - want[i]) <= 2e-6f * std::max(1.0f, std::fabs(want[i])));
      }
    }
  }
}

TEST_CASE("random: uniform_ and normal_ with bounds, mean and std", "[core][random]") {
  const int64_t size = GENERATE(5, 100);
  const std::string tag = GENERATE(as<std::string>{}, "f32", "f64");
  // (appended piece by piece: GCC 12's -Wrestrict misfires on "_" + std::to_string(...) here)
  std::string suffix = "_";
  suffix += std::to_string(size);
  suffix += "_";
  suffix += tag;
  {
    const auto& c = random_case("uniform" + suffix);
    tg::manual_seed(case_seed(c));
    require_bitwise_equal(tg::empty({size}, dtype_of(tag)).uniform_(-2.5, 3.5), c.at("values"));
  }
  {
    const auto& c = random_case("normal" + suffix);
    tg::manual_seed(case_seed(c));
    require_bitwise_equal(tg::empty({size}, dtype_of(tag)).normal_(1.5, 0.25), c.at("values"));
  }
}

TEST_CASE("random: the second normal of a pair is cached between calls and dropped by manual_seed",
          "[core][random]") {
  const auto& c = random_case("sequence_f64");
  tg::manual_seed(case_seed(c));
  const std::vector<Tensor> draws = {tg::randn({3}, tg::kFloat64), tg::randn({3}, tg::kFloat64),
                                     tg::randn({20}, tg::kFloat64), tg::rand({5}, tg::kFloat64),
                                     tg::randn({1}, tg::kFloat64)};
  for (size_t i = 0; i < draws.size(); ++i) {
    INFO("draw " << i);
    require_bitwise_equal(draws[i], c.at("draw" + std::to_string(i)));
  }
  const auto& reseeded = random_case("reseed_drops_cache");
  tg::manual_seed(case_seed(reseeded));
  (void)tg::randn({1}, tg::kFloat64);  // leaves a cached normal behind
  tg::manual_seed(case_seed(reseeded));
  require_bitwise_equal(tg::randn({2}, tg::kFloat64), reseeded.at("values"));
}

TEST_CASE("random: seeds, the default seed and generators of their own", "[core][random]") {
  const auto& high_bits = random_case("seed_high_bits");
  const uint64_t big_seed = (uint64_t{1} << 40) + 5;
  tg::manual_seed(big_seed);
  require_bitwise_equal(tg::rand({4}), high_bits.at("values"));
  CHECK(tg::default_generator().initial_seed() == static_cast<uint64_t>(high_bits.ints("initial_seed")[0]));

  const auto& own = random_case("own_generator");
  tg::manual_seed(0);
  tg::Generator gen(case_seed(own));
  require_bitwise_equal(tg::randn({20}, gen), own.at("own"));
  require_bitwise_equal(tg::rand({4}), own.at("default"));  // the default generator was not touched
  require_bitwise_equal(tg::rand({3}, gen, tg::kFloat64), own.at("own_rand"));

  const auto& unseeded = random_case("default_seed");
  tg::Generator fresh;
  CHECK(fresh.initial_seed() == case_seed(unseeded));
  require_bitwise_equal(tg::rand({4}, fresh), unseeded.at("values"));
}

TEST_CASE("random: bernoulli_ masks and dropout's mask equal torch's", "[core][random]") {
  for (int tenths : {0, 3, 5, 10}) {
    for (const std::string tag : {"f32", "f64"}) {
      const std::string name = "bernoulli_p" + std::to_string(tenths) + "_" + tag;
      INFO(name);
      const auto& c = random_case(name);
      tg::manual_seed(case_seed(c));
      require_bitwise_equal(tg::empty({1000}, dtype_of(tag)).bernoulli_(c.scalar("p")), c.at("values"));
    }
  }
  // F.dropout(ones, p) keeps an element when bernoulli_(1 − p) drew 1, and scales it by 1/(1 − p).
  const auto& c = random_case("dropout_mask");
  tg::manual_seed(case_seed(c));
  const double p = c.scalar("p");
  const Tensor kept = tg::empty({8, 64}).bernoulli_(1.0 - p);
  const std::vector<float> mask = kept.to_vector<float>(), dropped = c.at("values").to_vector<float>();
  for (size_t i = 0; i < mask.size(); ++i) {
    INFO("element " << i);
    REQUIRE((mask[i] == 1.0f) == (dropped[i] != 0.0f));
  }
}

TEST_CASE("random: randint and randperm equal torch's", "[core][random]") {
  struct RandintCase {
    const char* name;
    int64_t low, high, size;
  };
  for (const RandintCase& r : {RandintCase{"randint_20_0_10", 0, 10, 20}, RandintCase{"randint_7_5_5", -5, 5, 7},
                               RandintCase{"randint_5_0_8589934592", 0, int64_t{1} << 33, 5},  // two words each
                               RandintCase{"randint_3_3_4", 3, 4, 3}}) {
    INFO(r.name);
    const auto& c = random_case(r.name);
    tg::manual_seed(case_seed(c));
    const Tensor values = tg::randint(r.low, r.high, {r.size});
    REQUIRE(values.dtype() == tg::kInt64);
    CHECK(values.to_vector<int64_t>() == c.ints("values"));
  }
  {
    // In float64 the same integers, and randint(high, shape) starts at 0.
    const auto& c = random_case("randint_20_0_10");
    tg::manual_seed(case_seed(c));
    const std::vector<double> as_double = tg::randint(10, {20}, tg::kFloat64).to_vector<double>();
    CHECK(std::vector<int64_t>(as_double.begin(), as_double.end()) == c.ints("values"));
  }
  for (int64_t n : {0, 1, 2, 5, 10, 100, 1000}) {
    INFO("randperm(" << n << ")");
    const auto& c = random_case("randperm_" + std::to_string(n));
    tg::manual_seed(case_seed(c));
    CHECK(tg::randperm(n).to_vector<int64_t>() == c.ints("values"));
    tg::Generator gen(case_seed(c));
    CHECK(tg::randperm(n, gen).to_vector<int64_t>() == c.ints("values"));
  }
  REQUIRE_TG_ERROR(tg::randint(5, 5, {2}), Catch::Contains("randint") && Catch::Contains("low < high"));
  REQUIRE_TG_ERROR(tg::randint(0, (int64_t{1} << 24) + 2, {2}, tg::kFloat32), Catch::Contains("randint"));
  REQUIRE_TG_ERROR(tg::randint(0, 2, {2}, tg::kBool), Catch::Contains("randint") && Catch::Contains("bool"));
  REQUIRE_TG_ERROR(tg::randperm(-1), Catch::Contains("randperm") && Catch::Contains("-1"));
}

TEST_CASE("Generator: get_state / set_state and copies replay the same draws", "[core][random]") {
  tg::Generator gen(2024);
  (void)tg::randn({5}, gen, tg::kFloat64);  // 5 normals: a cached one is part of the state now
  const tg::GeneratorState saved = gen.get_state();
  CHECK(saved.has_cached_normal);
  const tg::Generator copy = gen;
  const Tensor first = tg::randn({7}, gen, tg::kFloat64);
  const Tensor first_again_from_copy = tg::randn({7}, const_cast<tg::Generator&>(copy), tg::kFloat64);
  require_bitwise_equal(first_again_from_copy, first);
  CHECK(gen.get_state() != saved);
  gen.set_state(saved);
  CHECK(gen.get_state() == saved);
  require_bitwise_equal(tg::randn({7}, gen, tg::kFloat64), first);

  // The state is a plain value: its bytes, copied out and back, are the whole state.
  std::vector<unsigned char> bytes(sizeof(tg::GeneratorState));
  std::memcpy(bytes.data(), &saved, bytes.size());
  tg::GeneratorState restored;
  std::memcpy(&restored, bytes.data(), bytes.size());
  gen.set_state(restored);
  require_bitwise_equal(tg::randn({7}, gen, tg::kFloat64), first);

  tg::GeneratorState broken = saved;
  broken.index = 625;
  REQUIRE_TG_ERROR(gen.set_state(broken), Catch::Contains("set_state") && Catch::Contains("625"));
}

TEST_CASE("random: draws are bitwise identical at any thread count", "[core][random][threads]") {
  std::vector<float> reference;
  for (int threads : {1, 2, 3, 8}) {
    INFO(threads << " threads");
    tbb::task_arena arena(threads);
    std::vector<float> values;
    arena.execute([&] {
      tg::Generator gen(99);
      values = tg::randn({1 << 20}, gen).to_vector<float>();  // the Box–Muller blocks run in parallel
      const std::vector<float> uniform = tg::rand({1000}, gen).to_vector<float>();
      values.insert(values.end(), uniform.begin(), uniform.end());
    });
    if (reference.empty()) reference = values;
    REQUIRE(values == reference);
  }
}

TEST_CASE("random: bad arguments throw tg::Error naming the operation", "[core][random][errors]") {
  Tensor t = tg::empty({3});
  REQUIRE_TG_ERROR(t.uniform_(1.0, 0.0), Catch::Contains("uniform_") && Catch::Contains("low <= high"));
  REQUIRE_TG_ERROR(t.normal_(0.0, -1.0), Catch::Contains("normal_") && Catch::Contains("-1"));
  REQUIRE_TG_ERROR(t.bernoulli_(1.5), Catch::Contains("bernoulli_") && Catch::Contains("1.5"));
  REQUIRE_TG_ERROR(t.bernoulli_(-0.1), Catch::Contains("bernoulli_"));
  Tensor leaf = tg::zeros({2}).requires_grad_();
  REQUIRE_TG_ERROR(leaf.bernoulli_(0.5), Catch::Contains("bernoulli_") && Catch::Contains("requires grad"));
  REQUIRE_TG_ERROR(Tensor().normal_(), Catch::Contains("normal_") && Catch::Contains("undefined"));
  Tensor integers = tg::zeros({2}, tg::kInt64);
  REQUIRE_TG_ERROR(integers.normal_(), Catch::Contains("normal_") && Catch::Contains("int64"));
}
