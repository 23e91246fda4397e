// examples/char_lstm's pieces: the parameters under the PyTorch twin's names, the state carried
// from one call to the next against running the whole text at once, and generation carrying it
// against generation recomputing the whole text for every character.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "char_lstm/model.hpp"
#include "support/fixtures.hpp"

using namespace tg;

namespace {

std::unique_ptr<char_lstm::CharLSTM> tiny_lstm() {
  manual_seed(3);
  auto model = std::make_unique<char_lstm::CharLSTM>(
      char_lstm::LSTMConfig{.vocab_size = 7, .n_embd = 5, .hidden_size = 6, .num_layers = 2});
  model->to(kFloat64);
  return model;
}

// The reference of generate(): every character from the whole text so far, run from zero states.
std::vector<int64_t> generate_recomputing(char_lstm::CharLSTM& model, std::vector<int64_t> tokens, int64_t count,
                                          double temperature, int64_t top_k, Generator& generator) {
  model.eval();
  NoGradGuard no_grad;
  for (int64_t n = 0; n < count; ++n) {
    const auto length = static_cast<int64_t>(tokens.size());
    const Tensor logits = model(tensor(std::vector<double>(tokens.begin(), tokens.end()), {1, length}, kInt64));
    tokens.push_back(examples::text::sample_next(logits.select(0, 0).select(0, length - 1), temperature, top_k, generator));
  }
  model.train();
  return tokens;
}

}  // namespace

TEST_CASE("char_lstm's parameters carry the twin's names, in its order", "[examples][char_lstm]") {
  const auto owner = tiny_lstm();
  char_lstm::CharLSTM& model = *owner;
  std::vector<std::string> names;
  for (const auto& [name, parameter] : model.named_parameters()) names.push_back(name);
  // bench/char_lstm_torch.py's CharLSTM(7, 5, 6, 2, 0.0).named_parameters(), by hand.
  REQUIRE(names == std::vector<std::string>{"embedding.weight", "lstm.weight_ih_l0", "lstm.weight_hh_l0",
                                            "lstm.bias_ih_l0", "lstm.bias_hh_l0", "lstm.weight_ih_l1",
                                            "lstm.weight_hh_l1", "lstm.bias_ih_l1", "lstm.bias_hh_l1", "head.weight",
                                            "head.bias"});
  REQUIRE(model.lstm.weight("weight_ih_l0").shape() == Shape{24, 5});  // 4 gates × hidden 6, input 5
  REQUIRE(model.lstm.weight("weight_hh_l1").shape() == Shape{24, 6});
  REQUIRE(model.head.weight.shape() == Shape{7, 6});
}

TEST_CASE("char_lstm continues from the state it returned as if run on the whole text", "[examples][char_lstm]") {
  const auto owner = tiny_lstm();
  char_lstm::CharLSTM& model = *owner;
  NoGradGuard no_grad;
  Generator generator(5);
  const Tensor idx = randint(7, {2, 9}, kInt64, &generator);
  const Tensor whole = model(idx);  // [2, 9, 7]
  REQUIRE(whole.shape() == Shape{2, 9, 7});
  // 4 positions from zero states, then 3, then 2, each from the state the previous call left.
  const std::vector<Tensor> parts = idx.split({4, 3, 2}, 1);
  auto [first, state] = model.forward(parts[0], std::nullopt);
  std::vector<Tensor> pieces{first};
  for (size_t k = 1; k < parts.size(); ++k) {
    auto [logits, next] = model.forward(parts[k], state);
    pieces.push_back(logits);
    state = next;
  }
  TG_REQUIRE_CLOSE(cat(pieces, 1), whole, 1e-12);
  // The state holds every layer: [num_layers, B, hidden].
  REQUIRE(std::get<0>(state).shape() == Shape{2, 2, 6});
  REQUIRE(std::get<1>(state).shape() == Shape{2, 2, 6});
  // Restarting from zero states is not the same: the state matters.
  REQUIRE((model(parts[1]) - pieces[1]).abs().max().item() > 1e-3);
}

TEST_CASE("char_lstm's generation carrying the state equals recomputing the whole text", "[examples][char_lstm]") {
  const auto owner = tiny_lstm();
  char_lstm::CharLSTM& model = *owner;
  for (const int64_t top_k : {int64_t{1}, int64_t{0}, int64_t{3}}) {
    INFO("top_k " << top_k);
    Generator carried_draws(11), recomputed_draws(11);
    const std::vector<int64_t> carried = char_lstm::generate(model, {1, 2, 3}, 30, 1.5, top_k, carried_draws);
    const std::vector<int64_t> recomputed = generate_recomputing(model, {1, 2, 3}, 30, 1.5, top_k, recomputed_draws);
    REQUIRE(carried.size() == 33);
    REQUIRE(carried == recomputed);
    if (top_k == 0) REQUIRE(std::set<int64_t>(carried.begin() + 3, carried.end()).size() > 3);  // it did sample
  }
  REQUIRE(model.is_training());  // generate restores the mode
  Generator generator(0);
  REQUIRE_TG_ERROR(char_lstm::generate(model, {}, 5, 1.0, 0, generator),
                   Catch::Contains("a prompt of at least one character"));
}

namespace {

// The model of the fixture's configuration (vocab, n_embd, hidden_size, num_layers, ...), drawn
// from seed 0 in float32 and converted to float64, as the twin builds it.
std::unique_ptr<char_lstm::CharLSTM> fixture_lstm(const std::vector<int64_t>& config) {
  manual_seed(0);
  auto model = std::make_unique<char_lstm::CharLSTM>(char_lstm::LSTMConfig{
      .vocab_size = config[0], .n_embd = config[1], .hidden_size = config[2], .num_layers = config[3]});
  model->to(kFloat64);
  return model;
}

}  // namespace

TEST_CASE("char_lstm draws the twin's initial weights and takes its first 10 Adam steps (float64)",
          "[examples][char_lstm][fixtures]") {
  const auto& init = tg::testing::fixture("char_lstm.txt", "init");
  const std::vector<int64_t>& config = init.ints("config");  // vocab, n_embd, hidden, layers, block, batch, steps
  const auto owner = fixture_lstm(config);
  char_lstm::CharLSTM& model = *owner;
  // PyTorch's default initialisation, module by module in the twin's order: the same numbers.
  for (const auto& [name, parameter] : model.named_parameters()) {
    INFO(name);
    TG_REQUIRE_CLOSE(parameter, init.at(name), 0.0);
  }
  const char_lstm::OptimizerConfig c;  // lr 2e-3, betas 0.9/0.99, clipping 1.0: the example's defaults
  const auto optimizer = char_lstm::make_optimizer(model, c);
  const auto int_tensor = [&](const std::string& name) {
    const std::vector<int64_t>& values = init.ints(name);
    return tensor(std::vector<double>(values.begin(), values.end()), {config[5], config[4]}, kInt64);
  };
  const Tensor x = int_tensor("x"), y = int_tensor("y");
  const std::vector<double> losses = tg::testing::fixture("char_lstm.txt", "steps").at("losses").to_vector<double>();
  for (int64_t it = 0; it < config[6]; ++it) {
    INFO("step " << it);
    const double loss = char_lstm::train_step(model, *optimizer, c, x, y, [](const Tensor& l) { l.backward(); });
    CHECK(loss == Approx(losses[static_cast<size_t>(it)]).epsilon(1e-12));
  }
  const auto& after = tg::testing::fixture("char_lstm.txt", "step10");
  for (const auto& [name, parameter] : model.named_parameters()) {
    INFO(name);
    TG_REQUIRE_CLOSE(parameter, after.at(name), 1e-10);
  }
}
