// Embedding: F::embedding against PyTorch (with and without padding_idx), the module's initial
// weights after manual_seed equal to torch's, gradcheck, errors, and a deterministic backward.
#include <string>

#include "nn_test_util.hpp"
#include "support/dim_ops.hpp"

namespace F = tg::nn::functional;
using tg::Tensor;
using tg::testing::int64_values;
using namespace tg::nn_test;

TEST_CASE("embedding matches PyTorch's output and weight gradient", "[embedding][fixture]") {
  const std::string padding = GENERATE(as<std::string>{}, "none", "1", "m6");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = tg::testing::fixture("indexing.txt", "embedding_padding_" + padding + suffix);
  INFO(c.name);
  Tensor weight = leaf(c.at("weight"));
  const Tensor indices = tg::testing::int64_tensor(c, "indices");
  const std::optional<int64_t> padding_idx =
      c.has("padding_idx") ? std::optional<int64_t>(static_cast<int64_t>(c.scalar("padding_idx"))) : std::nullopt;
  const Tensor y = F::embedding(indices, weight, padding_idx);
  CHECK(std::string(y.grad_fn_name()) == "EmbeddingBackward");
  CHECK(y.shape() == tg::Shape{2, 4, 3});
  TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), fixture_atol(suffix));
}

TEST_CASE("Embedding's initial weights equal torch's after manual_seed", "[embedding][fixture][random]") {
  const std::string seed = GENERATE(as<std::string>{}, "0", "3", "7");
  const auto& c = tg::testing::fixture("indexing.txt", "embedding_init_seed" + seed);
  INFO(c.name);
  tg::manual_seed(static_cast<uint64_t>(c.scalar("seed")));
  tg::nn::EmbeddingOptions options;
  if (c.has("padding_idx")) options.padding_idx = static_cast<int64_t>(c.scalar("padding_idx"));
  tg::nn::Embedding embed(static_cast<int64_t>(c.scalar("num_embeddings")),
                          static_cast<int64_t>(c.scalar("embedding_dim")), options);
  CHECK(embed.weight.to_vector<float>() == c.at("weight").to_vector<float>());  // bitwise
  // The same values from a generator of its own seeded alike; the default one is left alone.
  tg::Generator gen(static_cast<uint64_t>(c.scalar("seed")));
  options.generator = &gen;
  tg::manual_seed(12345);
  const Tensor before = tg::rand({2});
  tg::manual_seed(12345);
  tg::nn::Embedding own(embed.num_embeddings, embed.embedding_dim, options);
  CHECK(own.weight.to_vector<float>() == c.at("weight").to_vector<float>());
  CHECK(tg::rand({2}).to_vector<float>() == before.to_vector<float>());
}

TEST_CASE("Embedding module: shapes, padding row, named parameter", "[embedding][module]") {
  tg::manual_seed(0);
  tg::nn::Embedding embed(5, 3, {.padding_idx = -1});
  CHECK(embed.padding_idx == 4);
  const auto named = embed.named_parameters();
  REQUIRE(named.size() == 1);
  CHECK(named[0].first == "weight");
  CHECK(named[0].second.shape() == tg::Shape{5, 3});
  CHECK(embed.weight.index_select(0, int64_values({4}, {1})).to_vector<float>() == std::vector<float>{0, 0, 0});
  // Indices of any shape, a 0-d one included, and an empty batch.
  CHECK(embed(tg::scalar_tensor(2, tg::kInt64)).shape() == tg::Shape{3});
  CHECK(embed(int64_values({1, 2, 3, 4, 0, 1}, {1, 2, 3})).shape() == tg::Shape{1, 2, 3, 3});
  CHECK(embed(int64_values({}, {0, 2})).shape() == tg::Shape{0, 2, 3});
  // Rows add up once per use; the padding row gets nothing even when used.
  const Tensor y = embed(int64_values({1, 4, 1, 1}, {4}));
  y.sum().backward();
  CHECK(embed.weight.grad().to_vector<float>() == std::vector<float>{0, 0, 0, 3, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // In float64 after Module::to, like every module.
  embed.to(tg::kFloat64);
  CHECK(embed(int64_values({1}, {1})).dtype() == tg::kFloat64);
}

TEST_CASE("embedding passes gradcheck in float64", "[embedding][gradcheck]") {
  const Tensor weight = tg::randn({6, 4}, tg::kFloat64).requires_grad_();
  const Tensor indices = int64_values({5, 0, 5, 2, 2, 2}, {2, 3});
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return F::embedding(indices, in[0]); },
                       std::vector<Tensor>{weight});
  // A padding row that is used has gradient 0 by definition (not the derivative), so the check runs
  // with one that is not: the skip must leave the other rows' sums alone.
  TG_REQUIRE_GRADCHECK([&](const std::vector<Tensor>& in) { return F::embedding(indices, in[0], 1) * 3.0; },
                       std::vector<Tensor>{weight});
}

TEST_CASE("embedding refuses bad arguments with tg::Error", "[embedding][errors]") {
  using Catch::Matchers::Contains;
  const Tensor weight = tg::zeros({4, 2});
  REQUIRE_TG_ERROR(F::embedding(int64_values({0, 4}, {2}), weight),
                   Contains("embedding") && Contains("index 4 is out of range for dim 0 of size 4"));
  REQUIRE_TG_ERROR(F::embedding(int64_values({-1}, {1}), weight), Contains("embedding") && Contains("index -1"));
  REQUIRE_TG_ERROR(F::embedding(tg::zeros({2}), weight), Contains("embedding") && Contains("int64"));
  REQUIRE_TG_ERROR(F::embedding(int64_values({0}, {1}), tg::zeros({4})), Contains("embedding") && Contains("[4]"));
  REQUIRE_TG_ERROR(F::embedding(int64_values({0}, {1}), weight, 4), Contains("padding_idx 4 is out of range"));
  REQUIRE_TG_ERROR(tg::nn::Embedding(3, 2, {.padding_idx = -4}), Contains("Embedding") && Contains("padding_idx -4"));
  REQUIRE_TG_ERROR(tg::nn::Embedding(-1, 2), Contains("Embedding") && Contains("non-negative"));
}

TEST_CASE("embedding backward gives the same bits at any thread count", "[embedding][threads]") {
  tg::manual_seed(2);
  tg::nn::Embedding embed(300, 64);
  const Tensor tokens = tg::randint(0, 300, {64, 200});
  const Tensor upstream = tg::randn({64, 200, 64});
  tg::testing::require_same_bits_at_any_thread_count([&] {
    embed.zero_grad();
    (embed(tokens) * upstream).sum().backward();
    return std::vector<Tensor>{embed.weight.grad()};
  });
}

namespace {
// The options of an embedding_options.txt case.
F::EmbeddingFuncOptions fixture_options(const tg::testing::FixtureCase& c) {
  F::EmbeddingFuncOptions options;
  if (c.has("padding_idx")) options.padding_idx = c.ints("padding_idx")[0];
  if (c.has("max_norm")) options.max_norm = c.scalar("max_norm");
  options.norm_type = c.scalar("norm_type");
  options.scale_grad_by_freq = c.scalar("scale_grad_by_freq") != 0;
  return options;
}

Tensor fixture_indices(const tg::testing::FixtureCase& c) {
  const std::vector<int64_t>& shape = c.ints("indices_shape");
  std::vector<double> values;
  for (const int64_t i : c.ints("indices")) values.push_back(static_cast<double>(i));
  return tg::tensor(values, tg::Shape(shape.begin(), shape.end()), tg::kInt64);
}
}  // namespace

TEST_CASE("embedding's max_norm, norm_type and scale_grad_by_freq match PyTorch", "[embedding][fixture]") {
  const std::string name =
      GENERATE(as<std::string>{}, "maxnorm_p2", "maxnorm_p1", "maxnorm_pinf", "maxnorm_p3", "freq", "freq_padding_maxnorm");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = tg::testing::fixture("embedding_options.txt", name + suffix);
  INFO(c.name);
  Tensor weight = leaf(c.at("weight"));
  const F::EmbeddingFuncOptions options = fixture_options(c);
  const Tensor y = F::embedding(fixture_indices(c), weight, options);
  // max_norm rewrote the rows it looked up, in place; the rows it did not name are untouched.
  TG_REQUIRE_CLOSE(weight.detach(), c.at("weight_after"), fixture_atol(suffix));
  if (!options.max_norm) CHECK(bytes(weight) == bytes(c.at("weight")));
  TG_REQUIRE_CLOSE(y, c.at("y"), fixture_atol(suffix));
  y.backward(c.at("dy"));
  TG_REQUIRE_CLOSE(weight.grad(), c.at("dweight"), fixture_atol(suffix));
}

TEST_CASE("the Embedding module passes max_norm and scale_grad_by_freq on", "[embedding]") {
  // Hand-derived: rows 0 = [3, 4] (norm 5) and 1 = [0.3, 0.4] (norm 0.5); max_norm 1 scales row 0
  // by 1 / (5 + 1e-7) and leaves row 1. Indices [0, 0, 1]: row 0's gradient is the mean of its two
  // upstream rows (scale_grad_by_freq), row 1's its one.
  tg::nn::Embedding embed(2, 2, {.max_norm = 1.0, .scale_grad_by_freq = true});
  embed.weight = tg::tensor({3, 4, 0.3, 0.4}, {2, 2}, tg::kFloat64).to(tg::kFloat32);
  const Tensor y = embed(int64_values({0, 0, 1}, {3}));
  const float scale = static_cast<float>(1.0 / (5.0 + 1e-7));
  CHECK(embed.weight.to_vector<float>() == std::vector<float>{3 * scale, 4 * scale, 0.3f, 0.4f});
  CHECK(y.to_vector<float>() == std::vector<float>{3 * scale, 4 * scale, 3 * scale, 4 * scale, 0.3f, 0.4f});
  y.backward(tg::tensor({1, 2, 3, 6, 5, 7}, {3, 2}));
  CHECK(embed.weight.grad().to_vector<float>() == std::vector<float>{2, 4, 5, 7});
}

TEST_CASE("scale_grad_by_freq gives the gradient of the sum weighted by 1 / count", "[embedding]") {
  tg::manual_seed(9);
  const Tensor weight = tg::randn({5, 3}, tg::kFloat64).requires_grad_();
  const Tensor indices = int64_values({3, 1, 3, 3, 0}, {5});
  // The scaled gradient is the gradient of Σ_k g_k · w[i_k] / count(i_k): check that function.
  const Tensor counts = tg::tensor({1, 1, 1, 3, 1}, {5, 1}, tg::kFloat64).index_select(0, indices);
  const Tensor upstream = tg::randn({5, 3}, tg::kFloat64);
  const Tensor analytic_grad = [&] {
    const Tensor w = weight.detach().clone().requires_grad_();
    (F::embedding(indices, w, F::EmbeddingFuncOptions{.scale_grad_by_freq = true}) * upstream).sum().backward();
    return w.grad();
  }();
  const Tensor reference = [&] {
    const Tensor w = weight.detach().clone().requires_grad_();
    (F::embedding(indices, w) * (upstream / counts)).sum().backward();
    return w.grad();
  }();
  TG_REQUIRE_CLOSE(analytic_grad, reference, 1e-15);
}

TEST_CASE("embedding refuses a negative max_norm or a non-positive norm_type", "[embedding][errors]") {
  using Catch::Matchers::Contains;
  const Tensor weight = tg::ones({4, 2});
  REQUIRE_TG_ERROR(F::embedding(int64_values({0}, {1}), weight, F::EmbeddingFuncOptions{.max_norm = -1.0}),
                   Contains("embedding") && Contains("max_norm >= 0, got -1"));
  REQUIRE_TG_ERROR(F::embedding(int64_values({0}, {1}), weight, F::EmbeddingFuncOptions{.max_norm = 1.0, .norm_type = 0}),
                   Contains("embedding") && Contains("norm_type > 0"));
  REQUIRE_TG_ERROR(tg::nn::Embedding(3, 2, {.max_norm = std::nan("")}), Contains("Embedding") && Contains("max_norm"));
  CHECK(weight.to_vector<float>() == std::vector<float>(8, 1.0f));  // untouched by the refused calls
}
