// Weight tying (Parameter::tie), Module::apply, named_modules: listed once, stepped once as
// PyTorch's SGD does (fixture), saved once and reloaded tied, apply and named_modules in PyTorch's
// order.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "nn_test_util.hpp"

using tg::Tensor;
using namespace tg::nn_test;

namespace {

// A language-model skeleton: an embedding and a bias-free head sharing one [vocab, dim] matrix.
struct TiedModel : tg::nn::Module {
  tg::nn::Embedding wte{6, 4};
  tg::nn::Linear head{4, 6, {.bias = false}};
  TiedModel() { head.weight.tie(wte.weight); }
  void members(tg::nn::Members& m) override {
    m.module("wte", wte);
    m.module("head", head);
  }
  Tensor forward(const Tensor& tokens) override { return head(wte(tokens)); }
};

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tapegrad_tying_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

TEST_CASE("tie makes two slots one tensor, listed once under its first name", "[module][tying]") {
  TiedModel model;
  REQUIRE(model.head.weight.is_same(model.wte.weight));
  const auto named = model.named_parameters();
  REQUIRE(named.size() == 1);
  REQUIRE(named[0].first == "wte.weight");
  REQUIRE(model.parameters().size() == 1);
  const auto all = model.named_parameters(/*remove_duplicate=*/false);
  REQUIRE(all.size() == 2);
  REQUIRE(all[1].first == "head.weight");
  REQUIRE(all[1].second.is_same(all[0].second));

  // state_dict as PyTorch's: both keys, one storage.
  tg::nn::StateDict state = model.state_dict();
  REQUIRE(state.keys() == std::vector<std::string>{"wte.weight", "head.weight"});
  model.wte.weight = tg::full({6, 4}, 2.0);
  REQUIRE(tg::testing::values(state.at("head.weight")) == std::vector<double>(24, 2.0));

  // Gradients of both uses add up in the one tensor: d/dW Σ head(wte(t)) has both contributions.
  Tensor tokens = tg::tensor({1, 3}, {2}, tg::kInt64);
  model(tokens).sum().backward();
  const Tensor grad = model.wte.weight.grad();
  REQUIRE(model.head.weight.grad().is_same(grad));
  // Embedding part: rows 1 and 3 get Σ_v W[v, :] = 2·6 = 12 each; head part: every row gets
  // Σ_tokens h = 2 + 2 = 4 per column.
  const std::vector<double> g = tg::testing::values(grad);
  for (int64_t v = 0; v < 6; ++v)
    for (int64_t d = 0; d < 4; ++d) CHECK(g[v * 4 + d] == (v == 1 || v == 3 ? 16.0 : 4.0));
}

TEST_CASE("tie refuses absent parameters and mismatched shapes or dtypes", "[module][tying]") {
  tg::nn::Linear a(4, 6), b(6, 4), no_bias(4, 6, {.bias = false});
  REQUIRE_THROWS_WITH(a.weight.tie(b.weight), Catch::Contains("tie") && Catch::Contains("[6, 4]") &&
                                                  Catch::Contains("[4, 6]"));
  REQUIRE_THROWS_WITH(no_bias.bias.tie(a.bias), Catch::Contains("absent"));
  tg::nn::Linear c(4, 6);
  c.to(tg::kFloat64);
  REQUIRE_THROWS_WITH(a.weight.tie(c.weight), Catch::Contains("float64") && Catch::Contains("float32"));
  REQUIRE_FALSE(a.weight.is_same(c.weight));
}

TEST_CASE("an SGD step on tied weights equals PyTorch's", "[module][tying][fixture]") {
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  CAPTURE(suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("transformer.txt", "tied_sgd" + suffix);
  const auto as_tensor = [](const std::vector<int64_t>& v) {
    return tg::tensor(std::vector<double>(v.begin(), v.end()), {2, 3}, tg::kInt64);
  };
  const Tensor tokens = as_tensor(c.ints("tokens")), targets = as_tensor(c.ints("targets"));
  TiedModel model;
  model.to(fixture_dtype(suffix));
  model.wte.weight = c.at("weight");
  tg::optim::SGD optimizer(model.parameters(), {.lr = 0.5, .momentum = 0.9});
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    tg::nn::cross_entropy(model(tokens).reshape({6, 6}), targets.reshape({6})).backward();
    TG_REQUIRE_CLOSE(model.wte.weight.grad(), c.at("grad_" + std::to_string(step)), fixture_atol(suffix));
    optimizer.step();
    TG_REQUIRE_CLOSE(model.wte.weight, c.at("weight_" + std::to_string(step)), fixture_atol(suffix));
    REQUIRE(model.head.weight.is_same(model.wte.weight));
  }
}

TEST_CASE("a checkpoint stores a tied tensor once and loads it back tied", "[module][tying][checkpoint]") {
  tg::manual_seed(3);
  TiedModel model;
  const std::string path = scratch("tied.safetensors");
  tg::save(model, path);
  const std::string bytes = read_all(path);
  // One tensor entry, and the alias in __metadata__ as safetensors.torch.save_model writes it.
  REQUIRE(bytes.find("\"wte.weight\":{\"dtype\"") != std::string::npos);
  REQUIRE(bytes.find("\"head.weight\":{") == std::string::npos);
  REQUIRE(bytes.find("\"head.weight\":\"wte.weight\"") != std::string::npos);

  tg::manual_seed(4);
  TiedModel restored;
  REQUIRE(tg::testing::values(restored.wte.weight) != tg::testing::values(model.wte.weight));
  tg::load(restored, path);
  REQUIRE(tg::testing::values(restored.wte.weight) == tg::testing::values(model.wte.weight));
  REQUIRE(restored.head.weight.is_same(restored.wte.weight));

  // Into an untied model of the same architecture: head.weight comes from the alias.
  struct Untied : TiedModel {
    Untied() { static_cast<Tensor&>(head.weight) = wte.weight.detach().clone().requires_grad_(); }
  } untied;
  REQUIRE_FALSE(untied.head.weight.is_same(untied.wte.weight));
  tg::load(untied, path);
  REQUIRE(tg::testing::values(untied.head.weight) == tg::testing::values(model.wte.weight));

  // A file of the untied model (two tensors) loads into the tied one when both hold the same
  // values, and is refused when they differ: one tensor cannot take two values.
  tg::save(untied, path);
  tg::load(restored, path);
  untied.head.weight = tg::zeros({6, 4});
  tg::save(untied, path);
  REQUIRE_THROWS_WITH(tg::load(restored, path), Catch::Contains("head.weight") && Catch::Contains("wte.weight") &&
                                                    Catch::Contains("ties"));
  std::remove(path.c_str());
}

TEST_CASE("apply visits children before parents, named_modules parents first", "[module][apply]") {
  // torch: m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 3), nn.ReLU()), nn.LayerNorm(3))
  tg::nn::Sequential model(tg::nn::Linear(2, 3), tg::nn::Sequential(tg::nn::Linear(3, 3), tg::nn::ReLU()),
                           tg::nn::LayerNorm({3}));
  std::vector<std::string> pre;
  std::map<const tg::nn::Module*, std::string> name_of;
  for (const auto& [name, module] : model.named_modules()) pre.push_back(name), name_of[module] = name;
  // [n for n, _ in m.named_modules()]
  REQUIRE(pre == std::vector<std::string>{"", "0", "1", "1.0", "1.1", "2"});
  REQUIRE(model.modules().size() == 6);
  REQUIRE(model.modules()[0] == &model);
  std::vector<std::string> post;
  tg::nn::Module& returned = model.apply([&](tg::nn::Module& m) { post.push_back(name_of.at(&m)); });
  REQUIRE(&returned == &model);
  // m.apply(lambda x: order.append(names[id(x)]))
  REQUIRE(post == std::vector<std::string>{"0", "1.0", "1.1", "1", "2", ""});
}

TEST_CASE("apply with init::normal_ and zeros_ initialises parameters in place", "[module][apply]") {
  tg::manual_seed(0);
  tg::nn::Sequential model(tg::nn::Linear(16, 32), tg::nn::ReLU(), tg::nn::Linear(32, 8));
  const Tensor first_weight = model.parameters()[0];  // a handle taken before, as an optimizer's
  model.apply([](tg::nn::Module& m) {
    if (auto* lin = dynamic_cast<tg::nn::Linear*>(&m)) {
      tg::nn::init::normal_(lin->weight, 0.0, 0.02);
      tg::nn::init::zeros_(lin->bias);
    }
  });
  // The same tensors, now N(0, 0.02²) and 0.
  REQUIRE(model.parameters()[0].is_same(first_weight));
  for (const auto& [name, p] : model.named_parameters()) {
    CAPTURE(name);
    REQUIRE(p.requires_grad());
    const std::vector<double> v = tg::testing::values(p);
    if (name.ends_with("bias")) {
      REQUIRE(v == std::vector<double>(v.size(), 0.0));
    } else {
      double sum = 0, sum_sq = 0;
      for (double x : v) sum += x, sum_sq += x * x;
      const double mean = sum / v.size(), std = std::sqrt(sum_sq / v.size() - mean * mean);
      CHECK(std::abs(mean) < 0.005);
      CHECK(std::abs(std - 0.02) < 0.003);
    }
  }
}
