// nn::init and Linear's initial weights against PyTorch: tests/fixtures/init.txt and random.txt,
// written by tests/fixtures/make_random_fixtures.py (torch's scalar CPU kernels).
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nn_test_util.hpp"

namespace init = tg::nn::init;
using init::FanMode;
using init::Nonlinearity;
using tg::Tensor;

namespace {

using InitFn = std::function<void(Tensor&, tg::Generator*)>;

// The cases of make_random_fixtures.py's INIT_CASES, by name.
const std::map<std::string, InitFn>& init_functions() {
  static const std::map<std::string, InitFn> functions = {
      {"uniform", [](Tensor& t, tg::Generator* g) { init::uniform_(t, -0.3, 0.7, g); }},
      {"normal", [](Tensor& t, tg::Generator* g) { init::normal_(t, 0.5, 2.0, g); }},
      {"zeros", [](Tensor& t, tg::Generator*) { init::zeros_(t); }},
      {"ones", [](Tensor& t, tg::Generator*) { init::ones_(t); }},
      {"constant", [](Tensor& t, tg::Generator*) { init::constant_(t, 0.25); }},
      {"xavier_uniform", [](Tensor& t, tg::Generator* g) { init::xavier_uniform_(t, 1.0, g); }},
      {"xavier_uniform_relu",
       [](Tensor& t, tg::Generator* g) { init::xavier_uniform_(t, init::calculate_gain(Nonlinearity::ReLU), g); }},
      {"xavier_normal", [](Tensor& t, tg::Generator* g) { init::xavier_normal_(t, 0.5, g); }},
      {"kaiming_uniform",
       [](Tensor& t, tg::Generator* g) { init::kaiming_uniform_(t, 0.0, FanMode::FanIn, Nonlinearity::LeakyReLU, g); }},
      {"kaiming_uniform_sqrt5",
       [](Tensor& t, tg::Generator* g) {
         init::kaiming_uniform_(t, std::sqrt(5.0), FanMode::FanIn, Nonlinearity::LeakyReLU, g);
       }},
      {"kaiming_uniform_fan_out_relu",
       [](Tensor& t, tg::Generator* g) { init::kaiming_uniform_(t, 0.0, FanMode::FanOut, Nonlinearity::ReLU, g); }},
      {"kaiming_normal",
       [](Tensor& t, tg::Generator* g) { init::kaiming_normal_(t, 0.0, FanMode::FanIn, Nonlinearity::LeakyReLU, g); }},
      {"kaiming_normal_tanh_fan_out",
       [](Tensor& t, tg::Generator* g) { init::kaiming_normal_(t, 0.0, FanMode::FanOut, Nonlinearity::Tanh, g); }},
      {"kaiming_normal_leaky",
       [](Tensor& t, tg::Generator* g) { init::kaiming_normal_(t, 0.2, FanMode::FanIn, Nonlinearity::LeakyReLU, g); }},
      {"trunc_normal", [](Tensor& t, tg::Generator* g) { init::trunc_normal_(t, 0.0, 1.0, -2.0, 2.0, g); }},
      {"trunc_normal_shifted", [](Tensor& t, tg::Generator* g) { init::trunc_normal_(t, 0.5, 0.2, 0.0, 1.0, g); }},
  };
  return functions;
}

const std::vector<tg::Shape> kShapes = {{6, 5}, {3, 4}, {4, 3, 2, 2}};

std::string shape_tag(const tg::Shape& shape) {
  std::string tag;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) tag += 'x';
    tag += std::to_string(shape[d]);
  }
  return tag;
}

void require_bitwise_equal(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(actual.dtype() == expected.dtype());
  const std::vector<double> got = tg::testing::values(actual), want = tg::testing::values(expected);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got[i] << " vs " << want[i]);
    REQUIRE(got[i] == want[i]);
  }
}

// FNV-1a 64 over the float32 bytes of a tensor, row-major (the fixture's fingerprint).
int64_t fnv1a64(const Tensor& t) {
  const std::vector<float> values = t.to_vector<float>();
  std::vector<unsigned char> raw(values.size() * sizeof(float));
  std::memcpy(raw.data(), values.data(), raw.size());
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : raw) hash = (hash ^ byte) * 0x100000001b3ULL;
  return static_cast<int64_t>(hash);
}

}  // namespace

TEST_CASE("nn::init: every function draws torch.nn.init's values", "[nn][init][fixture]") {
  for (const auto& [name, fn] : init_functions()) {
    for (const tg::Shape& shape : kShapes) {
      for (const std::string suffix : {"_f32", "_f64"}) {
        const std::string case_name = name + "_" + shape_tag(shape) + suffix;
        INFO(case_name);
        const auto& c = tg::testing::fixture("init.txt", case_name);
        tg::manual_seed(static_cast<uint64_t>(c.scalar("seed")));
        Tensor t = tg::empty(shape, tg::nn_test::fixture_dtype(suffix));
        fn(t, nullptr);
        if (name.starts_with("trunc_normal")) {
          // torch's erfinv is its own rational approximation; tapegrad's is Newton-refined, so the
          // two agree to the last bit or so, not bitwise (the uniform draws under them do).
          TG_REQUIRE_CLOSE(t, c.at("values"), suffix == "_f32" ? 1e-6 : 1e-14);
        } else {
          require_bitwise_equal(t, c.at("values"));
        }
      }
    }
  }
}

TEST_CASE("nn::init: calculate_gain equals torch's, and fans are in·Πk and out·Πk", "[nn][init]") {
  const std::vector<std::pair<std::string, double>> gains = {
      {"gain_linear", init::calculate_gain(Nonlinearity::Linear)},
      {"gain_conv2d", init::calculate_gain(Nonlinearity::Conv2d)},
      {"gain_sigmoid", init::calculate_gain(Nonlinearity::Sigmoid)},
      {"gain_tanh", init::calculate_gain(Nonlinearity::Tanh)},
      {"gain_relu", init::calculate_gain(Nonlinearity::ReLU)},
      {"gain_leaky_relu", init::calculate_gain(Nonlinearity::LeakyReLU)},
      {"gain_leaky_relu_0p2", init::calculate_gain(Nonlinearity::LeakyReLU, 0.2)},
      {"gain_selu", init::calculate_gain(Nonlinearity::SELU)}};
  for (const auto& [name, gain] : gains) {
    INFO(name);
    CHECK(gain == tg::testing::fixture("init.txt", name).scalar("gain"));
  }
  // Derived by hand: a conv weight [out 4, in 3, 2, 2] has a 4-element kernel.
  CHECK(init::calculate_fan_in_and_fan_out(tg::empty({6, 5})) == std::pair<int64_t, int64_t>{5, 6});
  CHECK(init::calculate_fan_in_and_fan_out(tg::empty({4, 3, 2, 2})) == std::pair<int64_t, int64_t>{12, 16});
  REQUIRE_TG_ERROR(init::calculate_fan_in_and_fan_out(tg::empty({3})),
                   Catch::Contains("fewer than 2 dims") && Catch::Contains("[3]"));
  Tensor vector = tg::empty({3});
  REQUIRE_TG_ERROR(init::xavier_uniform_(vector), Catch::Contains("fan"));
  REQUIRE_TG_ERROR(init::trunc_normal_(vector, 0.0, 1.0, 1.0, -1.0), Catch::Contains("trunc_normal_"));
}

TEST_CASE("nn::init: a generator of its own, parameters that require grad, empty tensors", "[nn][init]") {
  tg::manual_seed(11);
  Tensor from_default = tg::empty({6, 5});
  init::kaiming_normal_(from_default);
  tg::manual_seed(0);
  tg::Generator gen(11);
  Tensor from_own = tg::empty({6, 5});
  init::kaiming_normal_(from_own, 0.0, FanMode::FanIn, Nonlinearity::LeakyReLU, &gen);
  require_bitwise_equal(from_own, from_default);

  // Like torch.nn.init, no NoGradGuard is needed around a parameter.
  tg::nn::Linear layer(4, 3);
  init::xavier_uniform_(layer.weight);
  init::zeros_(layer.bias);
  CHECK(layer.weight.requires_grad());
  CHECK(tg::testing::values(layer.bias) == std::vector<double>{0.0, 0.0, 0.0});

  // A tensor without elements: kaiming_* leaves it and the generator alone, as torch does.
  const tg::GeneratorState before = gen.get_state();
  Tensor empty = tg::empty({0, 5});
  init::kaiming_uniform_(empty, 0.0, FanMode::FanIn, Nonlinearity::LeakyReLU, &gen);
  CHECK(gen.get_state() == before);
}

TEST_CASE("Linear: initial weights after manual_seed(0) equal torch.nn.Linear's", "[nn][init][linear][fixture]") {
  const auto& small = tg::testing::fixture("random.txt", "linear_5_3");
  tg::manual_seed(0);
  const tg::nn::Linear layer(5, 3);
  require_bitwise_equal(layer.weight, small.at("weight"));
  require_bitwise_equal(layer.bias, small.at("bias"));

  const auto& big = tg::testing::fixture("random.txt", "linear_784_512");
  tg::manual_seed(0);
  const tg::nn::Linear mnist(784, 512);
  for (int64_t row : {0, 1, 255, 511}) {
    INFO("weight row " << row);
    const std::vector<float> all = mnist.weight.to_vector<float>();
    const Tensor values = tg::tensor(std::vector<double>(all.begin() + row * 784, all.begin() + (row + 1) * 784));
    require_bitwise_equal(values, big.at("weight_row" + std::to_string(row)));
  }
  require_bitwise_equal(mnist.bias, big.at("bias"));
  CHECK(fnv1a64(mnist.weight) == big.ints("weight_fnv1a64")[0]);  // every one of the 401,408 weights
}
