// Every differentiable op and module of tapegrad, one row each, checked by tg::gradgradcheck in
// float64: the second derivatives that a backward recorded with create_graph gives, against finite
// differences of first gradients (the first derivatives are gradchecked by each op's own tests).
//
// A row is its name and a maker that returns the inputs (float64; those requiring grad are
// checked) and the function of them. Adding an op adds one row. Module rows bind the module's
// parameter slots to the function's inputs, so that mixed second derivatives (input × weight) are
// checked too. Each row runs in its own section, so one failing row does not hide the others.
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <tapegrad/tapegrad.hpp>

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;

namespace {

using Inputs = std::vector<Tensor>;

struct Case {
  Inputs inputs;
  tg::DifferentiableFunction fn;
};

struct Row {
  std::string name;
  std::function<Case()> make;    // runs after the row's seed is set: random inputs are reproducible
  tg::GradcheckOptions options{};
};

// A float64 leaf that requires grad, uniform in [low, high).
Tensor leaf(const Shape& shape, double low = -1.0, double high = 1.0) {
  Tensor t = tg::empty(shape, tg::kFloat64);
  t.uniform_(low, high);
  return t.requires_grad_();
}

// A float64 constant (no grad), uniform in [low, high).
Tensor constant(const Shape& shape, double low = -1.0, double high = 1.0) { return leaf(shape, low, high).detach(); }

Tensor int64s(const std::vector<int64_t>& values, const Shape& shape = {}) { return tg::tensor(values, shape); }

Row unary(std::string name, std::function<Tensor(const Tensor&)> op, double low = -1.0, double high = 1.0,
          Shape shape = {2, 3}) {
  return {std::move(name), [=] { return Case{{leaf(shape, low, high)}, [op](const Inputs& in) { return op(in[0]); }}; }};
}

Row binary(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> op, Shape a_shape, Shape b_shape,
           double b_low = -1.0, double b_high = 1.0) {
  return {std::move(name), [=] {
            return Case{{leaf(a_shape), leaf(b_shape, b_low, b_high)},
                        [op](const Inputs& in) { return op(in[0], in[1]); }};
          }};
}

// A module's row: `data` are its forward's inputs; each of `slots` becomes one more input, and the
// checked function puts that input itself into the slot (Tensor's assignment replaces the handle,
// where Parameter's copies values), so gradients reach gradgradcheck's own copies.
template <typename M>
Case module_case(std::shared_ptr<M> module, std::vector<tg::nn::Parameter*> slots, Inputs data,
                 std::function<Tensor(M&, const Inputs&)> forward) {
  const size_t n = data.size();
  Inputs inputs = data;
  for (tg::nn::Parameter* slot : slots) inputs.push_back(slot->detach().to(tg::kFloat64).clone().requires_grad_());
  return {inputs, [module, slots, n, forward](const Inputs& in) {
            for (size_t k = 0; k < slots.size(); ++k) static_cast<Tensor&>(*slots[k]) = in[n + k];
            return forward(*module, Inputs(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n)));
          }};
}

std::vector<tg::nn::Parameter*> mha_slots(tg::nn::MultiheadAttention& mha) {
  return {&mha.in_proj_weight, &mha.in_proj_bias, &mha.out_proj.weight, &mha.out_proj.bias};
}

std::vector<tg::nn::Parameter*> encoder_layer_slots(tg::nn::TransformerEncoderLayer& layer) {
  std::vector<tg::nn::Parameter*> slots = mha_slots(layer.self_attn);
  for (tg::nn::Parameter* p : {&layer.linear1.weight, &layer.linear1.bias, &layer.linear2.weight, &layer.linear2.bias,
                               &layer.norm1.weight, &layer.norm1.bias, &layer.norm2.weight, &layer.norm2.bias})
    slots.push_back(p);
  return slots;
}

// A dropout mask that is the same at every evaluation: the generator restarts from one seed.
std::shared_ptr<tg::Generator> fixed_generator() { return std::make_shared<tg::Generator>(7); }

const std::vector<Row>& rows() {
  static const std::vector<Row> table = [] {
    using tg::nn::Reduction;
    std::vector<Row> r;
    // --- arithmetic, with broadcasting ---
    r.push_back(binary("add", [](const Tensor& a, const Tensor& b) { return a + b; }, {2, 3}, {3}));
    r.push_back(binary("sub", [](const Tensor& a, const Tensor& b) { return a - b; }, {2, 3}, {2, 1}));
    r.push_back(binary("mul", [](const Tensor& a, const Tensor& b) { return a * b; }, {2, 3}, {3}));
    r.push_back(binary("div", [](const Tensor& a, const Tensor& b) { return a / b; }, {2, 3}, {3}, 0.5, 1.5));
    r.push_back(unary("add scalar", [](const Tensor& x) { return x + 2.0; }));
    r.push_back(unary("sub scalar", [](const Tensor& x) { return x - 2.0; }));
    r.push_back(unary("rsub scalar", [](const Tensor& x) { return 2.0 - x; }));
    r.push_back(unary("mul scalar", [](const Tensor& x) { return x * 3.0; }));
    r.push_back(unary("div scalar", [](const Tensor& x) { return x / 3.0; }));
    r.push_back(unary("rdiv scalar", [](const Tensor& x) { return 2.0 / x; }, 0.5, 1.5));
    r.push_back(unary("neg", [](const Tensor& x) { return -x; }));
    // --- elementwise math ---
    r.push_back(unary("sqrt", [](const Tensor& x) { return x.sqrt(); }, 0.5, 2.0));
    r.push_back(unary("rsqrt", [](const Tensor& x) { return x.rsqrt(); }, 0.5, 2.0));
    r.push_back(unary("pow 3", [](const Tensor& x) { return x.pow(3.0); }));
    r.push_back(unary("pow 0.5", [](const Tensor& x) { return x.pow(0.5); }, 0.5, 2.0));
    r.push_back(unary("pow -1.5", [](const Tensor& x) { return x.pow(-1.5); }, 0.5, 2.0));
    r.push_back({"pow tensor tensor", [] {
                   return Case{{leaf({2, 3}, 0.5, 2.0), leaf({3}, -1.0, 2.0)},
                               [](const Inputs& in) { return in[0].pow(in[1]); }};
                 }});
    r.push_back(unary("pow scalar base", [](const Tensor& e) { return tg::pow(2.0, e); }));
    r.push_back(unary("exp", [](const Tensor& x) { return x.exp(); }));
    r.push_back(unary("log", [](const Tensor& x) { return x.log(); }, 0.5, 2.0));
    r.push_back(unary("log1p", [](const Tensor& x) { return x.log1p(); }, -0.5, 1.0));
    r.push_back(unary("relu", [](const Tensor& x) { return x.relu(); }));
    r.push_back(unary("tanh", [](const Tensor& x) { return x.tanh(); }));
    r.push_back(unary("sigmoid", [](const Tensor& x) { return x.sigmoid(); }));
    r.push_back(unary("gelu", [](const Tensor& x) { return x.gelu(); }, -2.0, 2.0));
    r.push_back(unary("gelu tanh", [](const Tensor& x) { return x.gelu("tanh"); }, -2.0, 2.0));
    // The CNN activations, their branches on either side of the kinks (0, ±3, βx = threshold).
    r.push_back(unary("silu", [](const Tensor& x) { return F::silu(x); }, -4.0, 4.0));
    r.push_back(unary("leaky_relu", [](const Tensor& x) { return F::leaky_relu(x, 0.2); }));
    r.push_back(unary("elu", [](const Tensor& x) { return F::elu(x, 0.5); }, -2.0, 2.0));
    r.push_back(unary("softplus", [](const Tensor& x) { return F::softplus(x); }, -4.0, 4.0));
    r.push_back(unary("softplus beta 2 below threshold 1", [](const Tensor& x) { return F::softplus(x, 2.0, 1.0); },
                      -1.0, 0.4));
    r.push_back(unary("softplus beta 2 above threshold 1", [](const Tensor& x) { return F::softplus(x, 2.0, 1.0); },
                      0.6, 1.5));
    r.push_back(unary("hardswish", [](const Tensor& x) { return F::hardswish(x); }, -4.0, 4.0, {3, 4}));
    r.push_back(unary("mish", [](const Tensor& x) { return F::mish(x); }, -4.0, 4.0));
    r.push_back(unary("abs", [](const Tensor& x) { return x.abs(); }));
    r.push_back(unary("clamp", [](const Tensor& x) { return x.clamp(-0.5, 0.5); }));
    r.push_back(unary("clamp_min", [](const Tensor& x) { return x.clamp_min(-0.3); }));
    r.push_back(unary("clamp_max", [](const Tensor& x) { return x.clamp_max(0.3); }));
    r.push_back({"clamp tensor bounds", [] {
                   return Case{{leaf({2, 3}, -1.5, 1.5), leaf({3}, -1.0, -0.2), leaf({2, 1}, 0.2, 1.0)},
                               [](const Inputs& in) {
                                 return in[0].clamp(std::optional<Tensor>(in[1]), std::optional<Tensor>(in[2]));
                               }};
                 }});
    r.push_back(binary("maximum", [](const Tensor& a, const Tensor& b) { return tg::maximum(a, b); }, {2, 3}, {3}));
    r.push_back(binary("minimum", [](const Tensor& a, const Tensor& b) { return tg::minimum(a, b); }, {2, 3}, {2, 3}));
    r.push_back({"masked_fill", [] {
                   const Tensor mask = constant({2, 3}) > 0.0;
                   return Case{{leaf({2, 3})}, [mask](const Inputs& in) { return in[0].masked_fill(mask, 0.5); }};
                 }});
    r.push_back({"where", [] {
                   const Tensor condition = constant({2, 3}) > 0.0;
                   return Case{{leaf({2, 3}), leaf({3})},
                               [condition](const Inputs& in) { return tg::where(condition, in[0], in[1]); }};
                 }});
    r.push_back({"to float32 and back", [] {
                   return Case{{leaf({2, 3})}, [](const Inputs& in) { return in[0].to(tg::kFloat32).to(tg::kFloat64); }};
                 },
                 {.eps = 1e-3}});  // float32's rounding: a step of 1e-6 would measure only noise
    r.push_back(unary("clone", [](const Tensor& x) { return x.clone(); }));
    // --- reductions ---
    r.push_back(unary("sum", [](const Tensor& x) { return x.sum(); }));
    r.push_back(unary("sum dims keepdim", [](const Tensor& x) { return x.sum({1}, true); }, -1, 1, {2, 3, 2}));
    r.push_back(unary("mean", [](const Tensor& x) { return x.mean(); }));
    r.push_back(unary("mean dims", [](const Tensor& x) { return x.mean({0, 2}); }, -1, 1, {2, 3, 2}));
    r.push_back(unary("var", [](const Tensor& x) { return x.var(); }));
    r.push_back(unary("var dims biased", [](const Tensor& x) { return x.var({1}, false); }, -1, 1, {3, 4}));
    r.push_back(unary("var correction keepdim", [](const Tensor& x) { return x.var({0}, 0, true); }, -1, 1, {3, 4}));
    r.push_back(unary("std", [](const Tensor& x) { return x.std(); }));
    r.push_back(unary("std dims", [](const Tensor& x) { return x.std({1}); }, -1, 1, {3, 4}));
    r.push_back(unary("logsumexp", [](const Tensor& x) { return x.logsumexp({1}); }, -2, 2, {3, 4}));
    r.push_back(unary("max", [](const Tensor& x) { return x.max(); }));
    r.push_back(unary("min", [](const Tensor& x) { return x.min(); }));
    r.push_back(unary("max dim values", [](const Tensor& x) { return x.max(1).values; }, -1, 1, {3, 4}));
    r.push_back(unary("min dim keepdim values", [](const Tensor& x) { return x.min(0, true).values; }, -1, 1, {3, 4}));
    // --- products ---
    r.push_back(binary("matmul 2-D", [](const Tensor& a, const Tensor& b) { return tg::matmul(a, b); }, {3, 4}, {4, 2}));
    r.push_back(binary("matmul 1-D 2-D", [](const Tensor& a, const Tensor& b) { return tg::matmul(a, b); }, {4}, {4, 2}));
    r.push_back(binary("matmul batched broadcast", [](const Tensor& a, const Tensor& b) { return tg::matmul(a, b); },
                       {2, 3, 4}, {4, 2}));
    r.push_back(binary("matmul dot", [](const Tensor& a, const Tensor& b) { return tg::matmul(a, b); }, {4}, {4}));
    r.push_back(binary("bmm", [](const Tensor& a, const Tensor& b) { return tg::bmm(a, b); }, {2, 3, 4}, {2, 4, 2}));
    r.push_back({"baddbmm", [] {
                   return Case{{leaf({2, 3, 2}), leaf({2, 3, 4}), leaf({2, 4, 2})},
                               [](const Inputs& in) { return tg::baddbmm(in[0], in[1], in[2], 0.5, 1.5); }};
                 }});
    // --- views, shapes, slicing ---
    r.push_back(unary("reshape", [](const Tensor& x) { return x.reshape({3, 2}); }));
    r.push_back(unary("view", [](const Tensor& x) { return x.view({-1}); }));
    r.push_back(unary("transpose", [](const Tensor& x) { return x.transpose(0, 2); }, -1, 1, {2, 3, 2}));
    r.push_back(unary("unsqueeze", [](const Tensor& x) { return x.unsqueeze(1); }));
    r.push_back(unary("squeeze", [](const Tensor& x) { return x.squeeze(); }, -1, 1, {2, 1, 3}));
    r.push_back(unary("squeeze dim", [](const Tensor& x) { return x.squeeze(1); }, -1, 1, {2, 1, 3}));
    r.push_back(unary("unflatten", [](const Tensor& x) { return x.unflatten(1, {2, 2}); }, -1, 1, {3, 4}));
    r.push_back(unary("flatten", [](const Tensor& x) { return x.flatten(); }, -1, 1, {2, 3, 2}));
    r.push_back(unary("permute", [](const Tensor& x) { return x.permute({2, 0, 1}); }, -1, 1, {2, 3, 2}));
    r.push_back(unary("expand", [](const Tensor& x) { return x.expand({2, 2, 3}); }, -1, 1, {2, 1}));
    r.push_back(unary("narrow", [](const Tensor& x) { return x.narrow(1, 1, 2); }, -1, 1, {3, 4}));
    r.push_back(unary("select", [](const Tensor& x) { return x.select(0, 1); }, -1, 1, {3, 4}));
    r.push_back(unary("slice step", [](const Tensor& x) { return x.slice(1, 0, 5, 2); }, -1, 1, {3, 5}));
    r.push_back(unary("t", [](const Tensor& x) { return x.t(); }));
    r.push_back(unary("tril", [](const Tensor& x) { return x.tril(); }, -1, 1, {3, 3}));
    r.push_back(unary("triu", [](const Tensor& x) { return x.triu(1); }, -1, 1, {3, 3}));
    // --- softmax family, sorting, joining, indexing ---
    r.push_back(unary("softmax", [](const Tensor& x) { return x.softmax(1); }, -2, 2, {3, 4}));
    r.push_back(unary("log_softmax", [](const Tensor& x) { return x.log_softmax(0); }, -2, 2, {3, 4}));
    r.push_back(unary("sort values", [](const Tensor& x) { return x.sort(1, true).values; }, -1, 1, {3, 4}));
    r.push_back(unary("topk values", [](const Tensor& x) { return x.topk(2, 1).values; }, -1, 1, {3, 4}));
    r.push_back(unary("split", [](const Tensor& x) { return x.split(2, 1)[1]; }, -1, 1, {3, 5}));
    r.push_back(unary("split sizes", [](const Tensor& x) { return x.split({1, 4}, 1)[1]; }, -1, 1, {3, 5}));
    r.push_back(unary("chunk", [](const Tensor& x) { return x.chunk(2, 0)[0]; }, -1, 1, {4, 3}));
    r.push_back(binary("cat", [](const Tensor& a, const Tensor& b) { return tg::cat({a, b}, 1); }, {2, 3}, {2, 2}));
    r.push_back(binary("stack", [](const Tensor& a, const Tensor& b) { return tg::stack({a, b}, 1); }, {2, 3}, {2, 3}));
    r.push_back({"index_select", [] {
                   const Tensor index = int64s({2, 0, 2});
                   return Case{{leaf({3, 4})}, [index](const Inputs& in) { return in[0].index_select(0, index); }};
                 }});
    r.push_back({"gather", [] {
                   const Tensor index = int64s({0, 3, 1, 1, 2, 0}, {3, 2});
                   return Case{{leaf({3, 4})}, [index](const Inputs& in) { return in[0].gather(1, index); }};
                 }});
    r.push_back({"scatter_add", [] {
                   const Tensor index = int64s({0, 3, 1, 1, 2, 0}, {3, 2});
                   return Case{{leaf({3, 4}), leaf({3, 2})},
                               [index](const Inputs& in) { return in[0].scatter_add(1, index, in[1]); }};
                 }});

    // --- nn: functional forms ---
    r.push_back({"nn linear", [] {
                   return Case{{leaf({3, 4}), leaf({2, 4}), leaf({2})},
                               [](const Inputs& in) { return F::linear(in[0], in[1], in[2]); }};
                 }});
    r.push_back({"nn linear no bias 3-D", [] {
                   return Case{{leaf({2, 3, 4}), leaf({2, 4})}, [](const Inputs& in) { return F::linear(in[0], in[1]); }};
                 }});
    r.push_back(unary("nn relu", [](const Tensor& x) { return F::relu(x); }));
    r.push_back(unary("nn gelu", [](const Tensor& x) { return F::gelu(x); }, -2, 2));
    r.push_back(unary("nn gelu tanh", [](const Tensor& x) { return F::gelu(x, "tanh"); }, -2, 2));
    r.push_back(unary("nn tanh", [](const Tensor& x) { return F::tanh(x); }));
    r.push_back(unary("nn sigmoid", [](const Tensor& x) { return F::sigmoid(x); }));
    r.push_back(unary("nn softmax", [](const Tensor& x) { return F::softmax(x, -1); }, -2, 2, {3, 4}));
    r.push_back(unary("nn log_softmax", [](const Tensor& x) { return F::log_softmax(x, -1); }, -2, 2, {3, 4}));
    r.push_back(unary("nn dropout p=0", [](const Tensor& x) { return F::dropout(x, 0.0, true); }));
    r.push_back({"nn dropout p=0.5", [] {
                   const auto generator = fixed_generator();
                   return Case{{leaf({3, 4})}, [generator](const Inputs& in) {
                                 generator->manual_seed(7);
                                 return F::dropout(in[0], 0.5, true, generator.get());
                               }};
                 }});
    r.push_back(unary("nn dropout eval", [](const Tensor& x) { return F::dropout(x, 0.5, false); }));
    r.push_back({"nn layer_norm", [] {
                   return Case{{leaf({3, 4}), leaf({4}, 0.5, 1.5), leaf({4})},
                               [](const Inputs& in) { return F::layer_norm(in[0], {4}, in[1], in[2]); }};
                 }});
    r.push_back({"nn layer_norm no affine, two dims", [] {
                   return Case{{leaf({2, 2, 3})}, [](const Inputs& in) { return F::layer_norm(in[0], {2, 3}); }};
                 }});
    r.push_back({"nn rms_norm", [] {
                   return Case{{leaf({3, 4}), leaf({4}, 0.5, 1.5)},
                               [](const Inputs& in) { return F::rms_norm(in[0], {4}, in[1]); }};
                 }});
    r.push_back({"nn rms_norm no weight, eps", [] {
                   return Case{{leaf({3, 4})}, [](const Inputs& in) { return F::rms_norm(in[0], {4}, {}, 1e-3); }};
                 }});
    r.push_back({"nn embedding", [] {
                   const Tensor index = int64s({1, 4, 1, 0}, {2, 2});
                   return Case{{leaf({5, 3})}, [index](const Inputs& in) { return F::embedding(index, in[0]); }};
                 }});
    r.push_back({"nn embedding padding_idx", [] {
                   const Tensor index = int64s({1, 4, 1, 0});
                   return Case{{leaf({5, 3})}, [index](const Inputs& in) { return F::embedding(index, in[0], 1); }};
                 }});
    r.push_back({"nn embedding scale_grad_by_freq", [] {
                   const Tensor index = int64s({1, 4, 1, 0});
                   return Case{{leaf({5, 3})}, [index](const Inputs& in) {
                                 return F::embedding(index, in[0], F::EmbeddingFuncOptions{.scale_grad_by_freq = true});
                               }};
                 }});
    // --- losses ---
    r.push_back(binary("mse_loss", [](const Tensor& a, const Tensor& b) { return tg::nn::mse_loss(a, b); }, {3, 4}, {3, 4}));
    r.push_back(binary("mse_loss sum", [](const Tensor& a, const Tensor& b) { return tg::nn::mse_loss(a, b, Reduction::Sum); },
                       {3, 4}, {3, 4}));
    r.push_back(binary("mse_loss none",
                       [](const Tensor& a, const Tensor& b) { return tg::nn::mse_loss(a, b, Reduction::None); }, {3, 4},
                       {3, 4}));
    r.push_back(binary("l1_loss", [](const Tensor& a, const Tensor& b) { return tg::nn::l1_loss(a, b); }, {3, 4}, {3, 4}));
    r.push_back(binary("smooth_l1_loss",
                       [](const Tensor& a, const Tensor& b) { return tg::nn::smooth_l1_loss(a, b, Reduction::Mean, 0.5); },
                       {3, 4}, {3, 4}));
    r.push_back(binary("huber_loss",
                       [](const Tensor& a, const Tensor& b) { return tg::nn::huber_loss(a, b, Reduction::Sum, 0.5); },
                       {3, 4}, {3, 4}));
    r.push_back({"binary_cross_entropy", [] {
                   const Tensor target = constant({3, 4}, 0.0, 1.0);
                   return Case{{leaf({3, 4}, 0.1, 0.9)},
                               [target](const Inputs& in) { return tg::nn::binary_cross_entropy(in[0], target); }};
                 }});
    r.push_back({"binary_cross_entropy weight sum", [] {
                   const Tensor target = constant({3, 4}, 0.0, 1.0), weight = constant({4}, 0.5, 1.5);
                   return Case{{leaf({3, 4}, 0.1, 0.9)}, [target, weight](const Inputs& in) {
                                 return tg::nn::binary_cross_entropy(in[0], target, weight, Reduction::Sum);
                               }};
                 }});
    r.push_back({"binary_cross_entropy_with_logits", [] {
                   const Tensor target = constant({3, 4}, 0.0, 1.0);
                   return Case{{leaf({3, 4}, -2, 2)}, [target](const Inputs& in) {
                                 return tg::nn::binary_cross_entropy_with_logits(in[0], target);
                               }};
                 }});
    r.push_back({"binary_cross_entropy_with_logits weight pos_weight", [] {
                   const Tensor target = constant({3, 4}, 0.0, 1.0), weight = constant({3, 1}, 0.5, 1.5),
                                pos_weight = constant({4}, 0.5, 2.0);
                   return Case{{leaf({3, 4}, -2, 2)}, [target, weight, pos_weight](const Inputs& in) {
                                 return tg::nn::binary_cross_entropy_with_logits(in[0], target, weight, pos_weight,
                                                                                 Reduction::None);
                               }};
                 }});
    r.push_back({"cross_entropy", [] {
                   return Case{{leaf({3, 4}, -2, 2)},
                               [](const Inputs& in) { return tg::nn::cross_entropy(in[0], std::vector<int64_t>{0, 2, 1}); }};
                 }});
    r.push_back({"cross_entropy weight", [] {
                   const Tensor weight = constant({4}, 0.5, 1.5);
                   return Case{{leaf({3, 4}, -2, 2)}, [weight](const Inputs& in) {
                                 return tg::nn::cross_entropy(in[0], std::vector<int64_t>{0, 2, 1}, {.weight = weight});
                               }};
                 }});
    r.push_back({"cross_entropy label_smoothing", [] {
                   return Case{{leaf({3, 4}, -2, 2)}, [](const Inputs& in) {
                                 return tg::nn::cross_entropy(in[0], std::vector<int64_t>{3, 2, 1}, {.label_smoothing = 0.1});
                               }};
                 }});
    r.push_back({"cross_entropy ignore_index", [] {
                   return Case{{leaf({3, 4}, -2, 2)}, [](const Inputs& in) {
                                 return tg::nn::cross_entropy(in[0], std::vector<int64_t>{0, 2, 1}, {.ignore_index = 2});
                               }};
                 }});
    r.push_back({"cross_entropy none", [] {
                   return Case{{leaf({3, 4}, -2, 2)}, [](const Inputs& in) {
                                 return tg::nn::cross_entropy(in[0], std::vector<int64_t>{0, 2, 1},
                                                              {.reduction = Reduction::None});
                               }};
                 }});
    r.push_back({"cross_entropy sum 3-D", [] {
                   const Tensor target = int64s({0, 2, 1, 1, 0, 2}, {2, 3});
                   return Case{{leaf({2, 4, 3}, -2, 2)}, [target](const Inputs& in) {
                                 return tg::nn::cross_entropy(in[0], target, {.reduction = Reduction::Sum});
                               }};
                 }});
    r.push_back({"cross_entropy probabilities", [] {
                   // The target's softmax inside: probabilities that stay valid as gradgradcheck perturbs them.
                   return Case{{leaf({3, 4}, -2, 2), leaf({3, 4})}, [](const Inputs& in) {
                                 return tg::nn::cross_entropy(in[0], in[1].softmax(1), {.label_smoothing = 0.2});
                               }};
                 }});
    r.push_back({"nll_loss", [] {
                   const Tensor target = int64s({0, 2, 1});
                   return Case{{leaf({3, 4}, -2, 2)},
                               [target](const Inputs& in) { return tg::nn::nll_loss(in[0].log_softmax(1), target); }};
                 }});
    r.push_back({"nll_loss weight sum", [] {
                   const Tensor target = int64s({0, 2, 1}), weight = constant({4}, 0.5, 1.5);
                   return Case{{leaf({3, 4}, -2, 2)}, [target, weight](const Inputs& in) {
                                 return tg::nn::nll_loss(in[0], target, {.weight = weight, .reduction = Reduction::Sum});
                               }};
                 }});
    // --- attention ---
    r.push_back({"scaled_dot_product_attention", [] {
                   return Case{{leaf({1, 2, 3, 4}), leaf({1, 2, 5, 4}), leaf({1, 2, 5, 3})},
                               [](const Inputs& in) { return F::scaled_dot_product_attention(in[0], in[1], in[2]); }};
                 }});
    r.push_back({"scaled_dot_product_attention causal", [] {
                   return Case{{leaf({2, 1, 4, 3}), leaf({2, 1, 4, 3}), leaf({2, 1, 4, 3})}, [](const Inputs& in) {
                                 return F::scaled_dot_product_attention(in[0], in[1], in[2], {.is_causal = true});
                               }};
                 }});
    r.push_back({"scaled_dot_product_attention bool mask, scale", [] {
                   const Tensor keep = tg::tensor(std::vector<bool>{true, false, true, true, false, false, true, false,
                                                                    true, true, true, true, false, false, false},
                                                  {3, 5});
                   return Case{{leaf({1, 2, 3, 4}), leaf({1, 2, 5, 4}), leaf({1, 2, 5, 3})}, [keep](const Inputs& in) {
                                 return F::scaled_dot_product_attention(in[0], in[1], in[2],
                                                                        {.attn_mask = keep, .scale = 0.3});
                               }};
                 }});
    r.push_back({"scaled_dot_product_attention float mask", [] {
                   const Tensor bias = constant({3, 5});
                   return Case{{leaf({1, 2, 3, 4}), leaf({1, 2, 5, 4}), leaf({1, 2, 5, 3})}, [bias](const Inputs& in) {
                                 return F::scaled_dot_product_attention(in[0], in[1], in[2], {.attn_mask = bias});
                               }};
                 }});
    r.push_back({"scaled_dot_product_attention dropout", [] {
                   const auto generator = fixed_generator();
                   return Case{{leaf({1, 2, 3, 4}), leaf({1, 2, 5, 4}), leaf({1, 2, 5, 3})},
                               [generator](const Inputs& in) {
                                 generator->manual_seed(7);
                                 return F::scaled_dot_product_attention(
                                     in[0], in[1], in[2], {.dropout_p = 0.3, .generator = generator.get()});
                               }};
                 }});

    // --- nn: modules, their parameters among the inputs ---
    r.push_back({"Linear", [] {
                   auto m = std::make_shared<tg::nn::Linear>(4, 3);
                   return module_case<tg::nn::Linear>(m, {&m->weight, &m->bias}, {leaf({2, 4})},
                                                      [](tg::nn::Linear& lin, const Inputs& x) { return lin(x[0]); });
                 }});
    r.push_back({"LayerNorm", [] {
                   auto m = std::make_shared<tg::nn::LayerNorm>(Shape{4});
                   return module_case<tg::nn::LayerNorm>(m, {&m->weight, &m->bias}, {leaf({3, 4})},
                                                         [](tg::nn::LayerNorm& ln, const Inputs& x) { return ln(x[0]); });
                 }});
    r.push_back({"RMSNorm", [] {
                   auto m = std::make_shared<tg::nn::RMSNorm>(Shape{4});
                   return module_case<tg::nn::RMSNorm>(m, {&m->weight}, {leaf({3, 4})},
                                                       [](tg::nn::RMSNorm& rms, const Inputs& x) { return rms(x[0]); });
                 }});
    r.push_back({"GELU", [] {
                   auto m = std::make_shared<tg::nn::GELU>();
                   return module_case<tg::nn::GELU>(m, {}, {leaf({3, 4}, -2, 2)},
                                                    [](tg::nn::GELU& gelu, const Inputs& x) { return gelu(x[0]); });
                 }});
    r.push_back({"SiLU, LeakyReLU, ELU, Softplus, Hardswish and Mish in a row", [] {
                   auto m = std::make_shared<tg::nn::Sequential>(
                       tg::nn::SiLU(), tg::nn::LeakyReLU({.negative_slope = 0.3}), tg::nn::ELU({.alpha = 2.0}),
                       tg::nn::Softplus({.beta = 2.0}), tg::nn::Hardswish(), tg::nn::Mish());
                   return module_case<tg::nn::Sequential>(m, {}, {leaf({3, 4}, -3, 3)},
                                                          [](tg::nn::Sequential& seq, const Inputs& x) { return seq(x[0]); });
                 }});
    r.push_back({"Unflatten", [] {
                   auto m = std::make_shared<tg::nn::Unflatten>(1, Shape{2, -1});
                   return module_case<tg::nn::Unflatten>(m, {}, {leaf({3, 4})},
                                                         [](tg::nn::Unflatten& u, const Inputs& x) { return u(x[0]); });
                 }});
    r.push_back({"Dropout p=0", [] {
                   auto m = std::make_shared<tg::nn::Dropout>(0.0);
                   return module_case<tg::nn::Dropout>(m, {}, {leaf({3, 4})},
                                                       [](tg::nn::Dropout& d, const Inputs& x) { return d(x[0]); });
                 }});
    r.push_back({"Dropout p=0.3 fixed generator", [] {
                   const auto generator = fixed_generator();
                   auto m = std::make_shared<tg::nn::Dropout>(0.3, generator.get());
                   return module_case<tg::nn::Dropout>(m, {}, {leaf({3, 4})},
                                                       [generator](tg::nn::Dropout& d, const Inputs& x) {
                                                         generator->manual_seed(7);
                                                         return d(x[0]);
                                                       });
                 }});
    r.push_back({"Embedding", [] {
                   auto m = std::make_shared<tg::nn::Embedding>(5, 3);
                   const Tensor index = int64s({1, 4, 1, 0}, {2, 2});
                   return module_case<tg::nn::Embedding>(m, {&m->weight}, {},
                                                         [index](tg::nn::Embedding& e, const Inputs&) { return e(index); });
                 }});
    r.push_back({"MultiheadAttention self", [] {
                   auto m = std::make_shared<tg::nn::MultiheadAttention>(
                       tg::nn::MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2, .batch_first = true});
                   return module_case<tg::nn::MultiheadAttention>(
                       m, mha_slots(*m), {leaf({2, 3, 4})},
                       [](tg::nn::MultiheadAttention& mha, const Inputs& x) { return mha.forward(x[0], x[0], x[0]).first; });
                 }});
    r.push_back({"MultiheadAttention cross, key padding, weights", [] {
                   auto m = std::make_shared<tg::nn::MultiheadAttention>(
                       tg::nn::MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2, .batch_first = true});
                   const Tensor padding = tg::tensor(std::vector<bool>{false, false, true, false, false, false}, {2, 3});
                   return module_case<tg::nn::MultiheadAttention>(
                       m, mha_slots(*m), {leaf({2, 2, 4}), leaf({2, 3, 4}), leaf({2, 3, 4})},
                       [padding](tg::nn::MultiheadAttention& mha, const Inputs& x) {
                         const auto [out, weights] = mha.forward(x[0], x[1], x[2], {.key_padding_mask = padding});
                         return tg::cat({out.flatten(), weights.flatten()}, 0);
                       });
                 }});
    r.push_back({"TransformerEncoderLayer", [] {
                   auto m = std::make_shared<tg::nn::TransformerEncoderLayer>(tg::nn::TransformerEncoderLayerOptions{
                       .d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0, .batch_first = true});
                   return module_case<tg::nn::TransformerEncoderLayer>(
                       m, encoder_layer_slots(*m), {leaf({2, 3, 4})},
                       [](tg::nn::TransformerEncoderLayer& layer, const Inputs& x) { return layer(x[0]); });
                 }});
    r.push_back({"TransformerEncoderLayer gelu, norm_first, causal, dropout", [] {
                   auto m = std::make_shared<tg::nn::TransformerEncoderLayer>(tg::nn::TransformerEncoderLayerOptions{
                       .d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.2,
                       .activation = tg::nn::Activation::gelu, .batch_first = true, .norm_first = true});
                   return module_case<tg::nn::TransformerEncoderLayer>(
                       m, encoder_layer_slots(*m), {leaf({2, 3, 4})},
                       [](tg::nn::TransformerEncoderLayer& layer, const Inputs& x) {
                         tg::manual_seed(7);  // every dropout of the layer draws the same masks each time
                         return layer.forward(x[0], {.is_causal = true});
                       });
                 }});
    return r;
  }();
  return table;
}

}  // namespace

TEST_CASE("the gradgradcheck table names each row once", "[nn][gradgradcheck]") {
  std::set<std::string> names;
  for (const Row& row : rows()) {
    INFO(row.name);
    CHECK(names.insert(row.name).second);
  }
  CHECK(rows().size() >= 100);
}

TEST_CASE("gradgradcheck of every differentiable op and module, in float64", "[nn][gradgradcheck]") {
  const std::vector<Row>& table = rows();
  for (size_t i = 0; i < table.size(); ++i) {
    DYNAMIC_SECTION(table[i].name) {
      tg::manual_seed(1000 + i);
      const Case c = table[i].make();
      const tg::GradcheckResult result = tg::gradgradcheck(c.fn, c.inputs, table[i].options);
      INFO(result.message);
      CHECK(result.passed);
    }
  }
}
