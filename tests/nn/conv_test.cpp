// Convolution: conv1d, conv2d, conv_transpose2d and the modules against PyTorch's fixtures
// (make_conv_fixtures.py), against a naive loop on sizes that span several tiles, gradcheck and
// gradgradcheck in float64, thread-count determinism, PyTorch's initialisation, and the errors.
#include <string>
#include <vector>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

// The options a fixture case stores as int64 tensors.
template <size_t D>
tg::nn::ConvPadding<D> fixture_padding(const tg::testing::FixtureCase& c) {
  if (c.has("same")) return "same";
  if (c.has("valid")) return "valid";
  return c.ints("padding");
}

// Runs y = op(inputs), checks y and every input's gradient for the fixture's dy.
template <typename Op>
void check_against_fixture(const tg::testing::FixtureCase& c, double atol, const Op& op) {
  Tensor x = leaf(c.at("x"));
  Tensor weight = leaf(c.at("weight"));
  Tensor bias = c.has("bias") ? leaf(c.at("bias")) : Tensor();
  Tensor y = op(x, weight, bias);
  REQUIRE(std::string(y.grad_fn_name()) == "ConvolutionBackward");
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
  if (bias.defined()) TG_REQUIRE_CLOSE(bias.grad(), c.at("dbias"), atol);
}

// float32 sums of a few dozen products of N(0, 1) values: a looser bound than the default 1e-5.
double conv_atol(const std::string& suffix) { return suffix == "_f32" ? 5e-5 : 1e-12; }

// The naive definition: y[n, o, oh, ow] = b[o] + Σ_{c, kh, kw} x[n, g·Cig + c, ih, iw]·w[o, c, kh, kw]
// with ih = oh·s − p + kh·d (zero outside), and the two gradients for grad_y, in double.
struct NaiveConv {
  int64_t N, C_in, H, W, C_out, kH, kW, sh, sw, ph, pw, dh, dw, groups, H_out, W_out;

  template <typename Visit>
  void for_each_tap(const Visit& visit) const {
    const int64_t Cig = C_in / groups, Cog = C_out / groups;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < C_out; ++o)
        for (int64_t oh = 0; oh < H_out; ++oh)
          for (int64_t ow = 0; ow < W_out; ++ow)
            for (int64_t c = 0; c < Cig; ++c)
              for (int64_t kh = 0; kh < kH; ++kh)
                for (int64_t kw = 0; kw < kW; ++kw) {
                  const int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int64_t xi = ((n * C_in + o / Cog * Cig + c) * H + ih) * W + iw;
                  const int64_t wi = ((o * Cig + c) * kH + kh) * kW + kw;
                  const int64_t yi = ((n * C_out + o) * H_out + oh) * W_out + ow;
                  visit(xi, wi, yi);
                }
  }
};

}  // namespace

TEST_CASE("conv2d matches PyTorch's output and gradients", "[conv][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "basic", "stride", "dilation", "groups", "depthwise", "same",
                                    "valid", "unbatched", "pointwise", "wide");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(name, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("conv.txt", "conv2d_" + name + suffix);
  check_against_fixture(c, conv_atol(suffix), [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return F::conv2d(x, w,
                     {.bias = b, .stride = c.ints("stride"), .padding = fixture_padding<2>(c),
                      .dilation = c.ints("dilation"), .groups = c.ints("groups")[0]});
  });
}

TEST_CASE("conv1d matches PyTorch's output and gradients", "[conv][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "basic", "same_groups", "valid");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(name, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("conv.txt", "conv1d_" + name + suffix);
  check_against_fixture(c, conv_atol(suffix), [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return F::conv1d(x, w,
                     {.bias = b, .stride = c.ints("stride"), .padding = fixture_padding<1>(c),
                      .dilation = c.ints("dilation"), .groups = c.ints("groups")[0]});
  });
}

TEST_CASE("conv_transpose2d matches PyTorch's output and gradients", "[conv][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "basic", "groups", "unbatched", "dilated_output_padding");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(name, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("conv.txt", "conv_transpose2d_" + name + suffix);
  check_against_fixture(c, conv_atol(suffix), [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return F::conv_transpose2d(x, w,
                               {.bias = b, .stride = c.ints("stride"), .padding = c.ints("padding"),
                                .output_padding = c.ints("output_padding"), .groups = c.ints("groups")[0],
                                .dilation = c.ints("dilation")});
  });
}

TEST_CASE("conv2d over several tiles and chunks matches the naive loop", "[conv]") {
  // 64 input channels × 3 × 3 taps: a float64 tile holds ~113 output pixels, so each 17 × 19
  // image is three tiles (boundaries inside output rows), and grad weight sums 10 pieces.
  const NaiveConv s = GENERATE(NaiveConv{2, 64, 17, 19, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 17, 19},
                               NaiveConv{3, 64, 20, 21, 6, 3, 3, 2, 1, 2, 0, 2, 1, 2, 10, 19},
                               NaiveConv{1, 128, 12, 13, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1, 12, 13});
  CAPTURE(s.C_in, s.sh, s.groups);
  tg::manual_seed(3);
  Tensor x = randn_leaf({s.N, s.C_in, s.H, s.W}, tg::kFloat64);
  Tensor w = randn_leaf({s.C_out, s.C_in / s.groups, s.kH, s.kW}, tg::kFloat64);
  Tensor b = randn_leaf({s.C_out}, tg::kFloat64);
  Tensor y = F::conv2d(x, w, {.bias = b, .stride = {s.sh, s.sw}, .padding = {s.ph, s.pw}, .dilation = {s.dh, s.dw},
                              .groups = s.groups});
  REQUIRE(y.shape() == Shape{s.N, s.C_out, s.H_out, s.W_out});
  const Tensor dy = tg::randn(y.shape(), tg::kFloat64);
  y.backward(dy);

  const std::vector<double> xv = tg::testing::values(x), wv = tg::testing::values(w),
                            bv = tg::testing::values(b), dyv = tg::testing::values(dy);
  std::vector<double> yv(static_cast<size_t>(y.numel())), dxv(xv.size()), dwv(wv.size()), dbv(bv.size());
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = bv[i / static_cast<size_t>(s.H_out * s.W_out) % bv.size()];
  for (size_t i = 0; i < dyv.size(); ++i) dbv[i / static_cast<size_t>(s.H_out * s.W_out) % bv.size()] += dyv[i];
  s.for_each_tap([&](int64_t xi, int64_t wi, int64_t yi) {
    yv[yi] += xv[xi] * wv[wi];
    dxv[xi] += dyv[yi] * wv[wi];
    dwv[wi] += dyv[yi] * xv[xi];
  });
  auto as_tensor = [](const std::vector<double>& v, const Shape& shape) { return tg::tensor(v, shape, tg::kFloat64); };
  TG_REQUIRE_CLOSE(y, as_tensor(yv, y.shape()), 1e-10);
  TG_REQUIRE_CLOSE(x.grad(), as_tensor(dxv, x.shape()), 1e-10);
  TG_REQUIRE_CLOSE(w.grad(), as_tensor(dwv, w.shape()), 1e-10);
  TG_REQUIRE_CLOSE(b.grad(), as_tensor(dbv, b.shape()), 1e-10);
}

TEST_CASE("conv gradients pass gradcheck and gradgradcheck in float64", "[conv][gradcheck]") {
  tg::manual_seed(11);
  SECTION("conv2d: stride, padding, dilation, groups, bias") {
    const Tensor x = randn_leaf({2, 4, 5, 6}, tg::kFloat64), w = randn_leaf({4, 2, 3, 2}, tg::kFloat64),
                 b = randn_leaf({4}, tg::kFloat64);
    const auto fn = [](const std::vector<Tensor>& t) {
      return F::conv2d(t[0], t[1], {.bias = t[2], .stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2});
    };
    TG_REQUIRE_GRADCHECK(fn, (std::vector<Tensor>{x, w, b}));
    const tg::GradcheckResult second = tg::gradgradcheck(fn, {x, w, b});
    INFO(second.message);
    REQUIRE(second.passed);
  }
  SECTION("conv2d: padding 'same' with an even kernel, unbatched") {
    const Tensor x = randn_leaf({2, 4, 5}, tg::kFloat64), w = randn_leaf({3, 2, 2, 4}, tg::kFloat64);
    const auto fn = [](const std::vector<Tensor>& t) { return F::conv2d(t[0], t[1], {.padding = "same"}); };
    TG_REQUIRE_GRADCHECK(fn, (std::vector<Tensor>{x, w}));
    const tg::GradcheckResult second = tg::gradgradcheck(fn, {x, w});
    INFO(second.message);
    REQUIRE(second.passed);
  }
  SECTION("conv1d") {
    const Tensor x = randn_leaf({2, 3, 7}, tg::kFloat64), w = randn_leaf({2, 3, 3}, tg::kFloat64),
                 b = randn_leaf({2}, tg::kFloat64);
    const auto fn = [](const std::vector<Tensor>& t) {
      return F::conv1d(t[0], t[1], {.bias = t[2], .stride = 2, .padding = 1, .dilation = 2});
    };
    TG_REQUIRE_GRADCHECK(fn, (std::vector<Tensor>{x, w, b}));
    const tg::GradcheckResult second = tg::gradgradcheck(fn, {x, w, b});
    INFO(second.message);
    REQUIRE(second.passed);
  }
  SECTION("conv_transpose2d") {
    const Tensor x = randn_leaf({1, 4, 3, 3}, tg::kFloat64), w = randn_leaf({4, 1, 3, 2}, tg::kFloat64),
                 b = randn_leaf({2}, tg::kFloat64);
    const auto fn = [](const std::vector<Tensor>& t) {
      return F::conv_transpose2d(t[0], t[1],
                                 {.bias = t[2], .stride = 2, .padding = {1, 0}, .output_padding = 1, .groups = 2});
    };
    TG_REQUIRE_GRADCHECK(fn, (std::vector<Tensor>{x, w, b}));
    const tg::GradcheckResult second = tg::gradgradcheck(fn, {x, w, b});
    INFO(second.message);
    REQUIRE(second.passed);
  }
}

TEST_CASE("conv2d forward and backward are bitwise identical for 1, 2, 3 and 8 threads", "[conv][threads]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  tg::manual_seed(5);
  const Tensor x0 = tg::randn({6, 32, 15, 14}, dtype), w0 = tg::randn({16, 32, 3, 3}, dtype),
               b0 = tg::randn({16}, dtype);
  const Tensor dy = tg::randn({6, 16, 8, 14}, dtype);
  auto run = [&] {
    Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
    Tensor y = F::conv2d(x, w, {.bias = b, .stride = {2, 1}, .padding = 1});
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)}, {"dx", bytes(x.grad())}, {"dw", bytes(w.grad())}, {"db", bytes(b.grad())}};
  };
  require_bitwise_identical_across_threads(run);
}

TEST_CASE("Conv modules draw PyTorch's default parameters for the same seed", "[conv][init]") {
  auto check_module = [](const std::string& name, const tg::nn::Parameter& weight, const tg::nn::Parameter& bias) {
    CAPTURE(name);
    const tg::testing::FixtureCase& c = tg::testing::fixture("conv.txt", name);
    REQUIRE(weight.shape() == c.at("weight").shape());
    REQUIRE(bytes(weight) == bytes(c.at("weight")));
    REQUIRE(bias.defined() == c.has("bias"));
    if (bias.defined()) REQUIRE(bytes(bias) == bytes(c.at("bias")));
  };
  tg::manual_seed(7);
  tg::nn::Conv1d conv1d(2, 3, 5);
  check_module("init_conv1d", conv1d.weight, conv1d.bias);
  tg::manual_seed(7);
  tg::nn::Conv2d conv2d(3, 4, {3, 2});
  check_module("init_conv2d", conv2d.weight, conv2d.bias);
  tg::manual_seed(7);
  tg::nn::Conv2d grouped(4, 6, 3, {.bias = false, .groups = 2});
  check_module("init_conv2d_groups_nobias", grouped.weight, grouped.bias);
  tg::manual_seed(7);
  tg::nn::ConvTranspose2d transposed(4, 6, {2, 3}, {.groups = 2});
  check_module("init_conv_transpose2d", transposed.weight, transposed.bias);
}

TEST_CASE("Conv2d module: forward equals conv2d with its parameters, named parameters", "[conv]") {
  tg::manual_seed(2);
  tg::nn::Conv2d conv(3, 6, 3, {.stride = 2, .padding = "valid", .groups = 3});
  const Tensor x = tg::randn({2, 3, 9, 9});
  const Tensor y = conv(x);
  REQUIRE(y.shape() == Shape{2, 6, 4, 4});
  REQUIRE(tg::testing::allclose(y, F::conv2d(x, conv.weight, {.bias = conv.bias, .stride = 2, .groups = 3}), 0.0));
  const auto named = conv.named_parameters();
  REQUIRE(named.size() == 2);
  REQUIRE(named[0].first == "weight");
  REQUIRE(named[1].first == "bias");
  y.sum().backward();
  REQUIRE(conv.weight.grad().shape() == Shape{6, 1, 3, 3});
  REQUIRE(conv.bias.grad().shape() == Shape{6});

  tg::nn::Conv2d no_bias(2, 2, 1, {.bias = false});
  REQUIRE(!no_bias.bias.defined());
  REQUIRE(no_bias.parameters().size() == 1);
}

TEST_CASE("conv rejects bad input with tg::Error naming the shapes", "[conv][errors]") {
  using Catch::Matchers::Contains;
  const Tensor w = tg::randn({4, 3, 3, 3});
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({5, 5}), w), Contains("conv2d") && Contains("[5, 5]") && Contains("3D"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 4, 5, 5}), w), Contains("[1, 4, 5, 5]") && Contains("3 channels"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 2, 2}), w), Contains("kernel") && Contains("(2, 2)"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 6, 5, 5}), tg::randn({3, 3, 3, 3}), {.groups = 2}),
                   Contains("divisible by 2") && Contains("[3, 3, 3, 3]"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 5, 5}), w, {.stride = 2, .padding = "same"}),
                   Contains("'same'") && Contains("strided"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 5, 5}), w, {.stride = 0}), Contains("stride"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 5, 5}), w, {.padding = -1}), Contains("negative padding"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 5, 5}), w, {.bias = tg::randn({3})}), Contains("bias"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 5, 5}, tg::kFloat64), w), Contains("dtypes"));
  REQUIRE_TG_ERROR(F::conv2d(tg::randn({1, 3, 5, 5}), w, {.padding = "full"}), Contains("'full'"));
  REQUIRE_TG_ERROR(F::conv1d(tg::randn({1, 3, 5, 5}), tg::randn({2, 3, 3})), Contains("conv1d"));
  REQUIRE_TG_ERROR(F::conv_transpose2d(tg::randn({1, 3, 4, 4}), tg::randn({3, 2, 3, 3}), {.output_padding = 1}),
                   Contains("output padding"));
  REQUIRE_TG_ERROR(F::conv_transpose2d(tg::randn({1, 4, 4, 4}), tg::randn({3, 2, 3, 3})), Contains("channels"));
  REQUIRE_TG_ERROR(tg::nn::Conv2d(3, 4, 3, {.groups = 2}), Contains("divisible"));
  REQUIRE_TG_ERROR(tg::nn::Conv2d(3, 4, 3, {.padding_mode = "mirror"}), Contains("padding_mode"));
}
