// LayerNorm: PyTorch fixtures, the seed-001 notebook values, gradcheck, equality with LayerNorm
// composed from core ops, PyTorch's edge cases, float32 robustness and thread-count determinism.
#include <algorithm>
#include <cstring>
#include <string>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

// LayerNorm built from core ops (reference for the fused kernel).
Tensor composed_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           double eps) {
  std::vector<int64_t> dims;
  for (int64_t k = 1; k <= static_cast<int64_t>(normalized_shape.size()); ++k) dims.push_back(-k);
  const Tensor centred = x - x.mean(dims, /*keepdim=*/true);
  const Tensor variance = (centred * centred).mean(dims, /*keepdim=*/true);
  Tensor y = centred / (variance + eps).sqrt();
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

}  // namespace

TEST_CASE("layer_norm matches PyTorch's output and gradients", "[layer_norm][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "layernorm_4x6_ns6", "layernorm_2x3x5_ns5",
                                    "layernorm_2x3x4_ns3x4", "layernorm_2x5_ns5_eps0p5", "layernorm_2x3_ns2x3_whole",
                                    "layernorm_3x4_ns4_noaffine");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("layer_norm.txt", base + suffix);
  const double atol = fixture_atol(suffix);
  const Shape normalized_shape = c.ints("normalized_shape");
  const bool affine = c.has("weight");
  Tensor x = leaf(c.at("x"));
  Tensor weight = affine ? leaf(c.at("weight")) : Tensor();
  Tensor bias = affine ? leaf(c.at("bias")) : Tensor();

  Tensor y = F::layer_norm(x, normalized_shape, weight, bias, c.scalar("eps"));
  REQUIRE(std::string(y.grad_fn_name()) == "LayerNormBackward");
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  if (affine) {
    TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
    TG_REQUIRE_CLOSE(bias.grad(), c.at("dbias"), atol);
  }
}

TEST_CASE("LayerNorm with E = 1 outputs exactly beta and matches PyTorch's rounding noise", "[layer_norm][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const tg::testing::FixtureCase& c = tg::testing::fixture("layer_norm.txt", "layernorm_3x1_ns1" + suffix);
  // PyTorch's own dx and dweight here are rounding noise around the true 0 (~3e-5 in float32).
  const double atol = suffix == "_f32" ? 1e-4 : 1e-10;
  Tensor x = leaf(c.at("x")), weight = leaf(c.at("weight")), bias = leaf(c.at("bias"));
  Tensor y = F::layer_norm(x, c.ints("normalized_shape"), weight, bias, c.scalar("eps"));
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), atol);
  TG_REQUIRE_CLOSE(bias.grad(), c.at("dbias"), atol);

  // Our own output is exactly β: x − μ is exactly 0 for a one-element row.
  const Tensor expected = tg::zeros({3, 1}, x.dtype()) + bias.detach();
  REQUIRE(bytes(y) == bytes(expected));
}

TEST_CASE("LayerNorm({4}) reproduces the seed-001 notebook values", "[layer_norm][fixture]") {
  const Tensor x = tg::tensor({-1.1258, -1.1524, -0.2506, -0.4339, 0.8487, 0.6920, -0.3160, -2.1152,  //
                               0.3223, -1.2633, 0.3500, 0.3081, 0.1198, 1.2377, 1.1168, -0.2473},
                              {2, 2, 4});
  const Tensor printed = tg::tensor({-0.9539, -1.0196, 1.2137, 0.7598, 0.9075, 0.7747, -0.0791, -1.6031,  //
                                     0.5706, -1.7316, 0.6109, 0.5501, -0.6877, 1.0717, 0.8815, -1.2655},
                                    {2, 2, 4});
  // The notebook's embedding at full precision (x and printed above are rounded to 4 decimals).
  const tg::testing::FixtureCase& c = tg::testing::fixture("layer_norm.txt", "seed001_f32");
  TG_REQUIRE_CLOSE(c.at("x"), x, 0.5e-4 + 1e-6);
  tg::nn::LayerNorm ln({4});
  const Tensor y = ln(c.at("x"));
  TG_REQUIRE_CLOSE(y, printed, 0.5e-4 + 1e-6);  // to the printed 4 decimals
  TG_REQUIRE_CLOSE(y, c.at("y"), 1e-5);        // and to PyTorch's full float32 output
}

TEST_CASE("layer_norm passes gradcheck in float64", "[layer_norm][gradcheck]") {
  tg::manual_seed(11);
  struct Case {
    Shape x_shape, normalized_shape;
    bool affine;
  };
  const Case shape_case = GENERATE(Case{{4, 6}, {6}, true},          // 2-D
                                   Case{{2, 3, 5}, {5}, true},       // [B, S, E]
                                   Case{{2, 3, 4}, {3, 4}, true},    // two normalised dims
                                   Case{{3, 5}, {5}, false},         // elementwise_affine = false
                                   Case{{4, 1}, {1}, true},          // E = 1
                                   Case{{2, 3}, {2, 3}, true});      // the whole input
  CAPTURE(shape_case.x_shape, shape_case.normalized_shape, shape_case.affine);
  std::vector<Tensor> inputs{randn_leaf(shape_case.x_shape, tg::kFloat64)};
  if (shape_case.affine) {
    inputs.push_back(randn_leaf(shape_case.normalized_shape, tg::kFloat64));
    inputs.push_back(randn_leaf(shape_case.normalized_shape, tg::kFloat64));
  }
  const Shape normalized_shape = shape_case.normalized_shape;
  auto fn = [normalized_shape](const std::vector<Tensor>& in) {
    return in.size() == 3 ? F::layer_norm(in[0], normalized_shape, in[1], in[2], 1e-5)
                          : F::layer_norm(in[0], normalized_shape);
  };
  TG_REQUIRE_GRADCHECK(fn, inputs);
}

TEST_CASE("the LayerNorm module passes gradcheck with non-trivial gamma and beta", "[layer_norm][gradcheck]") {
  tg::manual_seed(12);
  tg::nn::LayerNorm ln({2, 3}, {.eps = 1e-6});
  ln.to(tg::kFloat64);
  ln.weight = tg::randn({2, 3}, tg::kFloat64);
  ln.bias = tg::randn({2, 3}, tg::kFloat64);
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return ln(in[0]); },
                       std::vector<Tensor>{randn_leaf({4, 2, 3}, tg::kFloat64)});
}

TEST_CASE("fused layer_norm equals layer_norm composed from core ops to 1e-10", "[layer_norm]") {
  tg::manual_seed(13);
  const Shape x_shape = GENERATE(Shape{8, 16}, Shape{2, 3, 5}, Shape{2, 3, 4});
  const bool two_dims = x_shape.size() == 3 && x_shape[1] == 3 && x_shape[2] == 4;
  const Shape normalized_shape = two_dims ? Shape{3, 4} : Shape{x_shape.back()};
  const bool affine = GENERATE(true, false);
  CAPTURE(x_shape, normalized_shape, affine);
  const Tensor x_values = tg::randn(x_shape, tg::kFloat64) * 3.0 + 2.0;
  const Tensor dy = tg::randn(x_shape, tg::kFloat64);
  const Tensor w_values = tg::randn(normalized_shape, tg::kFloat64);
  const Tensor b_values = tg::randn(normalized_shape, tg::kFloat64);

  struct Result {
    Tensor y, dx, dw, db;
  };
  auto run = [&](auto layer_norm) {
    Tensor x = leaf(x_values);
    Tensor w = affine ? leaf(w_values) : Tensor(), b = affine ? leaf(b_values) : Tensor();
    Tensor y = layer_norm(x, normalized_shape, w, b, 1e-5);
    y.backward(dy);
    return Result{y.detach(), x.grad(), affine ? w.grad() : Tensor(), affine ? b.grad() : Tensor()};
  };
  const Result fused = run([](auto&&... a) { return F::layer_norm(a...); });
  const Result composed = run([](auto&&... a) { return composed_layer_norm(a...); });
  TG_REQUIRE_CLOSE(fused.y, composed.y, 1e-10);
  TG_REQUIRE_CLOSE(fused.dx, composed.dx, 1e-10);
  if (affine) {
    TG_REQUIRE_CLOSE(fused.dw, composed.dw, 1e-10);
    TG_REQUIRE_CLOSE(fused.db, composed.db, 1e-10);
  }
}

TEST_CASE("LayerNorm module: parameters, defaults and one tape node", "[layer_norm][module]") {
  tg::nn::LayerNorm ln({6});
  REQUIRE(ln.eps == 1e-5);
  REQUIRE(ln.normalized_shape == Shape{6});
  REQUIRE(bytes(ln.weight) == bytes(tg::ones({6})));
  REQUIRE(bytes(ln.bias) == bytes(tg::zeros({6})));
  REQUIRE(ln.weight.requires_grad());
  const auto named = ln.named_parameters();
  REQUIRE(named.size() == 2);
  REQUIRE(named[0].first == "weight");
  REQUIRE(named[1].first == "bias");
  const Tensor y = ln(tg::randn({3, 6}));
  REQUIRE(std::string(y.grad_fn_name()) == "LayerNormBackward");

  tg::nn::LayerNorm ln2({1, 3}, {.eps = 1e-6, .elementwise_affine = false});
  REQUIRE(!ln2.weight.defined());
  REQUIRE(!ln2.bias.defined());
  REQUIRE(ln2.parameters().empty());
  REQUIRE(ln2.eps == 1e-6);
  REQUIRE(ln2(tg::randn({2, 1, 3})).shape() == Shape{2, 1, 3});
}

TEST_CASE("layer_norm edge cases from PyTorch's tests", "[layer_norm][edge]") {
  tg::manual_seed(14);
  SECTION("N = 1: the output is exactly beta, for any input") {
    tg::nn::LayerNorm ln({1});
    ln.weight = tg::randn({1});
    ln.bias = tg::randn({1});
    const Tensor y = ln(tg::randn({5, 1}) * 100.0);
    REQUIRE(bytes(y) == bytes(tg::zeros({5, 1}) + ln.bias.detach()));
  }
  SECTION("an empty batch: empty output, zero dgamma and dbeta") {
    tg::nn::LayerNorm ln({4});
    Tensor x = randn_leaf({0, 4}, tg::kFloat32);
    const Tensor y = ln(x);
    REQUIRE(y.shape() == Shape{0, 4});
    y.backward(tg::zeros({0, 4}));
    REQUIRE(x.grad().shape() == Shape{0, 4});
    REQUIRE(bytes(ln.weight.grad()) == bytes(tg::zeros({4})));
    REQUIRE(bytes(ln.bias.grad()) == bytes(tg::zeros({4})));
  }
  SECTION("normalized_shape covering the whole input") {
    const Tensor x = tg::randn({3, 4}, tg::kFloat64);
    const Tensor y = F::layer_norm(x, {3, 4});
    TG_REQUIRE_CLOSE(y, composed_layer_norm(x, {3, 4}, {}, {}, 1e-5), 1e-12);
    REQUIRE(std::fabs(y.mean().item()) < 1e-12);
  }
  SECTION("a large eps (0.5) enters the variance") {
    const Tensor x = tg::tensor({1, 2, 3, 4}, {1, 4}, tg::kFloat64);  // μ = 2.5, σ² = 1.25
    const double rstd = 1.0 / std::sqrt(1.25 + 0.5);
    TG_REQUIRE_CLOSE(F::layer_norm(x, {4}, {}, {}, 0.5),
                     tg::tensor({-1.5 * rstd, -0.5 * rstd, 0.5 * rstd, 1.5 * rstd}, {1, 4}, tg::kFloat64), 1e-15);
  }
  SECTION("an empty normalized_shape is an error") {
    REQUIRE_THROWS_WITH(F::layer_norm(tg::randn({2, 4}), {}),
                        Catch::Contains("layer_norm") && Catch::Contains("normalized_shape"));
    REQUIRE_THROWS_WITH(tg::nn::LayerNorm(Shape{}), Catch::Contains("LayerNorm") && Catch::Contains("normalized_shape"));
  }
  SECTION("gamma or beta of the wrong shape in the functional form is an error") {
    REQUIRE_THROWS_WITH(F::layer_norm(tg::randn({2, 4}), {4}, tg::ones({3}), tg::zeros({4})),
                        Catch::Contains("layer_norm") && Catch::Contains("weight") && Catch::Contains("[3]") &&
                            Catch::Contains("[4]"));
    REQUIRE_THROWS_WITH(F::layer_norm(tg::randn({2, 4}), {4}, tg::ones({4}), tg::zeros({2, 2})),
                        Catch::Contains("layer_norm") && Catch::Contains("bias") && Catch::Contains("[2, 2]"));
    REQUIRE_THROWS_WITH(F::layer_norm(tg::randn({2, 4}), {4}, tg::ones({4}, tg::kFloat64)),
                        Catch::Contains("layer_norm") && Catch::Contains("float64"));
  }
  SECTION("an input whose trailing dims differ from normalized_shape is an error naming both") {
    tg::nn::LayerNorm ln({4});
    REQUIRE_THROWS_WITH(ln(tg::randn({2, 3})), Catch::Contains("layer_norm") && Catch::Contains("[4]") &&
                                                   Catch::Contains("[2, 3]"));
    REQUIRE_THROWS_WITH(F::layer_norm(tg::randn({4}), {2, 4}),
                        Catch::Contains("layer_norm") && Catch::Contains("[2, 4]") && Catch::Contains("[4]"));
  }
}

TEST_CASE("float32 layer_norm stays within 1e-4 of a float64 reference", "[layer_norm][robustness]") {
  tg::manual_seed(15);
  struct Case {
    Shape shape;
    double offset;
  };
  const Case robust_case = GENERATE(Case{{16, 768}, 1e4},      // rows with a large offset
                                    Case{{2, 65536}, 0.0},     // long rows
                                    Case{{2, 65536}, 1e4});    // both
  CAPTURE(robust_case.shape, robust_case.offset);
  const int64_t E = robust_case.shape.back();
  // Inputs drawn in float32 so both runs see exactly the same values.
  const Tensor x32 = tg::randn(robust_case.shape) + robust_case.offset;
  const Tensor w32 = tg::randn({E}), b32 = tg::randn({E}), dy32 = tg::randn(robust_case.shape);

  auto run = [&](tg::DType dtype, auto layer_norm) {
    Tensor x = leaf(x32.to(dtype)), w = leaf(w32.to(dtype)), b = leaf(b32.to(dtype));
    Tensor y = layer_norm(x, Shape{E}, w, b, 1e-5);
    y.backward(dy32.to(dtype));
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto fused32 = run(tg::kFloat32, [](auto&&... a) { return F::layer_norm(a...); });
  // The reference is composed from core ops in float64, independent of the fused kernel.
  const auto reference = run(tg::kFloat64, [](auto&&... a) { return composed_layer_norm(a...); });
  const char* names[] = {"y", "dx", "dweight", "dbias"};
  for (size_t i = 0; i < fused32.size(); ++i) {
    INFO(names[i] << ": relative error " << relative_error(fused32[i], reference[i]));
    REQUIRE(relative_error(fused32[i], reference[i]) <= 1e-4);
  }
}

// Row statistics computed in float lanes overflow for |x| ~ 6e18 (y = β silently) and lose four
// digits on a 4096-row of N(0, 1) whose first element is 1e4 (7e-5 where torch has 1e-7).
TEST_CASE("float32 layer_norm is as exact as PyTorch's on rows that float lanes cannot hold",
          "[layer_norm][fixture][robustness]") {
  struct Case {
    std::string name;
    bool torch_is_exact;  // torch's float32 kernel overflows on 64-wide rows of 6e18
  };
  const Case numerics_case = GENERATE(Case{"large_magnitude_2x5", true}, Case{"large_magnitude_2x8", true},
                                      Case{"large_magnitude_2x64", false}, Case{"first_element_1e4_1x4096", true});
  // Relative error against the float64 reference: torch's own float32 error on these cases is up
  // to 1.7e-7 (dx of large_magnitude_2x5), so the bound is about twice that.
  constexpr double kMaxError = 4e-7;
  CAPTURE(numerics_case.name);
  const tg::testing::FixtureCase& c = tg::testing::fixture("layer_norm_numerics.txt", numerics_case.name);
  Tensor x = leaf(c.at("x"));
  Tensor y = F::layer_norm(x, {x.size(-1)}, Tensor(), Tensor(), 1e-5);
  y.backward(c.at("dy"));
  for (const auto& [name, actual] : {std::pair{std::string("y"), y.detach()}, std::pair{std::string("dx"), x.grad()}}) {
    INFO(name << ": relative error " << relative_error(actual, c.at(name + "_ref")) << " against float64, "
              << relative_error(actual, c.at(name)) << " against torch's float32");
    REQUIRE(relative_error(actual, c.at(name + "_ref")) <= kMaxError);
    if (numerics_case.torch_is_exact) REQUIRE(relative_error(actual, c.at(name)) <= kMaxError);
  }
}

TEST_CASE("a constant row (zero variance) gives finite outputs and gradients", "[layer_norm][robustness]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  tg::manual_seed(16);
  Tensor x = leaf(tg::full({3, 8}, 1e4 + 0.25, dtype));
  Tensor w = randn_leaf({8}, dtype), b = randn_leaf({8}, dtype);
  Tensor y = F::layer_norm(x, {8}, w, b, 1e-5);
  y.backward(tg::randn({3, 8}, dtype));
  REQUIRE(bytes(y) == bytes(tg::zeros({3, 8}, dtype) + b.detach()));  // x̂ = 0 exactly
  REQUIRE(all_finite(x.grad()));
  REQUIRE(all_finite(w.grad()));
  REQUIRE(bytes(w.grad()) == bytes(tg::zeros({8}, dtype)));  // dγ = Σ dy·x̂ = 0
  REQUIRE(all_finite(b.grad()));
}

TEST_CASE("layer_norm forward and backward are bitwise identical for 1, 2, 3 and 8 threads",
          "[layer_norm][determinism]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  // [4096, 1024] is written with streaming stores (16 MiB and more), the others with plain ones.
  const Shape shape = GENERATE(Shape{4096, 256}, Shape{64, 65536 / 16}, Shape{4096, 1024});
  CAPTURE(dtype, shape);
  tg::manual_seed(17);
  const Tensor x_values = tg::randn(shape, dtype) * 2.0 + 0.5;
  const Tensor w_values = tg::randn({shape[1]}, dtype), b_values = tg::randn({shape[1]}, dtype);
  const Tensor dy = tg::randn(shape, dtype);
  auto run = [&] {
    Tensor x = leaf(x_values), w = leaf(w_values), b = leaf(b_values);
    Tensor y = F::layer_norm(x, {shape[1]}, w, b, 1e-5);
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)}, {"dx", bytes(x.grad())}, {"dγ", bytes(w.grad())}, {"dβ", bytes(b.grad())}};
  };
  require_bitwise_identical_across_threads(run);
}

TEST_CASE("rows of a large output (streaming stores) equal the same rows normalised in a small tensor",
          "[layer_norm][streaming]") {
  // y and dx of [4096, 1024] (16 MiB in float32) bypass the caches; a [16, 1024] slice does not.
  // Each row's y and dx depend only on that row, so both must agree bit for bit.
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  CAPTURE(dtype);
  constexpr int64_t M = 4096, N = 1024, kSlice = 16;
  tg::manual_seed(23);
  const Tensor x_values = tg::randn({M, N}, dtype) * 3.0 - 1.0;
  const Tensor dy = tg::randn({M, N}, dtype);
  const Tensor w_values = tg::randn({N}, dtype), b_values = tg::randn({N}, dtype);

  Tensor x = leaf(x_values), w = leaf(w_values), b = leaf(b_values);
  Tensor y = F::layer_norm(x, {N}, w, b, 1e-5);
  y.backward(dy);
  const auto y_bytes = bytes(y), dx_bytes = bytes(x.grad());

  const size_t row_bytes = N * element_size(dtype);
  // rows [first, first + kSlice) of a [M, N] tensor, as a new [kSlice, N] tensor
  auto rows = [&](const Tensor& t, int64_t first) {
    Tensor out = tg::empty({kSlice, N}, dtype);
    const auto all = bytes(t);
    if (dtype == tg::kFloat32) std::memcpy(out.mutable_data<float>(), all.data() + first * row_bytes, kSlice * row_bytes);
    else std::memcpy(out.mutable_data<double>(), all.data() + first * row_bytes, kSlice * row_bytes);
    return out;
  };
  for (const int64_t first : {int64_t{0}, M / 2 + 3, M - kSlice}) {
    CAPTURE(first);
    Tensor x_slice = leaf(rows(x_values, first)), w_slice = leaf(w_values), b_slice = leaf(b_values);
    Tensor y_slice = F::layer_norm(x_slice, {N}, w_slice, b_slice, 1e-5);
    y_slice.backward(rows(dy, first));
    const auto expected_y = bytes(y_slice), expected_dx = bytes(x_slice.grad());
    REQUIRE(std::equal(expected_y.begin(), expected_y.end(), y_bytes.begin() + first * row_bytes));
    REQUIRE(std::equal(expected_dx.begin(), expected_dx.end(), dx_bytes.begin() + first * row_bytes));
  }
}
