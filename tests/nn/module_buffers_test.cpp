// Module buffers (Members::buffer): buffers() and named_buffers(), state_dict's PyTorch order,
// load_state_dict, to(dtype), copies and assignment, deep copies of a prototype.
#include <string>
#include <vector>

#include "nn_test_util.hpp"

using tg::Tensor;
using namespace tg::nn_test;

namespace {

// A parameter, a float buffer, an int64 buffer, an absent buffer and a child, declared in the
// order param, buffer, child, buffer: the state dict puts the module's own state first.
struct Tracker : tg::nn::Module {
  tg::nn::Parameter scale{"Tracker.scale", tg::ones({2})};
  Tensor total = tg::zeros({2});
  Tensor count = tg::zeros({}, tg::kInt64);
  Tensor absent;
  tg::nn::Linear lin{2, 2};
  void members(tg::nn::Members& m) override {
    m.parameter("scale", scale);
    m.buffer("total", total);
    m.buffer("absent", absent);
    m.module("lin", lin);
    m.buffer("count", count);
  }
  Tensor forward(const Tensor& x) override { return lin(x) * scale; }
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> names;
  for (const auto& [name, t] : named) names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("buffers are listed by name, are not parameters, and come in PyTorch's state_dict order",
          "[module][buffers]") {
  Tracker tracker;
  REQUIRE(names_of(tracker.named_buffers()) == std::vector<std::string>{"total", "count"});
  REQUIRE(names_of(tracker.named_parameters()) == std::vector<std::string>{"scale", "lin.weight", "lin.bias"});
  REQUIRE(tracker.buffers()[0].is_same(tracker.total));  // a handle, not a copy
  REQUIRE(tracker.state_dict().keys() ==
          std::vector<std::string>{"scale", "total", "lin.weight", "lin.bias", "count"});

  // nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)).state_dict().keys() in PyTorch:
  tg::nn::Sequential model(tg::nn::Linear(3, 4), tg::nn::BatchNorm1d(4));
  REQUIRE(model.state_dict().keys() == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                                "1.running_mean", "1.running_var",
                                                                "1.num_batches_tracked"});
  REQUIRE(names_of(model.named_buffers()) ==
          std::vector<std::string>{"1.running_mean", "1.running_var", "1.num_batches_tracked"});
  REQUIRE(model.parameters().size() == 4);
  // zero_grad and an optimizer never see a buffer.
  for (const Tensor& b : model.buffers()) REQUIRE(!b.requires_grad());
}

TEST_CASE("state_dict views buffers, load_state_dict copies into them", "[module][buffers]") {
  Tracker source, target;
  source.total.fill_(3.0);
  source.count.fill_(7);
  const tg::nn::StateDict state = source.state_dict();
  source.total.fill_(4.0);  // a view: the state dict follows
  REQUIRE(state.at("total").to_vector<float>() == std::vector<float>{4, 4});

  const Tensor total_handle = target.total;
  target.load_state_dict(state);
  REQUIRE(total_handle.to_vector<float>() == std::vector<float>{4, 4});  // copied into the same storage
  REQUIRE(target.count.item<int64_t>() == 7);

  // float64 values into a float32 buffer are converted; a float into an int64 buffer is refused.
  tg::nn::StateDict converted = source.state_dict();
  converted.insert("total", tg::full({2}, 2.5, tg::kFloat64));
  target.load_state_dict(converted);
  REQUIRE(target.total.dtype() == tg::kFloat32);
  REQUIRE(target.total.to_vector<float>() == std::vector<float>{2.5, 2.5});

  tg::nn::StateDict bad = source.state_dict();
  bad.insert("count", tg::zeros({}));
  bad.insert("total", tg::zeros({3}));
  REQUIRE_TG_ERROR(target.load_state_dict(bad), Catch::Contains("'count' is float32; the buffer is int64") &&
                                                   Catch::Contains("size mismatch for 'total'") &&
                                                   Catch::Contains("the buffer has shape [2]"));
  REQUIRE(target.total.to_vector<float>() == std::vector<float>{2.5, 2.5});  // nothing was loaded

  tg::nn::StateDict missing = source.state_dict();
  missing.erase("count");
  REQUIRE_TG_ERROR(target.load_state_dict(missing), Catch::Contains("missing key(s)") && Catch::Contains("'count'"));
  REQUIRE(target.load_state_dict(missing, false).missing_keys == std::vector<std::string>{"count"});
}

TEST_CASE("to(dtype) converts float buffers in place and keeps integer ones", "[module][buffers]") {
  Tracker tracker;
  const Tensor handle = tracker.total;
  tracker.to(tg::kFloat64);
  REQUIRE(handle.dtype() == tg::kFloat64);
  REQUIRE(tracker.total.is_same(handle));
  REQUIRE(tracker.count.dtype() == tg::kInt64);
  REQUIRE(!tracker.total.requires_grad());
}

TEST_CASE("copies share buffers, deep copies own them, assignment checks and copies them", "[module][buffers]") {
  Tracker original;
  Tracker copy = original;
  REQUIRE(copy.total.is_same(original.total));

  Tracker deep = original;
  tg::nn::detail::give_own_parameters(deep);
  REQUIRE(!deep.total.is_same(original.total));
  REQUIRE(!deep.scale.is_same(original.scale));
  original.total.fill_(9.0);
  REQUIRE(deep.total.to_vector<float>() == std::vector<float>{0, 0});

  // Module assignment refuses modules whose buffers differ.
  tg::nn::BatchNorm1d tracked(3), untracked(3, {.track_running_stats = false});
  REQUIRE_TG_ERROR(tracked = untracked, Catch::Contains("buffers") && Catch::Contains("running_mean"));
}
