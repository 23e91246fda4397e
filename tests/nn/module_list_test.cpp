// ModuleList and ModuleDict: PyTorch's dotted names, order, sharing, insert/extend/pop, nesting,
// train()/eval() through the tree, and errors.
#include <string>
#include <vector>

#include "nn_test_util.hpp"

using tg::Tensor;
using tg::nn_test::bytes;

namespace {

std::vector<std::string> names(tg::nn::Module& module) {
  std::vector<std::string> out;
  for (const auto& [name, p] : module.named_parameters()) out.push_back(name);
  return out;
}

// A model that calls the children of a ModuleList and a ModuleDict itself, as PyTorch models do.
struct Tower : tg::nn::Module {
  tg::nn::ModuleList blocks;
  tg::nn::ModuleDict heads;
  Tower() {
    for (int i = 0; i < 2; ++i) blocks.push_back(tg::nn::Linear(3, 3));
    heads.insert("score", tg::nn::Linear(3, 1));
    heads.insert("norm", tg::nn::LayerNorm({3}));
  }
  void members(tg::nn::Members& m) override {
    m.module("blocks", blocks);
    m.module("heads", heads);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (tg::nn::Module& block : blocks) h = block(h).relu();
    return heads["score"](heads["norm"](h));
  }
};

}  // namespace

TEST_CASE("ModuleList and ModuleDict name their children as PyTorch does", "[module_list]") {
  Tower tower;
  REQUIRE(names(tower) == std::vector<std::string>{"blocks.0.weight", "blocks.0.bias", "blocks.1.weight",
                                                   "blocks.1.bias", "heads.score.weight", "heads.score.bias",
                                                   "heads.norm.weight", "heads.norm.bias"});
  // The hand-written forward equals the same layers called one by one.
  tg::manual_seed(3);
  const Tensor x = tg::randn({4, 3});
  auto& b0 = tower.blocks.at<tg::nn::Linear>(0);
  auto& b1 = tower.blocks.at<tg::nn::Linear>(1);
  const Tensor expected = tower.heads.at<tg::nn::Linear>("score")(
      tower.heads.at<tg::nn::LayerNorm>("norm")(b1(b0(x).relu()).relu()));
  REQUIRE(bytes(tower(x)) == bytes(expected));

  tower.eval();
  for (tg::nn::Module& block : tower.blocks) REQUIRE_FALSE(block.is_training());
  REQUIRE_FALSE(tower.heads["norm"].is_training());
  tower.train();
  REQUIRE(tower.heads["score"].is_training());
}

TEST_CASE("ModuleList: insert, extend, sharing and errors", "[module_list]") {
  tg::nn::ModuleList list(tg::nn::Linear(2, 2), tg::nn::ReLU());
  REQUIRE(list.size() == 2);
  list.insert(0, tg::nn::LayerNorm({2}));
  REQUIRE(names(list) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  REQUIRE(dynamic_cast<tg::nn::ReLU*>(&list[2]) != nullptr);

  tg::nn::ModuleList other;
  other.push_back(list.ptr(1));  // the same Linear, shared
  list.extend(other);
  REQUIRE(list.size() == 4);
  REQUIRE(&list[3] == &list[1]);
  list.extend(list);  // from itself: appends a snapshot of its own children
  REQUIRE(list.size() == 8);

  const tg::nn::ModuleList copy = list;  // copies share the children
  REQUIRE(&const_cast<tg::nn::ModuleList&>(copy)[1] == &list[1]);

  REQUIRE_THROWS_WITH(list[8], Catch::Contains("ModuleList") && Catch::Contains("8"));
  REQUIRE_THROWS_WITH(list.at<tg::nn::ReLU>(0), Catch::Contains("ModuleList") && Catch::Contains("0"));
  REQUIRE_THROWS_WITH(list.insert(9, tg::nn::ReLU()), Catch::Contains("insert position 9"));
  REQUIRE_THROWS_WITH(list.push_back(std::shared_ptr<tg::nn::Module>()), Catch::Contains("null"));
  REQUIRE_THROWS_WITH(list(tg::zeros({1, 2})), Catch::Contains("ModuleList") && Catch::Contains("no forward"));
  // A list cannot hold itself: a walk over its members would never end.
  auto shared = std::make_shared<tg::nn::ModuleList>();
  REQUIRE_THROWS_WITH(shared->push_back(shared), Catch::Contains("cannot contain itself"));
  REQUIRE(shared->empty());
}

TEST_CASE("Sequential is a ModuleList with a forward", "[module_list][sequential]") {
  tg::nn::Sequential model(tg::nn::Linear(2, 3));
  model.insert(0, tg::nn::LayerNorm({2}));
  REQUIRE(names(model) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias"});
  const Tensor x = tg::randn({5, 2});
  REQUIRE(bytes(model(x)) == bytes(model[1](model[0](x))));
  REQUIRE_THROWS_WITH(model[7], Catch::Contains("Sequential"));
}

TEST_CASE("ModuleDict: insertion order, replacement, pop and errors", "[module_list]") {
  tg::nn::ModuleDict dict;
  dict.insert("b", tg::nn::Linear(2, 2));
  dict.insert("a", tg::nn::LayerNorm({2}));
  REQUIRE(dict.keys() == std::vector<std::string>{"b", "a"});
  REQUIRE(names(dict) == std::vector<std::string>{"b.weight", "b.bias", "a.weight", "a.bias"});
  dict.insert("b", tg::nn::ReLU());  // replaces, keeping the position
  REQUIRE(dict.keys() == std::vector<std::string>{"b", "a"});
  REQUIRE(names(dict) == std::vector<std::string>{"a.weight", "a.bias"});
  REQUIRE(dict.contains("a"));
  const std::shared_ptr<tg::nn::Module> popped = dict.pop("a");
  REQUIRE(dynamic_cast<tg::nn::LayerNorm*>(popped.get()) != nullptr);
  REQUIRE(dict.size() == 1);
  REQUIRE_FALSE(dict.contains("a"));

  REQUIRE_THROWS_WITH(dict["missing"], Catch::Contains("ModuleDict") && Catch::Contains("'missing'"));
  REQUIRE_THROWS_WITH(dict.pop("missing"), Catch::Contains("ModuleDict::pop") && Catch::Contains("'missing'"));
  REQUIRE_THROWS_WITH(dict.at<tg::nn::Linear>("b"), Catch::Contains("'b'"));
  REQUIRE_THROWS_WITH(dict.insert("x.y", tg::nn::ReLU()), Catch::Contains("invalid name 'x.y'"));
  REQUIRE_THROWS_WITH(dict.insert("", tg::nn::ReLU()), Catch::Contains("invalid name"));
  REQUIRE_THROWS_WITH(dict(tg::zeros({1})), Catch::Contains("ModuleDict") && Catch::Contains("no forward"));
  dict.clear();
  REQUIRE(dict.empty());
}
