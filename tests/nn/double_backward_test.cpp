// Double backward through nn's fused ops: a gradient computed with create_graph is itself
// differentiable. Three checks per op, in float64:
//   - the gradient a create_graph pass computes (recorded tg ops) equals the fused backward's;
//   - its derivatives, in the inputs and in the upstream gradient, equal the finite differences of
//     the gradient (gradcheck of the function inputs, g ↦ ∇⟨f(inputs), g⟩);
//   - Hessian-vector products of small losses through the fused modules equal PyTorch's double
//     backward (tests/fixtures/make_nn_double_backward_fixtures.py) to 1e-10.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nn_test_util.hpp"

namespace F = tg::nn::functional;
namespace nn = tg::nn;
using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

double values_max_abs(const Tensor& t) {
  double m = 0.0;
  for (double v : tg::testing::values(t)) m = std::max(m, std::fabs(v));
  return m;
}

const char* reduction_name(tg::nn::Reduction reduction) {
  return reduction == tg::nn::Reduction::None ? "none" : reduction == tg::nn::Reduction::Mean ? "mean" : "sum";
}

Tensor random_leaf(const Shape& shape) { return tg::randn(shape, tg::kFloat64).requires_grad_(); }
// Uniform in (low, high), as a leaf.
Tensor uniform_leaf(const Shape& shape, double low, double high) {
  return (tg::rand(shape, tg::kFloat64) * (high - low) + low).detach().requires_grad_();
}
Tensor int64s(const std::vector<int64_t>& values, const Shape& shape) { return tg::tensor(values, shape, tg::kInt64); }

std::vector<Tensor> first_gradients(const Function& f, const std::vector<Tensor>& inputs, const Tensor& g,
                                    bool create_graph) {
  const Tensor out = f(inputs);
  return tg::autograd::grad({out}, inputs, {g}, {.create_graph = create_graph});
}

// f's gradients for the upstream gradient g, computed by a create_graph pass, equal the fused
// backward's (up to rounding: the recorded ops round differently); `exact` asks for the same bits.
void require_same_first_gradients(const Function& f, const std::vector<Tensor>& inputs, const Tensor& g,
                                  bool exact = false) {
  const std::vector<Tensor> fused = first_gradients(f, inputs, g, false);
  const std::vector<Tensor> recorded = first_gradients(f, inputs, g, true);
  REQUIRE(fused.size() == recorded.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    CAPTURE(i);
    REQUIRE(!fused[i].requires_grad());
    if (exact) REQUIRE(bytes(recorded[i]) == bytes(fused[i]));
    else TG_REQUIRE_CLOSE(recorded[i], fused[i], 1e-12 * (1.0 + values_max_abs(fused[i])));
  }
}

// The second derivatives of f: gradcheck of (inputs..., g) ↦ the create_graph gradients of
// ⟨f(inputs), g⟩, flattened and concatenated. Its analytic Jacobian is the double backward; its
// numeric one the finite differences of the first gradient. Also checks the first gradients.
void require_second_derivatives(const Function& f, std::vector<Tensor> inputs) {
  Tensor g;
  {
    tg::NoGradGuard no_grad;
    g = tg::randn(f(inputs).shape(), tg::kFloat64);
  }
  require_same_first_gradients(f, inputs, g);
  inputs.push_back(g.requires_grad_());
  const Function gradients = [&f](const std::vector<Tensor>& in) {
    const std::vector<Tensor> x(in.begin(), in.end() - 1);
    std::vector<Tensor> flat;
    for (const Tensor& grad : first_gradients(f, x, in.back(), true)) flat.push_back(grad.reshape({-1}));
    return tg::cat(flat);
  };
  TG_REQUIRE_GRADCHECK(gradients, inputs);
}

const std::vector<nn::Reduction> kReductions = {nn::Reduction::None, nn::Reduction::Mean, nn::Reduction::Sum};

}  // namespace

TEST_CASE("Linear's gradient is differentiable", "[double_backward][linear]") {
  tg::manual_seed(1);
  SECTION("with bias") {
    require_second_derivatives([](const auto& in) { return F::linear(in[0], in[1], in[2]); },
                               {random_leaf({3, 4}), random_leaf({5, 4}), random_leaf({5})});
  }
  SECTION("3-d input, no bias") {
    require_second_derivatives([](const auto& in) { return F::linear(in[0], in[1]); }, {random_leaf({2, 3, 4}), random_leaf({2, 4})});
  }
  SECTION("1-d input") {
    require_second_derivatives([](const auto& in) { return F::linear(in[0], in[1], in[2]); },
                               {random_leaf({4}), random_leaf({3, 4}), random_leaf({3})});
  }
}

TEST_CASE("LayerNorm's and RMSNorm's gradients are differentiable", "[double_backward][layer_norm]") {
  tg::manual_seed(2);
  SECTION("layer_norm, weight and bias") {
    require_second_derivatives([](const auto& in) { return F::layer_norm(in[0], {5}, in[1], in[2], 1e-5); },
                               {random_leaf({3, 5}), random_leaf({5}), random_leaf({5})});
  }
  SECTION("layer_norm over two dims, no affine, large eps") {
    require_second_derivatives([](const auto& in) { return F::layer_norm(in[0], {3, 2}, {}, {}, 0.5); },
                               {random_leaf({2, 3, 2})});
  }
  SECTION("rms_norm, weight, default eps") {
    require_second_derivatives([](const auto& in) { return F::rms_norm(in[0], {4}, in[1]); },
                               {random_leaf({3, 4}), random_leaf({4})});
  }
  SECTION("rms_norm, no weight, eps 0.1") {
    require_second_derivatives([](const auto& in) { return F::rms_norm(in[0], {2, 3}, {}, 0.1); }, {random_leaf({2, 2, 3})});
  }
}

TEST_CASE("Dropout's gradient is differentiable, with the forward's mask", "[double_backward][dropout]") {
  tg::manual_seed(3);
  // A generator reseeded at every call: each evaluation draws the same mask.
  const Function f = [](const std::vector<Tensor>& in) {
    tg::Generator generator(11);
    return F::dropout(in[0], 0.4, true, &generator);
  };
  const Tensor x = random_leaf({4, 6});
  require_second_derivatives(f, {x});
  require_same_first_gradients(f, {x}, tg::randn({4, 6}, tg::kFloat64), /*exact=*/true);
}

TEST_CASE("Embedding's gradient is differentiable", "[double_backward][embedding]") {
  tg::manual_seed(4);
  const Tensor indices = int64s({0, 2, 2, 5, 1, 2, 0, 3}, {2, 4});
  SECTION("plain") {
    require_second_derivatives([&](const auto& in) { return F::embedding(indices, in[0]); }, {random_leaf({6, 3})});
  }
  SECTION("padding_idx and scale_grad_by_freq") {
    require_second_derivatives(
        [&](const auto& in) {
          return F::embedding(indices, in[0], F::EmbeddingFuncOptions{.padding_idx = 2, .scale_grad_by_freq = true});
        },
        {random_leaf({6, 3})});
  }
  SECTION("embedding then linear: the gradient of the table depends on the linear's weight") {
    // No padding_idx here: its row is read forward but gets no gradient, which finite differences
    // of the linear's gradient would see.
    require_second_derivatives([&](const auto& in) { return F::linear(F::embedding(indices, in[0]), in[1]); },
                               {random_leaf({6, 3}), random_leaf({2, 3})});
  }
}

TEST_CASE("cross_entropy's and nll_loss's gradients are differentiable", "[double_backward][cross_entropy]") {
  tg::manual_seed(5);
  const nn::Reduction reduction = GENERATE(from_range(kReductions));
  CAPTURE(reduction_name(reduction));
  SECTION("class indices, weights, ignore_index, label smoothing") {
    const Tensor weight = tg::rand({5}, tg::kFloat64) + 0.5;
    const Tensor target = int64s({1, 4, 7, 0}, {4});
    require_second_derivatives(
        [&](const auto& in) {
          return nn::cross_entropy(in[0], target,
                                   {.weight = weight, .ignore_index = 7, .reduction = reduction, .label_smoothing = 0.2});
        },
        {random_leaf({4, 5})});
  }
  SECTION("class indices, spatial dims") {
    const Tensor target = int64s({0, 2, 1, 1, 2, 0, 0, 1}, {2, 4});
    require_second_derivatives([&](const auto& in) { return nn::cross_entropy(in[0], target, {.reduction = reduction}); },
                               {random_leaf({2, 3, 4})});
  }
  SECTION("an unbatched [C] input") {
    const Tensor target = int64s({2}, {1}).reshape({});
    require_second_derivatives(
        [&](const auto& in) {
          return nn::cross_entropy(in[0], target, {.reduction = reduction, .label_smoothing = 0.1});
        },
        {random_leaf({4})});
  }
  SECTION("probabilities, differentiable in both, weights and smoothing") {
    const Tensor weight = tg::rand({3}, tg::kFloat64) + 0.5;
    require_second_derivatives(
        [&](const auto& in) {
          return nn::cross_entropy(in[0], in[1], {.weight = weight, .reduction = reduction, .label_smoothing = 0.3});
        },
        {random_leaf({4, 3}), uniform_leaf({4, 3}, 0.1, 0.9)});
  }
  SECTION("probabilities, spatial dims") {
    require_second_derivatives(
        [&](const auto& in) { return nn::cross_entropy(in[0], in[1], {.reduction = reduction}); },
        {random_leaf({2, 3, 2}), uniform_leaf({2, 3, 2}, 0.1, 0.9)});
  }
  SECTION("nll_loss with weights: linear in the input, its gradient a function of g alone") {
    const Tensor weight = tg::rand({4}, tg::kFloat64) + 0.5;
    const Tensor target = int64s({3, 0, -100, 1, 1}, {5});
    require_second_derivatives(
        [&](const auto& in) { return nn::nll_loss(in[0], target, {.weight = weight, .reduction = reduction}); },
        {random_leaf({5, 4})});
  }
}

TEST_CASE("the binary cross-entropies' gradients are differentiable", "[double_backward][loss]") {
  tg::manual_seed(6);
  const nn::Reduction reduction = GENERATE(from_range(kReductions));
  CAPTURE(reduction_name(reduction));
  const Tensor weight = tg::rand({3, 4}, tg::kFloat64) + 0.5;
  const Tensor pos_weight = tg::rand({4}, tg::kFloat64) + 0.5;
  SECTION("binary_cross_entropy") {
    require_second_derivatives(
        [&](const auto& in) { return nn::binary_cross_entropy(in[0], in[1], weight, reduction); },
        {uniform_leaf({3, 4}, 0.1, 0.9), uniform_leaf({3, 4}, 0.0, 1.0)});
  }
  SECTION("binary_cross_entropy_with_logits, weight and pos_weight") {
    require_second_derivatives(
        [&](const auto& in) {
          return nn::binary_cross_entropy_with_logits(in[0], in[1], weight, pos_weight, reduction);
        },
        {random_leaf({3, 4}), uniform_leaf({3, 4}, 0.0, 1.0)});
  }
  SECTION("binary_cross_entropy_with_logits, no weights, large logits") {
    require_second_derivatives(
        [&](const auto& in) { return nn::binary_cross_entropy_with_logits(in[0], in[1], {}, {}, reduction); },
        {(random_leaf({3, 4}) * 30.0).detach().requires_grad_(), uniform_leaf({3, 4}, 0.0, 1.0)});
  }
}

TEST_CASE("the regression losses' gradients are differentiable", "[double_backward][loss]") {
  tg::manual_seed(7);
  const nn::Reduction reduction = GENERATE(from_range(kReductions));
  CAPTURE(reduction_name(reduction));
  using Loss = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::map<std::string, Loss> losses = {
      {"mse_loss", [&](const Tensor& a, const Tensor& b) { return nn::mse_loss(a, b, reduction); }},
      {"l1_loss", [&](const Tensor& a, const Tensor& b) { return nn::l1_loss(a, b, reduction); }},
      {"smooth_l1_loss beta 0.8", [&](const Tensor& a, const Tensor& b) { return nn::smooth_l1_loss(a, b, reduction, 0.8); }},
      {"smooth_l1_loss beta 0", [&](const Tensor& a, const Tensor& b) { return nn::smooth_l1_loss(a, b, reduction, 0.0); }},
      {"huber_loss delta 0.6", [&](const Tensor& a, const Tensor& b) { return nn::huber_loss(a, b, reduction, 0.6); }},
  };
  for (const auto& [name, loss] : losses) {
    CAPTURE(name);
    // Through a Linear, so that the curvature of each piece reaches the weight.
    require_second_derivatives([&](const auto& in) { return loss(F::linear(in[0], in[1]), in[2]); },
                               {random_leaf({4, 3}), random_leaf({3, 3}), random_leaf({4, 3})});
  }
}

TEST_CASE("scaled_dot_product_attention's gradient is differentiable", "[double_backward][attention]") {
  tg::manual_seed(8);
  const auto attention = [](F::ScaledDotProductAttentionOptions options) -> Function {
    return [options](const std::vector<Tensor>& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2], options); };
  };
  SECTION("plain, 4-d") {
    require_second_derivatives(attention({}), {random_leaf({1, 2, 3, 4}), random_leaf({1, 2, 5, 4}), random_leaf({1, 2, 5, 3})});
  }
  SECTION("float mask with -inf, broadcast over heads") {
    Tensor mask = tg::randn({3, 5}, tg::kFloat64);
    mask = tg::where(tg::rand({3, 5}, tg::kFloat64) < 0.3, tg::full({3, 5}, -INFINITY, tg::kFloat64), mask);
    mask = tg::where(tg::arange(5).reshape({1, 5}) == 0, tg::zeros({3, 5}, tg::kFloat64), mask);
    require_second_derivatives(attention({.attn_mask = mask}), {random_leaf({2, 3, 4}), random_leaf({2, 5, 4}), random_leaf({2, 5, 2})});
  }
  SECTION("bool mask with a query that sees no key") {
    std::vector<int64_t> keep = {1, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1};  // [3, 4]: query 1 sees no key
    const Tensor mask = tg::tensor(keep, {3, 4}, tg::kInt64).to(tg::kBool);
    require_second_derivatives(attention({.attn_mask = mask}), {random_leaf({2, 3, 2}), random_leaf({2, 4, 2}), random_leaf({2, 4, 3})});
  }
  SECTION("causal, L > S, scale") {
    require_second_derivatives(attention({.is_causal = true, .scale = 0.7}),
                               {random_leaf({2, 5, 3}), random_leaf({2, 4, 3}), random_leaf({2, 4, 2})});
  }
  SECTION("dropout: the kernels' mask, as a constant") {
    const Function f = [](const std::vector<Tensor>& in) {
      tg::Generator generator(5);
      return F::scaled_dot_product_attention(in[0], in[1], in[2], {.dropout_p = 0.3, .generator = &generator});
    };
    require_second_derivatives(f, {random_leaf({2, 4, 3}), random_leaf({2, 6, 3}), random_leaf({2, 6, 2})});
  }
}

TEST_CASE("without create_graph a gradient is a constant, with it a function on the tape", "[double_backward]") {
  tg::manual_seed(9);
  const Tensor x = random_leaf({3, 4}), w = random_leaf({2, 4});
  const Tensor y = nn::mse_loss(F::layer_norm(F::linear(x, w), {2}), tg::zeros({3, 2}, tg::kFloat64));
  const std::vector<Tensor> plain = tg::autograd::grad({y}, {x, w}, {}, {.retain_graph = true});
  REQUIRE(!plain[0].requires_grad());
  REQUIRE(!plain[1].requires_grad());
  const std::vector<Tensor> recorded = tg::autograd::grad({y}, {x, w}, {}, {.create_graph = true});
  REQUIRE(recorded[0].requires_grad());
  REQUIRE(recorded[1].requires_grad());
}

// --- PyTorch's Hessian-vector products ---------------------------------------------------------

namespace {

using Case = tg::testing::FixtureCase;
using Leaves = std::map<std::string, Tensor>;

// Each fixture case's loss, from its tensors (leaves for the differentiated ones), as the script's.
const std::map<std::string, std::function<Tensor(const Case&, const Leaves&)>>& fixture_losses() {
  static const std::map<std::string, std::function<Tensor(const Case&, const Leaves&)>> losses = {
      {"linear_mse", [](const Case& c, const Leaves& t) { return nn::mse_loss(F::linear(t.at("x"), t.at("W"), t.at("b")), c.at("t")); }},
      {"linear_3d_nobias_sum",
       [](const Case& c, const Leaves& t) {
         return nn::mse_loss(F::linear(t.at("x"), t.at("W")), c.at("t"), nn::Reduction::Sum);
       }},
      {"layer_norm_mse",
       [](const Case& c, const Leaves& t) {
         return nn::mse_loss(F::layer_norm(t.at("x"), {6}, t.at("w"), t.at("b"), 1e-5), c.at("t"));
       }},
      {"layer_norm_2d_shape",
       [](const Case& c, const Leaves& t) {
         return nn::mse_loss(F::layer_norm(t.at("x"), {3, 4}, t.at("w"), {}, 0.1), c.at("t"), nn::Reduction::Sum);
       }},
      {"rms_norm_mse",
       [](const Case& c, const Leaves& t) { return nn::mse_loss(F::rms_norm(t.at("x"), {5}, t.at("w")), c.at("t")); }},
      {"rms_norm_noweight",
       [](const Case& c, const Leaves& t) { return nn::mse_loss(F::rms_norm(t.at("x"), {2, 3}, {}, 0.01), c.at("t")); }},
      {"cross_entropy_linear",
       [](const Case& c, const Leaves& t) {
         const Tensor y = int64s(c.ints("y"), {5});
         return nn::cross_entropy(F::linear(t.at("x"), t.at("W"), t.at("b")), y,
                                  {.weight = c.at("weight"), .label_smoothing = 0.1});
       }},
      {"cross_entropy_spatial_none",
       [](const Case& c, const Leaves& t) {
         const Tensor y = int64s(c.ints("y"), {2, 3});
         return nn::mse_loss(nn::cross_entropy(t.at("x"), y, {.reduction = nn::Reduction::None}), c.at("t"),
                             nn::Reduction::Sum);
       }},
      {"cross_entropy_probabilities",
       [](const Case& c, const Leaves& t) {
         return nn::cross_entropy(t.at("x"), t.at("p"),
                                  {.weight = c.at("weight"), .reduction = nn::Reduction::Sum, .label_smoothing = 0.2});
       }},
      {"bce_with_logits",
       [](const Case& c, const Leaves& t) {
         return nn::binary_cross_entropy_with_logits(t.at("x"), t.at("t"), c.at("weight"), c.at("pos_weight"));
       }},
      {"bce",
       [](const Case& c, const Leaves& t) {
         return nn::binary_cross_entropy(t.at("x"), t.at("t"), c.at("weight"), nn::Reduction::Sum);
       }},
      {"huber_of_linear",
       [](const Case& c, const Leaves& t) {
         return nn::huber_loss(F::linear(t.at("x"), t.at("W")), c.at("t"), nn::Reduction::Mean, 0.7);
       }},
      {"smooth_l1_of_linear",
       [](const Case& c, const Leaves& t) {
         return nn::smooth_l1_loss(F::linear(t.at("x"), t.at("W")), c.at("t"), nn::Reduction::Sum, 0.5);
       }},
      {"embedding_linear",
       [](const Case& c, const Leaves& t) {
         const Tensor idx = int64s(c.ints("idx"), {2, 4});
         return nn::mse_loss(F::linear(F::embedding(idx, t.at("E"), 1), t.at("W")), c.at("t"));
       }},
      {"attention_float_mask",
       [](const Case& c, const Leaves& t) {
         return nn::mse_loss(F::scaled_dot_product_attention(t.at("q"), t.at("k"), t.at("v"), {.attn_mask = c.at("mask")}),
                             c.at("t"));
       }},
      {"attention_causal_scale",
       [](const Case& c, const Leaves& t) {
         return nn::mse_loss(
             F::scaled_dot_product_attention(t.at("q"), t.at("k"), t.at("v"), {.is_causal = true, .scale = 0.6}),
             c.at("t"));
       }},
      {"attention_bool_mask_dead_row",
       [](const Case& c, const Leaves& t) {
         const Tensor mask = c.at("mask_bool").to(tg::kBool);
         return nn::mse_loss(F::scaled_dot_product_attention(t.at("q"), t.at("k"), t.at("v"), {.attn_mask = mask}),
                             c.at("t"));
       }},
  };
  return losses;
}

// The fixture case `name`'s loss, its gradient and its Hessian-vector product against PyTorch's:
// gradients with create_graph, then the gradient of Σ ⟨gradient, v⟩.
void require_pytorch_hvp(const std::string& name, const std::function<Tensor(const Case&, const Leaves&)>& loss_of) {
  CAPTURE(name);
  const Case& c = tg::testing::fixture("nn_double_backward.txt", name);
  // The differentiated inputs are those with a v_<name>; leaves and directions both in name order.
  Leaves leaves;
  std::vector<Tensor> inputs, directions;
  for (const auto& [tensor_name, tensor] : c.tensors) {
    if (tensor_name.rfind("v_", 0) != 0) continue;
    const std::string input = tensor_name.substr(2);
    leaves[input] = leaf(c.at(input));
    inputs.push_back(leaves[input]);
    directions.push_back(tensor);
  }
  REQUIRE(!inputs.empty());
  const Tensor loss = loss_of(c, leaves);
  REQUIRE(relative_error(loss, c.at("loss")) <= 1e-12);
  const std::vector<Tensor> grads = tg::autograd::grad({loss}, inputs, {}, {.create_graph = true});
  Tensor dot = tg::scalar_tensor(0.0, tg::kFloat64);
  size_t k = 0;
  for (const auto& entry : leaves) {
    const std::string& input = entry.first;
    CAPTURE(input);
    REQUIRE(grads[k].requires_grad());
    REQUIRE(relative_error(grads[k], c.at("g_" + input)) <= 1e-12);
    dot = dot + (grads[k] * directions[k]).sum();
    ++k;
  }
  const std::vector<Tensor> products = tg::autograd::grad({dot}, inputs);
  k = 0;
  for (const auto& entry : leaves) {
    const std::string& input = entry.first;
    CAPTURE(input);
    const Tensor& expected = c.at("hv_" + input);
    INFO("hv: " << products[k] << "\nexpected: " << expected);
    REQUIRE(tg::testing::max_abs_diff(products[k], expected) <= 1e-10 * (1.0 + values_max_abs(expected)));
    ++k;
  }
}

}  // namespace

TEST_CASE("Hessian-vector products through nn's fused ops equal PyTorch's to 1e-10", "[double_backward][fixture]") {
  std::vector<std::string> names;
  for (const auto& entry : fixture_losses()) names.push_back(entry.first);
  const std::string name = GENERATE_COPY(from_range(names));
  require_pytorch_hvp(name, fixture_losses().at(name));
}

// Issue 30's target: the Hessian-vector product of an MLP's loss. GELU is core's op, so this also
// needs core's GELU backward to be differentiable.
TEST_CASE("the Hessian-vector product of an MLP's loss (Linear, GELU, LayerNorm, cross_entropy) equals PyTorch's",
          "[double_backward][fixture][gelu]") {
  require_pytorch_hvp("mlp_gelu_layer_norm_cross_entropy", [](const Case& c, const Leaves& t) {
    const Tensor hidden =
        F::layer_norm(F::gelu(F::linear(c.at("x"), t.at("W1"), t.at("b1"))), {6}, t.at("g"), t.at("beta"));
    return nn::cross_entropy(F::linear(hidden, t.at("W2"), t.at("b2")), int64s(c.ints("y"), {4}));
  });
}
