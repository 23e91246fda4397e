// Random generators in checkpoints: a run with Dropout and a shuffling generator, saved and
// resumed, draws the same masks and the same permutations — and so reaches the same weights bit
// for bit — as a run that never stopped; and the generator entries are checked like the rest.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using tg::io_test::scratch_path;

namespace {

struct Run {
  tg::nn::Sequential model{tg::nn::Linear(4, 16), tg::nn::Dropout(0.3), tg::nn::Linear(16, 1)};
  tg::optim::AdamW optimizer{model.parameters(), {.lr = 1e-2}};
  tg::Generator shuffle{7};
  std::vector<float> data = drawn({32, 4}, 1);
  std::vector<float> target = drawn({32, 1}, 2);

  static std::vector<float> drawn(const tg::Shape& shape, uint64_t seed) {
    tg::Generator generator(seed);
    return tg::randn(shape, generator).to_vector<float>();
  }

  // Steps of 8 samples picked by a permutation from `shuffle`; Dropout draws from the default generator.
  void steps(int count) {
    for (int step = 0; step < count; ++step) {
      const std::vector<int64_t> order = tg::randperm(32, shuffle).to_vector<int64_t>();
      std::vector<double> rows;
      std::vector<double> targets;
      for (int i = 0; i < 8; ++i) {
        const int64_t row = order[static_cast<size_t>(i)];
        for (int j = 0; j < 4; ++j) rows.push_back(data[static_cast<size_t>(row * 4 + j)]);
        targets.push_back(target[static_cast<size_t>(row)]);
      }
      optimizer.zero_grad();
      tg::nn::mse_loss(model(tg::tensor(rows, {8, 4})), tg::tensor(targets, {8, 1})).backward();
      optimizer.step();
    }
  }
  std::vector<float> weights() {
    std::vector<float> out;
    for (const tg::Tensor& p : model.parameters())
      for (float v : p.to_vector<float>()) out.push_back(v);
    return out;
  }
};

}  // namespace

TEST_CASE("a checkpoint with its generators resumes bit for bit", "[checkpoint][generator]") {
  const std::string path = scratch_path("generators.safetensors");
  tg::manual_seed(3);
  Run straight;
  straight.steps(10);

  tg::manual_seed(3);
  Run first;
  first.steps(5);
  tg::save(first.model, first.optimizer, path, {.generators = {&tg::default_generator(), &first.shuffle}});
  const tg::GeneratorState at_save = tg::default_generator().get_state();

  tg::manual_seed(99);  // the resumed process starts elsewhere
  Run resumed;
  REQUIRE(tg::default_generator().get_state() != at_save);
  tg::load(resumed.model, resumed.optimizer, path, {.generators = {&tg::default_generator(), &resumed.shuffle}});
  REQUIRE(tg::default_generator().get_state() == at_save);
  REQUIRE(resumed.shuffle.get_state() == first.shuffle.get_state());
  resumed.steps(5);
  REQUIRE(resumed.weights() == straight.weights());
}

TEST_CASE("generator entries of a checkpoint are checked before anything changes", "[checkpoint][generator]") {
  const std::string path = scratch_path("generators_checked.safetensors");
  tg::nn::Linear model(2, 2);
  tg::Generator a(1), b(2);
  tg::save(model, path, {.generators = {&a, &b}});

  // Without generators in the load, the file's generator entries are left alone.
  const tg::GeneratorState before = a.get_state();
  tg::load(model, path);
  tg::Generator other(5);
  const tg::GeneratorState other_before = other.get_state();
  REQUIRE_THROWS_WITH(tg::load(model, path, {.generators = {&other}}),
                      Catch::Contains("holds the state of 2 random generator(s), but 1 were given"));
  REQUIRE(other.get_state() == other_before);
  REQUIRE_THROWS_WITH(tg::load(model, path, {.generators = {&other, nullptr}}), Catch::Contains("null"));
  REQUIRE(other.get_state() == other_before);
  tg::Generator c, d;
  tg::load(model, path, {.generators = {&c, &d}});
  REQUIRE(c.get_state() == before);
  REQUIRE(d.get_state() == b.get_state());

  // A file without generator state cannot restore one.
  tg::save(model, path);
  REQUIRE_THROWS_WITH(tg::load(model, path, {.generators = {&c}}), Catch::Contains("0 random generator(s)"));
}
