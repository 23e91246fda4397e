// Module::state_dict / load_state_dict: PyTorch's names and order, values copied into the live
// parameters (identity kept), strict and non-strict loads, and every refusal changing nothing.
#include "nn_test_util.hpp"

using tg::Tensor;
using namespace tg::nn_test;
using Catch::Contains;

namespace {

// Two Linears in a Sequential, like torch.nn.Sequential(Linear(3, 4), ReLU(), Linear(4, 2)).
tg::nn::Sequential make_net() { return tg::nn::Sequential(tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::Linear(4, 2)); }

}  // namespace

TEST_CASE("state_dict names every parameter in order and shares its storage", "[module][state_dict]") {
  tg::manual_seed(3);
  tg::nn::Sequential net = make_net();
  const tg::nn::StateDict sd = net.state_dict();
  REQUIRE(sd.keys() == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  REQUIRE(sd.size() == 4);
  const auto named = net.named_parameters();
  for (const auto& [name, p] : named) {
    const Tensor& t = sd.at(name);
    CHECK_FALSE(t.requires_grad());  // detached, as PyTorch's
    CHECK(t.data<float>() == p.data<float>());  // a view of the live parameter, not a copy
  }
  REQUIRE_TG_ERROR(sd.at("1.weight"), Contains("'1.weight'") && Contains("'0.weight', '0.bias'"));
}

TEST_CASE("load_state_dict copies values into the existing parameters", "[module][state_dict]") {
  tg::manual_seed(4);
  tg::nn::Sequential source = make_net();
  tg::nn::Sequential target = make_net();
  const Tensor weight_handle = target.parameters()[0];  // what an optimizer built on target holds
  const tg::nn::IncompatibleKeys result = target.load_state_dict(source.state_dict());
  CHECK(result.missing_keys.empty());
  CHECK(result.unexpected_keys.empty());
  const auto from = source.named_parameters(), to = target.named_parameters();
  for (size_t i = 0; i < from.size(); ++i) {
    INFO(from[i].first);
    CHECK(bytes(to[i].second) == bytes(from[i].second));
    CHECK(to[i].second.data<float>() != from[i].second.data<float>());  // copied, not shared
  }
  CHECK(weight_handle.is_same(target.parameters()[0]));
  CHECK(bytes(weight_handle) == bytes(source.parameters()[0]));
  CHECK(weight_handle.requires_grad());
  CHECK(weight_handle.is_leaf());
}

TEST_CASE("a cloned state_dict is a snapshot that restores the model", "[module][state_dict]") {
  tg::manual_seed(5);
  tg::nn::Linear lin(3, 2);
  tg::nn::StateDict best = lin.state_dict();
  for (auto& [name, t] : best) t = t.clone();
  const std::vector<unsigned char> weight_before = bytes(lin.weight);
  {
    tg::NoGradGuard no_grad;
    lin.weight.fill_(7.0);
  }
  CHECK(bytes(best.at("weight")) == weight_before);  // the clone did not follow
  lin.load_state_dict(best);
  CHECK(bytes(lin.weight) == weight_before);
}

TEST_CASE("load_state_dict converts float64 values into a float32 model", "[module][state_dict]") {
  tg::nn::Linear lin(2, 1);
  tg::nn::StateDict sd;
  sd.insert("weight", tg::tensor({0.1, -0.25}, {1, 2}, tg::kFloat64));
  sd.insert("bias", tg::tensor({1.0 / 3.0}, {1}, tg::kFloat64));
  lin.load_state_dict(sd);
  REQUIRE(lin.weight.dtype() == tg::kFloat32);
  CHECK(lin.weight.to_vector<float>() == std::vector<float>{0.1f, -0.25f});
  CHECK(lin.bias.to_vector<float>() == std::vector<float>{static_cast<float>(1.0 / 3.0)});
}

TEST_CASE("strict load_state_dict names missing and unexpected keys and changes nothing", "[module][state_dict][errors]") {
  tg::manual_seed(6);
  tg::nn::Linear lin(2, 3);
  const std::vector<unsigned char> weight_before = bytes(lin.weight);
  tg::nn::StateDict sd;
  sd.insert("weight", tg::zeros({3, 2}));
  sd.insert("bais", tg::zeros({3}));  // a typo of "bias"
  REQUIRE_TG_ERROR(lin.load_state_dict(sd), Contains("load_state_dict") && Contains("missing key(s)") &&
                                                Contains("'bias'") && Contains("unexpected key(s)") &&
                                                Contains("'bais'") && Contains("nothing was loaded"));
  CHECK(bytes(lin.weight) == weight_before);

  // Not strict: the matching keys load, the others come back as PyTorch's _IncompatibleKeys.
  const tg::nn::IncompatibleKeys keys = lin.load_state_dict(sd, /*strict=*/false);
  CHECK(keys.missing_keys == std::vector<std::string>{"bias"});
  CHECK(keys.unexpected_keys == std::vector<std::string>{"bais"});
  CHECK(lin.weight.to_vector<float>() == std::vector<float>(6, 0.0f));
}

TEST_CASE("load_state_dict refuses a wrong shape or dtype even when not strict", "[module][state_dict][errors]") {
  tg::manual_seed(7);
  tg::nn::Linear lin(2, 3);
  const std::vector<unsigned char> bias_before = bytes(lin.bias);
  const bool strict = GENERATE(true, false);
  tg::nn::StateDict sd;
  sd.insert("bias", tg::zeros({3}));  // valid: must not be copied when another key fails
  sd.insert("weight", tg::zeros({2, 3}));
  REQUIRE_TG_ERROR(lin.load_state_dict(sd, strict), Contains("size mismatch for 'weight'") && Contains("[2, 3]") &&
                                                        Contains("[3, 2]") && Contains("nothing was loaded"));
  CHECK(bytes(lin.bias) == bias_before);
  sd.insert("weight", tg::zeros({3, 2}, tg::kInt64));
  REQUIRE_TG_ERROR(lin.load_state_dict(sd, strict), Contains("'weight' is int64") && Contains("float32"));
  sd.insert("weight", Tensor());
  REQUIRE_TG_ERROR(lin.load_state_dict(sd, strict), Contains("'weight' is an undefined tensor"));
  CHECK(bytes(lin.bias) == bias_before);
}

TEST_CASE("StateDict keeps insertion order; insert replaces in place; erase removes", "[module][state_dict]") {
  tg::nn::StateDict sd;
  sd.insert("b", tg::ones({1}));
  sd.insert("a", tg::ones({2}));
  sd.insert("b", tg::ones({3}));
  REQUIRE(sd.keys() == std::vector<std::string>{"b", "a"});
  CHECK(sd.at("b").shape() == tg::Shape{3});
  CHECK(sd.contains("a"));
  CHECK(sd.erase("b"));
  CHECK_FALSE(sd.erase("b"));
  CHECK(sd.keys() == std::vector<std::string>{"a"});
  CHECK_FALSE(sd.empty());
}
