// The Module API: registration by members(), dotted names, zero_grad, to(), train/eval, and
// parameters that are never silently detached from their module.
#include <string>

#include "nn_test_util.hpp"

using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;

namespace {

// A user-written module: a Linear and a LayerNorm, registered by name.
struct Block : tg::nn::Module {
  tg::nn::Linear lin{4, 8};
  tg::nn::LayerNorm ln{{8}};
  void members(tg::nn::Members& m) override {
    m.module("lin", lin);
    m.module("ln", ln);
  }
  Tensor forward(const Tensor& x) override { return ln(lin(x)); }
};

// A module of modules, with a parameter of its own.
struct Net : tg::nn::Module {
  Block block;
  tg::nn::Parameter scale{"Net.scale", tg::ones({8})};
  void members(tg::nn::Members& m) override {
    m.module("block", block);
    m.parameter("scale", scale);
  }
  Tensor forward(const Tensor& x) override { return block(x) * scale; }
};

std::vector<std::string> names(tg::nn::Module& module) {
  std::vector<std::string> out;
  for (const auto& [name, p] : module.named_parameters()) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("a user module gets parameters, named_parameters, zero_grad, to and train", "[module]") {
  Net net;
  REQUIRE(names(net) == std::vector<std::string>{"block.lin.weight", "block.lin.bias", "block.ln.weight",
                                                 "block.ln.bias", "scale"});
  const std::vector<Tensor> params = net.parameters();
  REQUIRE(params.size() == 5);
  REQUIRE(params[0].is_same(net.block.lin.weight));  // handles, not copies
  REQUIRE(params[4].is_same(net.scale));

  const Tensor loss = net(tg::randn({3, 4})).pow(2.0).mean();
  loss.backward();
  for (const Tensor& p : net.parameters()) REQUIRE(p.grad().defined());
  net.zero_grad();
  for (const Tensor& p : params) REQUIRE(!p.grad().defined());

  REQUIRE(net.is_training());
  REQUIRE(net.block.ln.is_training());
  net.eval();
  REQUIRE(!net.is_training());
  REQUIRE(!net.block.is_training());
  REQUIRE(!net.block.lin.is_training());
  REQUIRE(!net.block.ln.is_training());
  net.train();
  REQUIRE(net.block.ln.is_training());

  net.to(tg::kFloat64);
  for (const Tensor& p : net.parameters()) {
    REQUIRE(p.dtype() == tg::kFloat64);
    REQUIRE(p.requires_grad());
    REQUIRE(p.is_leaf());
  }
  REQUIRE(net(tg::randn({2, 4}, tg::kFloat64)).dtype() == tg::kFloat64);
}

TEST_CASE("to() converts values and gradients and keeps the values", "[module]") {
  tg::nn::Linear lin(3, 2);
  const std::vector<float> before = lin.weight.to_vector<float>();
  tg::nn::mse_loss(lin(tg::randn({4, 3})), tg::zeros({4, 2})).backward();
  lin.to(tg::kFloat64);
  const std::vector<double> after = lin.weight.to_vector<double>();
  for (size_t i = 0; i < before.size(); ++i) REQUIRE(after[i] == static_cast<double>(before[i]));
  REQUIRE(lin.weight.grad().dtype() == tg::kFloat64);
}

TEST_CASE("to() keeps each parameter's identity, hooks and ties", "[module][dtype]") {
  // Two slots holding one tensor (tied weights), and a handle taken before, as an optimizer's.
  struct Tied : tg::nn::Module {
    tg::nn::Parameter a{"Tied.a", tg::ones({2})};
    tg::nn::Parameter b = a;
    void members(tg::nn::Members& m) override {
      m.parameter("a", a);
      m.parameter("b", b);
    }
    Tensor forward(const Tensor& x) override { return x * a * b; }
  };
  Tied tied;
  const Tensor handle = tied.a;
  const Tensor old_view = tied.a.detach();
  int hook_calls = 0;
  const tg::HookHandle hook = handle.register_post_accumulate_grad_hook([&](const Tensor&) { ++hook_calls; });
  tied.to(tg::kFloat64);
  REQUIRE(handle.is_same(tied.a));
  REQUIRE(tied.a.is_same(tied.b));  // still tied
  REQUIRE(handle.dtype() == tg::kFloat64);
  REQUIRE(handle.requires_grad());
  REQUIRE(old_view.dtype() == tg::kFloat32);  // a view taken before keeps the old values, as in PyTorch
  tied(tg::full({2}, 3.0, tg::kFloat64)).sum().backward();
  REQUIRE(hook_calls == 1);
  // d/da (x · a · a) = 2 x a = 6
  REQUIRE(handle.grad().to_vector<double>() == std::vector<double>{6.0, 6.0});
}

TEST_CASE("assigning to a parameter updates the tensor every holder sees", "[module][parameter]") {
  tg::nn::Linear lin(5, 6);
  const Tensor handle = lin.weight;                      // taken before the assignment
  const std::vector<Tensor> optimizer_view = lin.parameters();  // what an optimizer would hold
  const Tensor other = tg::randn({6, 5});
  lin.weight = other;
  REQUIRE(bytes(lin.weight) == bytes(other));
  REQUIRE(bytes(handle) == bytes(other));
  REQUIRE(bytes(optimizer_view[0]) == bytes(other));
  REQUIRE(lin.parameters()[0].is_same(optimizer_view[0]));
  REQUIRE(lin.weight.requires_grad());
  REQUIRE(lin.weight.is_leaf());

  // A copy, not an alias: changing `other` later leaves the parameter alone.
  {
    tg::NoGradGuard no_grad;
    Tensor(other).fill_(7.0);
  }
  REQUIRE(lin.weight.to_vector<float>()[0] != 7.0f);

  // Training after the assignment reaches the handles held before it.
  tg::nn::mse_loss(lin(tg::randn({2, 5})), tg::zeros({2, 6})).backward();
  REQUIRE(optimizer_view[0].grad().defined());
  REQUIRE(optimizer_view[0].grad().shape() == Shape{6, 5});

  // Parameter-to-parameter assignment copies values too.
  tg::nn::Linear source(5, 6);
  lin.bias = source.bias;
  REQUIRE(bytes(optimizer_view[1]) == bytes(source.bias));
  REQUIRE(!lin.bias.is_same(source.bias));
}

TEST_CASE("assigning a tensor of the wrong shape or dtype to a parameter is an error", "[module][parameter]") {
  tg::nn::Linear lin(5, 6);
  REQUIRE_THROWS_WITH(lin.weight = tg::randn({5, 6}), Catch::Contains("Linear.weight") &&
                                                          Catch::Contains("[5, 6]") && Catch::Contains("[6, 5]"));
  REQUIRE_THROWS_WITH(lin.bias = tg::randn({6}, tg::kFloat64),
                      Catch::Contains("Linear.bias") && Catch::Contains("float64"));
  tg::nn::Linear no_bias(5, 6, {.bias = false});
  REQUIRE_THROWS_WITH(no_bias.bias = tg::randn({6}), Catch::Contains("Linear.bias") && Catch::Contains("absent"));
  REQUIRE_THROWS_WITH(lin.weight = Tensor(), Catch::Contains("Linear.weight") && Catch::Contains("undefined"));
}

TEST_CASE("a copied module shares its parameters; a moved one keeps them", "[module]") {
  tg::nn::Linear lin(3, 2);
  tg::nn::Linear copy = lin;
  REQUIRE(copy.weight.is_same(lin.weight));
  const tg::Tensor weight = lin.weight;
  tg::nn::Linear moved = std::move(lin);
  REQUIRE(moved.weight.is_same(weight));
}

TEST_CASE("module.to() refuses int64 and bool, leaving every parameter as it was", "[module][dtype][errors]") {
  tg::nn::Sequential model(tg::nn::Linear(3, 2), tg::nn::LayerNorm({2}));
  const std::vector<float> weight = model.at<tg::nn::Linear>(0).weight.to_vector<float>();
  for (tg::DType dtype : {tg::kInt64, tg::kBool}) {
    REQUIRE_THROWS_WITH(model.to(dtype), Catch::StartsWith("Module.to") && Catch::Contains(std::string(tg::name(dtype))));
    for (const auto& [name, parameter] : model.named_parameters()) {
      INFO(name);
      CHECK(parameter.dtype() == tg::kFloat32);
      CHECK(parameter.requires_grad());
    }
  }
  CHECK(model.at<tg::nn::Linear>(0).weight.to_vector<float>() == weight);
}

TEST_CASE("assigning a module with other parameters changes nothing, then throws", "[module][assignment]") {
  tg::manual_seed(3);
  tg::nn::Linear a(2, 3);
  const std::vector<float> weight_before = a.weight.to_vector<float>();
  const std::vector<float> bias_before = a.bias.to_vector<float>();
  const tg::nn::Linear no_bias(2, 3, {.bias = false});
  REQUIRE_THROWS_WITH(a = no_bias, Catch::Contains("bias") && Catch::Contains("absent") &&
                                       Catch::Contains("nothing was assigned"));
  CHECK(a.weight.to_vector<float>() == weight_before);  // the weight used to be copied already
  CHECK(a.bias.to_vector<float>() == bias_before);
  // The same tree is copied value by value, as before.
  const tg::nn::Linear other(2, 3);
  a = other;
  CHECK(a.weight.to_vector<float>() == other.weight.to_vector<float>());
  CHECK(a.bias.to_vector<float>() == other.bias.to_vector<float>());
}

TEST_CASE("a Sequential cannot contain itself, directly or through a child", "[module][sequential]") {
  auto outer = std::make_shared<tg::nn::Sequential>();
  REQUIRE_THROWS_WITH(outer->push_back(outer), Catch::Contains("Sequential::push_back") &&
                                                   Catch::Contains("cannot contain itself"));
  auto inner = std::make_shared<tg::nn::Sequential>();
  outer->push_back(inner);
  REQUIRE_THROWS_WITH(inner->push_back(outer), Catch::Contains("cannot contain itself"));
  CHECK(outer->size() == 1);
  CHECK(inner->size() == 0);
  CHECK(outer->named_parameters().empty());  // the walk ends
}

namespace {

// The mistake the first forward catches: `head` is used by forward but left out of members().
struct ForgotHead : tg::nn::Module {
  tg::nn::Linear body{4, 8};
  tg::nn::Linear head{8, 2};
  void members(tg::nn::Members& m) override { m.module("body", body); }
  Tensor forward(const Tensor& x) override { return head(body(x).relu()); }
};

// The same with a parameter of its own left out.
struct ForgotParameter : tg::nn::Module {
  tg::nn::Linear lin{4, 2};
  tg::nn::Parameter scale{"ForgotParameter.scale", tg::ones({2})};
  void members(tg::nn::Members& m) override { m.module("lin", lin); }
  Tensor forward(const Tensor& x) override { return lin(x) * scale; }
};

// Legitimate uses of tensors a module does not declare.
struct UsesCallersEmbedding : tg::nn::Module {  // a weight its parent declares (tied by use)
  const tg::nn::Embedding* table = nullptr;
  Tensor forward(const Tensor& h) override { return tg::matmul(h, table->weight.t()); }
};
struct Decoder : tg::nn::Module {
  tg::nn::Embedding wte{10, 4};
  UsesCallersEmbedding head;
  Decoder() { head.table = &wte; }
  Decoder(const Decoder&) = delete;
  void members(tg::nn::Members& m) override {
    m.module("wte", wte);
    m.module("head", head);
  }
  Tensor forward(const Tensor& h) override { return head(h); }
};
struct UsesPlainTensor : tg::nn::Module {  // a requires-grad tensor that is no Parameter
  Tensor code = tg::randn({4}).requires_grad_();
  Tensor forward(const Tensor& x) override { return x * code; }
};

}  // namespace

TEST_CASE("the first forward names a parameter its module forgot to declare", "[module][members]") {
  using Catch::Contains;
  const Tensor x = tg::randn({3, 4});
  ForgotHead forgot_head;
  // parameters() (what an optimizer is built from) misses the head: an optimizer would never step it.
  REQUIRE(forgot_head.parameters().size() == 2);
  REQUIRE_TG_ERROR(forgot_head(x), Contains("ForgotHead.forward") && Contains("'Linear.weight'") &&
                                       Contains("[2, 8]") && Contains("m.module(\"name\", child)"));
  // Every call of a module that fails the check checks again.
  REQUIRE_TG_ERROR(forgot_head(x), Contains("ForgotHead.forward"));
  ForgotParameter forgot_parameter;
  REQUIRE_TG_ERROR(forgot_parameter(x), Contains("'ForgotParameter.scale'") && Contains("m.parameter(\"name\", p)"));
  // Through a container: the module whose forward used it is named.
  tg::nn::Sequential model{ForgotParameter(), tg::nn::ReLU()};
  REQUIRE_TG_ERROR(model(x), Contains("ForgotParameter.forward") && Contains("'ForgotParameter.scale'"));
}

TEST_CASE("the forgotten-parameter check leaves correct modules alone", "[module][members]") {
  const Tensor x = tg::randn({3, 4});
  // Without a graph the check waits for a forward that records one.
  ForgotHead forgot_head;
  {
    tg::NoGradGuard no_grad;
    REQUIRE(forgot_head(x).shape() == Shape{3, 2});
  }
  // The input's own graph (the previous layer's parameters) belongs to the caller.
  tg::nn::Linear before(4, 4), after(4, 2);
  REQUIRE(after(before(x)).shape() == Shape{3, 2});
  // A module that returns its input (Identity, eval Dropout) has nothing of its own to check.
  tg::nn::Linear unlisted(4, 4);
  tg::nn::Identity identity;
  REQUIRE(identity(unlisted(x)).shape() == Shape{3, 4});
  // A parameter the module's caller declares (weight tying by use).
  Decoder decoder;
  REQUIRE(decoder(tg::randn({3, 4})).shape() == Shape{3, 10});
  // A tensor that requires grad but is no Parameter: the user looks after it.
  UsesPlainTensor plain;
  REQUIRE(plain(x).shape() == Shape{3, 4});
  // A parameter some module's parameters() has listed (an optimizer steps it) is someone's.
  ForgotParameter listed;
  tg::optim::SGD optimizer({listed.scale}, {.lr = 0.1});
  REQUIRE_THROWS_AS(listed(x), tg::Error);  // an optimizer's own list is not a module's
  struct Holder : tg::nn::Module {
    tg::nn::Parameter* scale = nullptr;
    void members(tg::nn::Members& m) override { m.parameter("scale", *scale); }
    Tensor forward(const Tensor& t) override { return t; }
  } holder;
  holder.scale = &listed.scale;
  (void)holder.parameters();  // listed by a module: from now on someone steps it
  REQUIRE(listed(x).shape() == Shape{3, 2});
}

TEST_CASE("an empty parameter list says how to declare a module's children", "[module][members]") {
  using Catch::Contains;
  struct Empty : tg::nn::Module {
    tg::nn::Linear lin{2, 2};  // declared nowhere: members() is not overridden
    Tensor forward(const Tensor& x) override { return lin(x); }
  } empty;
  REQUIRE_TG_ERROR(tg::optim::SGD(empty.parameters(), {.lr = 0.1}),
                   Contains("empty list") && Contains("members()") && Contains("m.module(\"name\", child)"));
}
