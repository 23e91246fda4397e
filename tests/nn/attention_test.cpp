// scaled_dot_product_attention: PyTorch 2.x's results (tests/fixtures/make_attention_fixtures.py),
// gradchecks, dropout, bitwise determinism across thread counts and vector levels, and errors.
#include <cmath>
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "support/vector_isa_levels.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

// The options of a fixture case: its mask (bool, stored as 0/1, or floating in `dtype`), is_causal
// and scale.
F::ScaledDotProductAttentionOptions fixture_options(const tg::testing::FixtureCase& c, tg::DType dtype) {
  F::ScaledDotProductAttentionOptions options;
  if (c.has("mask")) options.attn_mask = c.at("mask").to(dtype);
  if (c.has("mask_bool")) options.attn_mask = c.at("mask_bool").to(tg::kBool);
  options.is_causal = c.scalar("is_causal") != 0.0;
  if (c.has("scale")) options.scale = c.scalar("scale");
  return options;
}

const std::vector<std::string> kCases = {"plain",         "bool_mask",     "bool_mask_masked_row",
                                         "float_mask",    "key_padding",   "scale",
                                         "causal",        "causal_l_lt_s", "causal_l_gt_s",
                                         "tiles_float_mask", "tiles_causal", "matrix"};

// q, k, v of a case as leaves of `dtype`, its output and gradients for its dy.
struct Run {
  Tensor y, dq, dk, dv;
};
Run run_case(const tg::testing::FixtureCase& c, tg::DType dtype) {
  Tensor q = leaf(c.at("q").to(dtype)), k = leaf(c.at("k").to(dtype)), v = leaf(c.at("v").to(dtype));
  const F::ScaledDotProductAttentionOptions options = fixture_options(c, dtype);
  Tensor y = F::scaled_dot_product_attention(q, k, v, options);
  REQUIRE(std::string(y.grad_fn_name()) == "ScaledDotProductAttentionBackward");
  y.backward(c.at("dy").to(dtype));
  return {y.detach(), q.grad(), k.grad(), v.grad()};
}

}  // namespace

TEST_CASE("scaled_dot_product_attention matches PyTorch in float64 to 1e-12", "[attention][fixture]") {
  const std::string name = GENERATE(from_range(kCases));
  CAPTURE(name);
  const tg::testing::FixtureCase& c = tg::testing::fixture("attention.txt", name);
  for (const char* what : {"y", "dq", "dk", "dv"}) REQUIRE(all_finite(c.at(what)));
  const Run r = run_case(c, tg::kFloat64);
  REQUIRE(relative_error(r.y, c.at("y")) <= 1e-12);
  REQUIRE(relative_error(r.dq, c.at("dq")) <= 1e-12);
  REQUIRE(relative_error(r.dk, c.at("dk")) <= 1e-12);
  REQUIRE(relative_error(r.dv, c.at("dv")) <= 1e-12);
}

TEST_CASE("scaled_dot_product_attention in float32 is within a few times PyTorch's float32 error",
          "[attention][fixture]") {
  const std::string name = GENERATE(from_range(kCases));
  CAPTURE(name);
  const tg::testing::FixtureCase& c = tg::testing::fixture("attention.txt", name);
  const Run r = run_case(c, tg::kFloat32);
  const std::pair<Tensor, const char*> results[] = {{r.y, "y"}, {r.dq, "dq"}, {r.dk, "dk"}, {r.dv, "dv"}};
  for (const auto& [result, what] : results) {
    const double error = relative_error(result, c.at(what));
    const double torch_error = c.scalar(std::string("torch_f32_err_") + what);
    INFO(what << ": relative error " << error << ", PyTorch's float32 " << torch_error);
    REQUIRE(error <= 4 * torch_error + 1e-7);
  }
}

TEST_CASE("scaled_dot_product_attention gives a query with no key a zero row and zero gradients, as PyTorch 2.5",
          "[attention]") {
  Tensor q = randn_leaf({1, 3, 4}, tg::kFloat64), k = randn_leaf({1, 5, 4}, tg::kFloat64),
         v = randn_leaf({1, 5, 2}, tg::kFloat64);
  Tensor keep = tg::ones({3, 5}, tg::kBool);
  for (int j = 0; j < 5; ++j) keep.mutable_data<bool>()[5 + j] = false;  // query 1 sees no key
  Tensor y = F::scaled_dot_product_attention(q, k, v, {.attn_mask = keep});
  y.sum().backward();
  const std::vector<double> out = y.to_vector<double>(), dq = q.grad().to_vector<double>();
  for (int e = 0; e < 2; ++e) {
    REQUIRE(out[2 + e] == 0.0);  // query 1's row
    REQUIRE(std::isfinite(out[e]));
    REQUIRE(out[e] != 0.0);
  }
  for (int e = 0; e < 4; ++e) REQUIRE(dq[4 + e] == 0.0);
  REQUIRE(all_finite(q.grad()));
  REQUIRE(all_finite(k.grad()));
  REQUIRE(all_finite(v.grad()));
  // S = 0: every query has no key.
  Tensor empty_keys = F::scaled_dot_product_attention(tg::randn({2, 3}), tg::randn({0, 3}), tg::randn({0, 4}));
  REQUIRE(empty_keys.shape() == Shape{2, 4});
  REQUIRE(empty_keys.abs().sum().item<double>() == 0.0);
}

TEST_CASE("scaled_dot_product_attention's differentiated backward gives a query with no key the same zeros",
          "[attention][gradcheck]") {
  // The two backwards (fused kernels; the composite a create_graph pass records) agree on a masked
  // row, and the second derivative stays finite: one answer on every path.
  Tensor q = randn_leaf({2, 3, 4}, tg::kFloat64), k = randn_leaf({2, 5, 4}, tg::kFloat64),
         v = randn_leaf({2, 5, 2}, tg::kFloat64);
  Tensor mask = tg::zeros({2, 3, 5}, tg::kFloat64);
  for (int j = 0; j < 5; ++j) mask.mutable_data<double>()[(1 * 3 + 2) * 5 + j] = -INFINITY;  // head 1, query 2
  const Tensor dy = tg::randn({2, 3, 2}, tg::kFloat64);
  const auto grads_of = [&](bool create_graph) {
    const Tensor y = F::scaled_dot_product_attention(q, k, v, {.attn_mask = mask});
    return tg::autograd::grad({y}, {q, k, v}, {dy}, {.create_graph = create_graph});
  };
  const std::vector<Tensor> fused = grads_of(false), composite = grads_of(true);
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    TG_REQUIRE_CLOSE(composite[i], fused[i], 1e-12);
  }
  TG_REQUIRE_CLOSE(composite[0].select(0, 1).select(0, 2), tg::zeros({4}, tg::kFloat64), 0.0);
  const std::vector<Tensor> second = tg::autograd::grad({composite[0].pow(2.0).sum()}, {q, k, v}, {}, {.allow_unused = true});
  for (const Tensor& g : second)
    if (g.defined()) REQUIRE(all_finite(g));
}

TEST_CASE("scaled_dot_product_attention passes gradcheck in float64", "[attention][gradcheck]") {
  tg::manual_seed(29);
  const int variant = GENERATE(0, 1, 2, 3, 4);
  CAPTURE(variant);
  std::vector<Tensor> inputs{randn_leaf({2, 7, 3}, tg::kFloat64), randn_leaf({2, 9, 3}, tg::kFloat64),
                             randn_leaf({2, 9, 4}, tg::kFloat64)};
  F::ScaledDotProductAttentionOptions options;
  if (variant == 1) options.is_causal = true;
  if (variant == 2) options.attn_mask = tg::randn({7, 9}, tg::kFloat64);
  if (variant == 3) options.scale = 0.8;
  const bool dropout = variant == 4;
  auto fn = [options, dropout](const std::vector<Tensor>& in) {
    F::ScaledDotProductAttentionOptions o = options;
    tg::Generator generator(11);  // the same keep bits at every evaluation
    if (dropout) o.dropout_p = 0.3, o.generator = &generator;
    return F::scaled_dot_product_attention(in[0], in[1], in[2], o);
  };
  TG_REQUIRE_GRADCHECK(fn, inputs);
}

TEST_CASE("scaled_dot_product_attention's dropout keeps 1 − p of the weights, scaled, reproducibly",
          "[attention][dropout]") {
  // q = 0: every weight is 1/S; v = 1: each output is (kept keys)/(S·(1 − p)).
  const int64_t L = 512, S = 64;
  const double p = 0.25;
  Tensor q = tg::zeros({L, 8}, tg::kFloat64), k = tg::randn({S, 8}, tg::kFloat64), v = tg::ones({S, 1}, tg::kFloat64);
  tg::Generator g1(5), g2(5), g3(6);
  Tensor y1 = F::scaled_dot_product_attention(q, k, v, {.dropout_p = p, .generator = &g1});
  Tensor y2 = F::scaled_dot_product_attention(q, k, v, {.dropout_p = p, .generator = &g2});
  Tensor y3 = F::scaled_dot_product_attention(q, k, v, {.dropout_p = p, .generator = &g3});
  REQUIRE(bytes(y1) == bytes(y2));
  REQUIRE(bytes(y1) != bytes(y3));
  double kept = 0;
  for (double value : y1.to_vector<double>()) {
    const double count = value * S * (1 - p);
    REQUIRE(std::fabs(count - std::round(count)) < 1e-9);
    kept += count;
  }
  REQUIRE(std::fabs(kept / (L * S) - (1 - p)) < 0.01);  // 32768 draws: σ = 0.0024
  Tensor all_dropped = F::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.0});
  REQUIRE(all_dropped.abs().sum().item<double>() == 0.0);
}

TEST_CASE("scaled_dot_product_attention is bitwise identical at any thread count", "[attention][threads]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const int variant = GENERATE(0, 1, 2);
  CAPTURE(dtype, variant);
  tg::manual_seed(7);
  const Tensor q0 = tg::randn({3, 2, 150, 16}, dtype), k0 = tg::randn({3, 2, 140, 16}, dtype),
               v0 = tg::randn({3, 2, 140, 8}, dtype), dy = tg::randn({3, 2, 150, 8}, dtype);
  const Tensor mask = tg::randn({2, 150, 140}, dtype);
  require_bitwise_identical_across_threads([&] {
    Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
    tg::Generator generator(3);
    F::ScaledDotProductAttentionOptions options;
    if (variant == 0) options.is_causal = true;
    if (variant == 1) options.attn_mask = mask;
    if (variant == 2) options.dropout_p = 0.2, options.generator = &generator;
    Tensor y = F::scaled_dot_product_attention(q, k, v, options);
    y.backward(dy);
    return std::vector<std::pair<std::string, std::vector<unsigned char>>>{
        {"y", bytes(y)}, {"dq", bytes(q.grad())}, {"dk", bytes(k.grad())}, {"dv", bytes(v.grad())}};
  });
}

TEST_CASE("scaled_dot_product_attention at every vector level: the FMA levels bitwise equal, v2 within rounding",
          "[attention][vector_isa]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  CAPTURE(dtype);
  tg::manual_seed(8);
  const Tensor q0 = tg::randn({2, 100, 24}, dtype), k0 = tg::randn({2, 130, 24}, dtype),
               v0 = tg::randn({2, 130, 20}, dtype), dy = tg::randn({2, 100, 20}, dtype);
  auto run = [&] {
    Tensor q = leaf(q0), k = leaf(k0), v = leaf(v0);
    Tensor y = F::scaled_dot_product_attention(q, k, v, {.is_causal = true});
    y.backward(dy);
    return std::vector<Tensor>{y.detach(), q.grad(), k.grad(), v.grad()};
  };
  const auto per_level = tg::testing::at_every_supported_level(run);
  const double tolerance = dtype == tg::kFloat32 ? 1e-5 : 1e-13;
  const std::vector<Tensor>* fma_reference = nullptr;
  for (const auto& [level, results] : per_level) {
    CAPTURE(level);
    for (size_t i = 0; i < results.size(); ++i)
      REQUIRE(relative_error(results[i], per_level.front().second[i]) <= tolerance);
    // The tile products are the small GEMM's: fused multiply-adds at v3 and avx512, rounded
    // products at v2 (ops/small_gemm_kernels.hpp); everything else is the same bits at every level.
    if (level == "v2") continue;
    if (!fma_reference) fma_reference = &results;
    for (size_t i = 0; i < results.size(); ++i) REQUIRE(bytes(results[i]) == bytes((*fma_reference)[i]));
  }
}

TEST_CASE("scaled_dot_product_attention names the shapes of bad arguments", "[attention][errors]") {
  using Catch::Matchers::Contains;
  const Tensor q = tg::randn({2, 5, 4}), k = tg::randn({2, 6, 4}), v = tg::randn({2, 6, 3});
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, tg::randn({2, 6, 5}), v), Contains("[2, 6, 5]"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, tg::randn({2, 7, 3})), Contains("[2, 7, 3]"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, tg::randn({3, 6, 4}), tg::randn({3, 6, 3})),
                   Contains("leading dims"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(tg::randn({4}), tg::randn({4}), tg::randn({4})),
                   Contains("rank >= 2"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k.to(tg::kFloat64), v), Contains("dtypes differ"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, v, {.attn_mask = tg::ones({5, 7})}),
                   Contains("[2, 5, 6]") && Contains("[5, 7]"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, v, {.attn_mask = tg::ones({5, 6}, tg::kInt64)}),
                   Contains("int64"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, v, {.attn_mask = tg::ones({5, 6}, tg::kFloat64)}),
                   Contains("float64"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, v, {.attn_mask = tg::ones({3, 2, 5, 6})}),
                   Contains("[3, 2, 5, 6]"));
  REQUIRE_TG_ERROR(
      F::scaled_dot_product_attention(q, k, v, {.attn_mask = tg::ones({5, 6}, tg::kBool), .is_causal = true}),
      Contains("is_causal"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, v, {.attn_mask = tg::zeros({5, 6}).requires_grad_()}),
                   Contains("requires grad"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q, k, v, {.dropout_p = 1.5}), Contains("1.5"));
  REQUIRE_TG_ERROR(F::scaled_dot_product_attention(q.to(tg::kInt64), k.to(tg::kInt64), v.to(tg::kInt64)),
                   Contains("scaled_dot_product_attention"));
}
