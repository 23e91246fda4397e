// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against PyTorch 1.13 with
// copied weights (tests/fixtures/make_transformer_fixtures.py): outputs, attention weights and the
// gradients of the inputs and of every parameter; gradcheck of the layer; state_dict keys and the
// deep copies of the encoder; errors.
#include <cmath>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "nn_test_util.hpp"

using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

// The parameters of `module` set to the case's tensors of the same (state_dict) names.
void load_parameters(tg::nn::Module& module, const tg::testing::FixtureCase& c, tg::DType dtype) {
  module.to(dtype);
  tg::nn::StateDict state;
  for (const std::string& name : module.state_dict().keys()) state.insert(name, c.at(name));
  module.load_state_dict(state);
}

// A bool mask written as int64 0/1 (1 = masked out), or the case's float mask; undefined if absent.
Tensor mask(const tg::testing::FixtureCase& c, const std::string& name, const Shape& shape) {
  if (c.integers.count(name)) {
    const std::vector<int64_t>& v = c.ints(name);
    return tg::tensor(std::vector<double>(v.begin(), v.end()), shape, tg::kBool);
  }
  return c.has(name) ? c.at(name) : Tensor();
}

void require_parameter_grads(tg::nn::Module& module, const tg::testing::FixtureCase& c, double atol) {
  for (const auto& [name, p] : module.named_parameters()) {
    CAPTURE(name);
    TG_REQUIRE_CLOSE(p.grad(), c.at("d" + name), atol);
  }
}

bool flag(const tg::testing::FixtureCase& c, const std::string& name) { return c.has(name) && c.scalar(name) != 0; }

}  // namespace

TEST_CASE("MultiheadAttention matches PyTorch's forward and backward", "[transformer][attention][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "mha_self_bf", "mha_self_sf", "mha_self_bf_boolmask_noweights",
                                    "mha_self_sf_boolmask_weights", "mha_kv_sf_floatmask3d",
                                    "mha_kv_bf_floatmask3d_noweights", "mha_qkv_bf_padding",
                                    "mha_qkv_sf_padding_noweights", "mha_self_bf_causal_noweights",
                                    "mha_self_sf_causal_weights", "mha_self_bf_causal_padding_noweights",
                                    // A batch element of padding only: a zero attention row on both paths.
                                    "mha_self_bf_all_padded_weights", "mha_self_bf_all_padded_noweights",
                                    "mha_self_sf_all_padded_noweights");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("transformer.txt", base + suffix);
  const double atol = fixture_atol(suffix);
  const bool batch_first = flag(c, "batch_first"), need_weights = flag(c, "need_weights");
  tg::nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .batch_first = batch_first});
  load_parameters(mha, c, fixture_dtype(suffix));

  // Self-attention passes one tensor three times (the packed projection); "kv" passes key as value.
  std::map<std::string, Tensor> leaves;
  for (const std::string name : {"x", "query", "key", "value"})
    if (c.has(name)) leaves[name] = leaf(c.at(name));
  const bool self = leaves.count("x") > 0;
  const Tensor query = self ? leaves["x"] : leaves["query"], key = self ? leaves["x"] : leaves["key"];
  const Tensor value = self ? leaves["x"] : (leaves.count("value") ? leaves["value"] : key);
  const int64_t N = query.size(batch_first ? 0 : 1), L = query.size(batch_first ? 1 : 0),
                S = key.size(batch_first ? 1 : 0);

  auto [y, weights] = mha.forward(query, key, value,
                                  {.key_padding_mask = mask(c, "key_padding_mask", {N, S}),
                                   .need_weights = need_weights,
                                   .attn_mask = mask(c, "attn_mask", {L, S}),
                                   .average_attn_weights = flag(c, "average_attn_weights"),
                                   .is_causal = flag(c, "is_causal")});
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  if (need_weights) {
    TG_REQUIRE_CLOSE(weights, c.at("weights"), atol);
  } else {
    REQUIRE_FALSE(weights.defined());
  }
  y.backward(c.at("dy"));
  for (const auto& [name, t] : leaves) {
    CAPTURE(name);
    TG_REQUIRE_CLOSE(t.grad(), c.at("d" + name), atol);
  }
  require_parameter_grads(mha, c, atol);
}

TEST_CASE("MultiheadAttention gives a query with no key one answer on both paths: a zero row, no NaN",
          "[transformer][attention]") {
  // Element 1 of the batch is padding only; in head 1 of element 0, query 2 has its every key masked
  // by attn_mask. torch 1.13 gives NaN there (every path) and NaN gradients to the whole batch.
  tg::manual_seed(3);
  const int64_t N = 2, L = 3, E = 8, H = 2;
  tg::nn::MultiheadAttention mha({.embed_dim = E, .num_heads = H, .batch_first = true});
  mha.to(tg::kFloat64);
  tg::nn::init::normal_(mha.out_proj.bias, 0.0, 1.0);
  const Tensor x = tg::randn({N, L, E}, tg::kFloat64);
  Tensor padding = tg::zeros({N, L}, tg::kBool);
  for (int64_t j = 0; j < L; ++j) padding.mutable_data<bool>()[L + j] = true;  // element 1
  Tensor attn_mask = tg::zeros({N * H, L, L}, tg::kFloat64);
  for (int64_t j = 0; j < L; ++j) attn_mask.mutable_data<double>()[(1 * L + 2) * L + j] = -INFINITY;  // (0, head 1, query 2)
  const Tensor dy = tg::randn({N, L, E}, tg::kFloat64);

  struct Result {
    Tensor y, weights, dx;
    std::vector<Tensor> dparams;
  };
  const auto run = [&](bool need_weights) {
    mha.zero_grad();
    const Tensor leaf_x = x.clone().requires_grad_();
    auto [y, weights] = mha.forward(leaf_x, leaf_x, leaf_x,
                                    {.key_padding_mask = padding, .need_weights = need_weights,
                                     .attn_mask = attn_mask, .average_attn_weights = false});
    y.backward(dy);
    Result r{y, weights, leaf_x.grad(), {}};
    for (const Tensor& p : mha.parameters()) r.dparams.push_back(p.grad());
    return r;
  };
  const Result explicit_path = run(true), fused = run(false);
  TG_REQUIRE_CLOSE(explicit_path.y, fused.y, 1e-12);
  TG_REQUIRE_CLOSE(explicit_path.dx, fused.dx, 1e-12);
  for (size_t i = 0; i < fused.dparams.size(); ++i) {
    CAPTURE(i);
    TG_REQUIRE_CLOSE(explicit_path.dparams[i], fused.dparams[i], 1e-12);
    REQUIRE(std::isfinite(fused.dparams[i].abs().sum().item<double>()));
  }
  // Element 1: every output row is out_proj.bias, every weight 0, its input gets no gradient.
  TG_REQUIRE_CLOSE(fused.y.select(0, 1), mha.out_proj.bias.detach().reshape({1, E}).expand({L, E}), 1e-12);
  TG_REQUIRE_CLOSE(explicit_path.weights.select(0, 1), tg::zeros({H, L, L}, tg::kFloat64), 0.0);
  TG_REQUIRE_CLOSE(fused.dx.select(0, 1), tg::zeros({L, E}, tg::kFloat64), 0.0);
  // Element 0, head 1, query 2: a zero weight row; the other rows sum to 1.
  const Tensor head = explicit_path.weights.select(0, 0).select(0, 1);  // [L, S]
  TG_REQUIRE_CLOSE(head.select(0, 2), tg::zeros({L}, tg::kFloat64), 0.0);
  TG_REQUIRE_CLOSE(head.narrow(0, 0, 2).sum({1}), tg::ones({2}, tg::kFloat64), 1e-12);
  REQUIRE(std::isfinite(fused.dx.abs().sum().item<double>()));
}

TEST_CASE("TransformerEncoderLayer matches PyTorch's forward and backward", "[transformer][fixture]") {
  const std::string base =
      GENERATE(as<std::string>{}, "layer_relu_post_sf", "layer_relu_post_bf", "layer_relu_pre_sf", "layer_relu_pre_bf",
               "layer_gelu_post_sf", "layer_gelu_post_bf", "layer_gelu_pre_sf", "layer_gelu_pre_bf",
               "layer_gelu_pre_bf_causal_padding");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("transformer.txt", base + suffix);
  const double atol = fixture_atol(suffix);
  const bool batch_first = base.find("_bf") != std::string::npos;
  tg::nn::TransformerEncoderLayer layer(
      {.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.1,
       .activation = base.find("gelu") != std::string::npos ? tg::nn::Activation::gelu : tg::nn::Activation::relu,
       .batch_first = batch_first, .norm_first = base.find("_pre") != std::string::npos});
  load_parameters(layer, c, fixture_dtype(suffix));
  layer.eval();  // dropout 0.1 off, as PyTorch's eval()

  Tensor src = leaf(c.at("src"));
  const int64_t N = src.size(batch_first ? 0 : 1), S = src.size(batch_first ? 1 : 0);
  Tensor y = layer.forward(src, {.src_key_padding_mask = mask(c, "src_key_padding_mask", {N, S}),
                                 .is_causal = flag(c, "is_causal")});
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(src.grad(), c.at("dsrc"), atol);
  require_parameter_grads(layer, c, atol);
}

TEST_CASE("a 2-layer TransformerEncoder with a final norm matches PyTorch", "[transformer][fixture]") {
  const std::string base = GENERATE(as<std::string>{}, "encoder_2_norm", "encoder_2_norm_causal");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(base, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("transformer.txt", base + suffix);
  const double atol = fixture_atol(suffix);
  tg::nn::TransformerEncoder encoder(
      tg::nn::TransformerEncoderLayer({.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0}), 2,
      tg::nn::LayerNorm({8}));
  load_parameters(encoder, c, fixture_dtype(suffix));
  Tensor src = leaf(c.at("src"));
  Tensor y = encoder.forward(src, {.is_causal = flag(c, "is_causal")});
  TG_REQUIRE_CLOSE(y, c.at("y"), atol);
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(src.grad(), c.at("dsrc"), atol);
  require_parameter_grads(encoder, c, atol);
}

TEST_CASE("TransformerEncoderLayer passes gradcheck in float64, parameters included", "[transformer][gradcheck]") {
  const bool norm_first = GENERATE(false, true);
  const bool causal = GENERATE(false, true);
  CAPTURE(norm_first, causal);
  tg::manual_seed(7);
  tg::nn::TransformerEncoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0,
                                         .activation = tg::nn::Activation::gelu, .batch_first = true,
                                         .norm_first = norm_first});
  layer.to(tg::kFloat64);
  // gradcheck differentiates private copies of its inputs: fn rebinds every parameter slot to them.
  std::vector<tg::nn::Parameter*> slots = {&layer.self_attn.in_proj_weight, &layer.self_attn.in_proj_bias,
                                           &layer.self_attn.out_proj.weight, &layer.self_attn.out_proj.bias,
                                           &layer.linear1.weight, &layer.linear1.bias, &layer.linear2.weight,
                                           &layer.linear2.bias, &layer.norm1.weight, &layer.norm1.bias,
                                           &layer.norm2.weight, &layer.norm2.bias};
  REQUIRE(slots.size() == layer.parameters().size());
  std::vector<Tensor> inputs{randn_leaf({2, 3, 4}, tg::kFloat64)};
  for (tg::nn::Parameter* p : slots) inputs.push_back(p->detach().clone().requires_grad_());
  auto fn = [&](const std::vector<Tensor>& in) {
    for (size_t i = 0; i < slots.size(); ++i) static_cast<Tensor&>(*slots[i]) = in[i + 1];
    return layer.forward(in[0], {.is_causal = causal});
  };
  TG_REQUIRE_GRADCHECK(fn, inputs);
}

TEST_CASE("state_dict keys are PyTorch's and the encoder's layers are deep copies", "[transformer]") {
  tg::nn::TransformerEncoderLayer prototype({.d_model = 8, .nhead = 2, .dim_feedforward = 16});
  tg::nn::TransformerEncoder encoder(prototype, 2, tg::nn::LayerNorm({8}));
  // torch: list(nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm(8)).state_dict())
  std::vector<std::string> expected;
  for (const std::string i : {"0", "1"})
    for (const std::string n :
         {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
          "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
          "norm2.weight", "norm2.bias"})
      expected.push_back("layers." + i + "." + n);
  expected.push_back("norm.weight");
  expected.push_back("norm.bias");
  REQUIRE(encoder.state_dict().keys() == expected);
  REQUIRE(encoder.layers.size() == 2);

  // Same values as the prototype (copy.deepcopy), but tensors of their own.
  const auto mine = encoder.layer(0).named_parameters(), theirs = encoder.layer(1).named_parameters(),
             proto = prototype.named_parameters();
  for (size_t i = 0; i < proto.size(); ++i) {
    CAPTURE(proto[i].first);
    REQUIRE(tg::testing::values(mine[i].second) == tg::testing::values(proto[i].second));
    REQUIRE(tg::testing::values(theirs[i].second) == tg::testing::values(proto[i].second));
    REQUIRE_FALSE(mine[i].second.is_same(proto[i].second));
    REQUIRE_FALSE(mine[i].second.is_same(theirs[i].second));
  }
  encoder.layer(0).linear1.weight = tg::zeros({16, 8});
  REQUIRE(tg::testing::values(encoder.layer(1).linear1.weight) != tg::testing::values(encoder.layer(0).linear1.weight));
}

TEST_CASE("MultiheadAttention and the layers refuse bad shapes and dtypes, naming them", "[transformer][errors]") {
  REQUIRE_THROWS_WITH(tg::nn::MultiheadAttention({.embed_dim = 10, .num_heads = 3}),
                      Catch::Contains("divisible") && Catch::Contains("10") && Catch::Contains("3"));
  REQUIRE_THROWS_WITH(tg::nn::TransformerEncoderLayer({.d_model = 6, .nhead = 4}), Catch::Contains("divisible"));

  tg::nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .batch_first = true});
  const Tensor x = tg::randn({2, 5, 8});
  // attn_mask: [L, S] or [N·H, L, S].
  REQUIRE_THROWS_WITH(mha.forward(x, x, x, {.attn_mask = tg::zeros({5, 4})}),
                      Catch::Contains("attn_mask") && Catch::Contains("[5, 4]") && Catch::Contains("[5, 5]"));
  REQUIRE_THROWS_WITH(mha.forward(x, x, x, {.attn_mask = tg::zeros({2, 5, 5})}),
                      Catch::Contains("attn_mask") && Catch::Contains("[2, 5, 5]") && Catch::Contains("[4, 5, 5]"));
  REQUIRE_THROWS_WITH(mha.forward(x, x, x, {.attn_mask = tg::zeros({5, 5}, tg::kInt64)}),
                      Catch::Contains("attn_mask") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(mha.forward(x, x, x, {.attn_mask = tg::zeros({5, 5}, tg::kFloat64)}),
                      Catch::Contains("attn_mask") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(mha.forward(x, x, x, {.key_padding_mask = tg::zeros({2, 4}, tg::kBool)}),
                      Catch::Contains("key_padding_mask") && Catch::Contains("[2, 4]") && Catch::Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(mha.forward(tg::randn({2, 5, 6})),
                      Catch::Contains("embed_dim") && Catch::Contains("[2, 5, 6]"));
  REQUIRE_THROWS_WITH(mha.forward(x, tg::randn({3, 4, 8}), tg::randn({3, 4, 8})),
                      Catch::Contains("batch") && Catch::Contains("[3, 4, 8]"));
  REQUIRE_THROWS_WITH(mha.forward(x, tg::randn({2, 4, 8}), tg::randn({2, 3, 8})),
                      Catch::Contains("key and value") && Catch::Contains("[2, 3, 8]"));
}

TEST_CASE("MultiheadAttention: unbatched inputs, per-head weights, dropout in training only", "[transformer]") {
  tg::manual_seed(5);
  tg::nn::MultiheadAttention mha({.embed_dim = 8, .num_heads = 2, .dropout = 0.5, .batch_first = true});
  mha.eval();
  const Tensor x = tg::randn({5, 8});
  auto [y, w] = mha.forward(x, x, x, {.average_attn_weights = false});
  REQUIRE(y.shape() == Shape{5, 8});
  REQUIRE(w.shape() == Shape{2, 5, 5});
  auto [y_batched, w_batched] = mha.forward(x.reshape({1, 5, 8}), x.reshape({1, 5, 8}), x.reshape({1, 5, 8}));
  REQUIRE(tg::testing::values(y_batched) == tg::testing::values(y));
  // The fused path agrees with the explicit one.
  auto [y_fused, none] = mha.forward(x, x, x, {.need_weights = false});
  REQUIRE_FALSE(none.defined());
  TG_REQUIRE_CLOSE(y_fused, y, 1e-5);
  // Each row of each head's weights sums to 1.
  for (double s : tg::testing::values(w.sum({-1}))) CHECK(s == Approx(1.0).epsilon(1e-6));
  // Training: the weights are dropped out (zeros appear, the rest scaled by 2).
  mha.train();
  auto [y_train, w_train] = mha.forward(x, x, x, {.average_attn_weights = false});
  const std::vector<double> dropped = tg::testing::values(w_train), kept = tg::testing::values(w);
  int zeros = 0;
  for (size_t i = 0; i < dropped.size(); ++i) {
    if (dropped[i] == 0.0) ++zeros;
    else CHECK(dropped[i] == Approx(2.0 * kept[i]).epsilon(1e-6));
  }
  CHECK(zeros > 10);
}
TEST_CASE("apply visits children before parents, as torch.nn.Module.apply", "[module][apply]") {
  tg::nn::TransformerEncoder encoder(tg::nn::TransformerEncoderLayer({.d_model = 8, .nhead = 2, .dim_feedforward = 16}),
                                     2, tg::nn::LayerNorm({8}));
  std::vector<std::string> names_of_modules;
  std::vector<tg::nn::Module*> visited;
  for (const auto& [name, module] : encoder.named_modules()) names_of_modules.push_back(name);
  // torch: [n for n, _ in nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2, norm=nn.LayerNorm(8)).named_modules()]
  const std::vector<std::string> layer = {"self_attn", "self_attn.out_proj", "linear1", "dropout", "linear2",
                                          "norm1", "norm2", "dropout1", "dropout2"};
  std::vector<std::string> expected_pre = {"", "layers"};
  for (const std::string i : {"0", "1"}) {
    expected_pre.push_back("layers." + i);
    for (const std::string& n : layer) expected_pre.push_back("layers." + i + "." + n);
  }
  expected_pre.push_back("norm");
  REQUIRE(names_of_modules == expected_pre);
  REQUIRE(encoder.modules().size() == expected_pre.size());

  // torch's apply order (recorded with the same model): each subtree, children first.
  std::map<const tg::nn::Module*, std::string> name_of;
  for (const auto& [name, module] : encoder.named_modules()) name_of[module] = name;
  std::vector<std::string> order;
  tg::nn::Module& returned = encoder.apply([&](tg::nn::Module& m) { order.push_back(name_of.at(&m)); });
  REQUIRE(&returned == &encoder);
  std::vector<std::string> expected_post;
  for (const std::string i : {"0", "1"}) {
    const std::string p = "layers." + i + ".";
    for (const std::string n : {"self_attn.out_proj", "self_attn", "linear1", "dropout", "linear2", "norm1", "norm2",
                                "dropout1", "dropout2"})
      expected_post.push_back(p + n);
    expected_post.push_back("layers." + i);
  }
  for (const std::string n : {"layers", "norm", ""}) expected_post.push_back(n);
  REQUIRE(order == expected_post);
}

