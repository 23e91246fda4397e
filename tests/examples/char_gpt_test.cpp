// examples/char_gpt's pieces: the Bible's split and the vocabulary by hand, generation with a
// key/value cache against full-context generation, and the GPT's first 20 AdamW steps against
// the PyTorch twin in float64 (tests/fixtures/char_gpt.txt, from make_char_gpt_fixtures.py).
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <fstream>
#include <string>
#include <vector>

#include "char_gpt/model.hpp"
#include "char_gpt/text.hpp"
#include "support/fixtures.hpp"

using namespace tg;
using tg::testing::fixture;

namespace {

// Twelve chapters in `bible -f`'s format: chapter k (0-based, in order) has k % 3 + 1 verses,
// "k<k> v<i>". Chapters 0-4 are Ge1-Ge5, 5-11 are 1Sa1-1Sa7 (a book whose name starts with a
// digit); a blank line and a verse holding ": " test the parsing.
std::string synthetic_bible() {
  std::string listing;
  for (int k = 0; k < 12; ++k) {
    const std::string chapter = k < 5 ? "Ge" + std::to_string(k + 1) : "1Sa" + std::to_string(k - 4);
    for (int i = 1; i <= k % 3 + 1; ++i)
      listing += chapter + ":" + std::to_string(i) + " k" + std::to_string(k) + " v" + std::to_string(i) + "\n";
    if (k == 3) listing += "\n";
  }
  return listing + "1Sa7:4 said: yea\n";
}

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tg_char_gpt_test_" + name)).string();
}

}  // namespace

TEST_CASE("char_gpt splits the Bible by chapter, every tenth to validation", "[examples][char_gpt]") {
  const char_gpt::Corpus corpus = char_gpt::split_bible(synthetic_bible());
  // Verses: 1+2+3 + 1+2+3 + 1+2+3 + 1+2+3 = 24, and the extra verse of chapter 11: 25.
  REQUIRE(corpus.verses == 25);
  REQUIRE(corpus.chapters == 12);
  // Chapters 0..11: only k = 9 (1Sa5, one verse since 9 % 3 = 0) has k % 10 == 9.
  REQUIRE(corpus.val_chapters == 1);
  REQUIRE(corpus.val == "k9 v1\n");
  REQUIRE(corpus.train.rfind("k0 v1\nk1 v1\nk1 v2\nk2 v1\nk2 v2\nk2 v3\nk3 v1\nk4 v1\n", 0) == 0);
  // The reference is cut at the first space only: the verse's own colon stays.
  REQUIRE(corpus.train.ends_with("k10 v2\nk11 v1\nk11 v2\nk11 v3\nsaid: yea\n"));
  REQUIRE(std::count(corpus.train.begin(), corpus.train.end(), '\n') == 24);
  REQUIRE(corpus.train.find("Ge") == std::string::npos);
  // A line without a reference names its number (the blank line after chapter 3 counts).
  REQUIRE_THROWS_WITH(char_gpt::split_bible("Ge1:1 a\nnonsense\n"), Catch::Contains("line 2") && Catch::Contains("reference"));
}

TEST_CASE("char_gpt's vocabulary holds the sorted code points and round-trips", "[examples][char_gpt]") {
  const char_gpt::Vocabulary vocabulary("ba\nab \xC3\xA9");  // "é" is two bytes, one character
  REQUIRE(vocabulary.size() == 5);
  REQUIRE(vocabulary.characters() == std::u32string{U'\n', U' ', U'a', U'b', U'\u00e9'});
  REQUIRE(vocabulary.encode("\xC3\xA9 a") == std::vector<int64_t>{4, 1, 2});
  REQUIRE(vocabulary.decode({3, 2, 4, 0}) == "ba\xC3\xA9\n");
  REQUIRE_THROWS_WITH(vocabulary.encode("z"), Catch::Contains("'z' (U+007A) is not in") && Catch::Contains("5 characters"));
  REQUIRE_THROWS_WITH(vocabulary.decode({5}), Catch::Contains("token 5 is outside the vocabulary [0, 5)"));
  REQUIRE_THROWS_WITH(char_gpt::Vocabulary("ab\xC3("), Catch::Contains("not UTF-8") && Catch::Contains("byte 2"));
  REQUIRE_THROWS_WITH(char_gpt::Vocabulary(std::string("a\0b", 3)), Catch::Contains("NUL byte") && Catch::Contains("byte 1"));
  REQUIRE_THROWS_WITH(char_gpt::Vocabulary("\xC0\xAF"), Catch::Contains("invalid code point"));  // overlong '/'
}

TEST_CASE("char_gpt splits a text file 90/10 by characters", "[examples][char_gpt]") {
  const std::string path = scratch("text.txt");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abcdefghijklmnopqrst";
  char_gpt::Corpus corpus = char_gpt::read_text_file(path);
  REQUIRE(corpus.train == "abcdefghijklmnopqr");  // int(20 · 0.9) = 18
  REQUIRE(corpus.val == "st");
  // Nine "é" (two bytes each) and a "1": int(10 · 0.9) = 9 characters train, not 9 bytes.
  std::string accents;
  for (int i = 0; i < 9; ++i) accents += "\xC3\xA9";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << accents << "1";
  corpus = char_gpt::read_text_file(path);
  REQUIRE(corpus.train == accents);
  REQUIRE(corpus.val == "1");
  std::ofstream(path, std::ios::binary | std::ios::trunc);
  REQUIRE_THROWS_WITH(char_gpt::read_text_file(path), Catch::Contains("is empty"));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string("\x7f" "ELF\0\0", 6);
  REQUIRE_THROWS_WITH(char_gpt::read_text_file(path), Catch::Contains("not UTF-8 text") && Catch::Contains("NUL"));
  REQUIRE_THROWS_WITH(char_gpt::read_text_file(scratch("missing.txt")), Catch::Contains("cannot open"));
  std::filesystem::remove(path);
}

TEST_CASE("char_gpt's learning rate is nanoGPT's get_lr", "[examples][char_gpt]") {
  const char_gpt::OptimizerConfig c{.lr = 1e-3, .min_lr = 1e-4, .warmup_iters = 100, .lr_decay_iters = 2000};
  REQUIRE(char_gpt::get_lr(0, c) == Approx(1e-3 / 101).epsilon(1e-15));
  REQUIRE(char_gpt::get_lr(99, c) == Approx(1e-3 * 100 / 101).epsilon(1e-15));
  REQUIRE(char_gpt::get_lr(100, c) == Approx(1e-3).epsilon(1e-15));                       // cos 0 = 1
  REQUIRE(char_gpt::get_lr(1050, c) == Approx(1e-4 + 0.5 * 9e-4).epsilon(1e-14));          // halfway: cos(π/2) = 0
  REQUIRE(char_gpt::get_lr(2000, c) == Approx(1e-4).epsilon(1e-14));
  REQUIRE(char_gpt::get_lr(2500, c) == 1e-4);
}

namespace {

std::unique_ptr<char_gpt::GPT> tiny_gpt(int64_t block_size) {
  manual_seed(3);
  auto model = std::make_unique<char_gpt::GPT>(
      char_gpt::GPTConfig{.vocab_size = 7, .block_size = block_size, .n_layer = 2, .n_head = 2, .n_embd = 8});
  char_gpt::init_gpt2(*model);
  model->to(kFloat64);
  return model;
}

}  // namespace

TEST_CASE("char_gpt's cached forward equals the full forward", "[examples][char_gpt]") {
  const auto tiny_gpt_model = tiny_gpt(8);
  char_gpt::GPT& model = *tiny_gpt_model;
  model.eval();
  NoGradGuard no_grad;
  Generator generator(5);
  const Tensor idx = randint(7, {2, 8}, kInt64, &generator);
  const Tensor full = model(idx);  // [2, 8, 7]
  // Prefill 5 positions, then one at a time.
  char_gpt::KVCache cache;
  std::vector<Tensor> pieces{model.forward_cached(idx.split({5, 1, 1, 1}, 1)[0], cache)};
  for (int64_t t = 5; t < 8; ++t) pieces.push_back(model.forward_cached(idx.split({t, 1, 7 - t}, 1)[1], cache));
  REQUIRE(cache.length == 8);
  TG_REQUIRE_CLOSE(cat(pieces, 1), full, 1e-12);
  // A ninth position does not fit block_size 8: an error naming the sizes.
  REQUIRE_THROWS_WITH(model.forward_cached(idx.split({7, 1}, 1)[1], cache),
                      Catch::Contains("8 cached positions and 1 new ones exceed block_size 8"));
}

TEST_CASE("char_gpt's generation with a key/value cache equals full-context generation", "[examples][char_gpt]") {
  const auto owner = tiny_gpt(8);
  char_gpt::GPT& model = *owner;
  // 30 characters from a 3-character prompt: the window of 8 fills and drops to 4 several times.
  for (const int64_t top_k : {int64_t{1}, int64_t{0}, int64_t{3}}) {
    INFO("top_k " << top_k);
    Generator cached_draws(11), full_draws(11);
    const std::vector<int64_t> cached =
        char_gpt::generate(model, {1, 2, 3}, {.max_new_tokens = 30, .temperature = 1.5, .top_k = top_k}, cached_draws);
    const std::vector<int64_t> full = char_gpt::generate(
        model, {1, 2, 3}, {.max_new_tokens = 30, .temperature = 1.5, .top_k = top_k, .kv_cache = false}, full_draws);
    REQUIRE(cached.size() == 33);
    REQUIRE(cached == full);
    if (top_k == 0) REQUIRE(std::set<int64_t>(cached.begin() + 3, cached.end()).size() > 3);  // it did sample
  }
  REQUIRE(model.is_training());  // generate restores the mode
  Generator generator(0);
  REQUIRE_TG_ERROR(char_gpt::generate(model, std::vector<int64_t>(9, 1), {}, generator),
                   Catch::Contains("a prompt of 9 characters is longer than block_size 8"));
  REQUIRE_TG_ERROR(char_gpt::generate(model, {1}, {.temperature = 0}, generator), Catch::Contains("temperature > 0"));
}

namespace {

// The fixture's tensors under the model's state_dict keys (the tied lm_head.weight included, as
// in PyTorch's state_dict).
tg::nn::StateDict fixture_state(const tg::testing::FixtureCase& c, char_gpt::GPT& model) {
  tg::nn::StateDict state;
  for (const std::string& name : model.state_dict().keys()) state.insert(name, c.at(name));
  return state;
}

Tensor int_tensor(const std::vector<int64_t>& values, const Shape& shape) {
  return tensor(std::vector<double>(values.begin(), values.end()), shape, kInt64);
}

}  // namespace

TEST_CASE("char_gpt's GPT takes PyTorch's first 20 AdamW steps (float64)", "[examples][char_gpt][fixtures]") {
  const auto& init = fixture("char_gpt.txt", "init");
  const std::vector<int64_t>& config = init.ints("config");  // vocab, n_layer, n_head, n_embd, block, batch, warmup, iters
  char_gpt::GPT model({.vocab_size = config[0], .block_size = config[4], .n_layer = config[1], .n_head = config[2],
                       .n_embd = config[3]});
  model.to(kFloat64);
  model.load_state_dict(fixture_state(init, model));
  // One tensor behind both names: the head reads the embedding the fixture gave.
  TG_REQUIRE_CLOSE(model.lm_head.weight, init.at("lm_head.weight"), 0.0);
  REQUIRE(model.lm_head.weight.is_same(model.wte.weight));

  const char_gpt::OptimizerConfig c{.lr = init.scalar("lr"), .min_lr = init.scalar("min_lr"),
                                    .warmup_iters = config[6], .lr_decay_iters = config[7],
                                    .weight_decay = init.scalar("weight_decay"), .grad_clip = init.scalar("grad_clip")};
  const auto optimizer = char_gpt::make_optimizer(model, c);
  // Decay on the 4 matrices of each layer (in_proj, out_proj, linear1, linear2); the rest none.
  REQUIRE(optimizer->group_parameters(0).size() == static_cast<size_t>(4 * config[1]));
  REQUIRE(optimizer->options(0).weight_decay == c.weight_decay);
  REQUIRE(optimizer->options(1).weight_decay == 0.0);

  const Tensor x = int_tensor(init.ints("x"), {config[5], config[4]});
  const Tensor y = int_tensor(init.ints("y"), {config[5], config[4]});
  const auto& steps = fixture("char_gpt.txt", "steps");
  const std::vector<double> losses = steps.at("losses").to_vector<double>();
  const std::vector<double> lrs = steps.at("lrs").to_vector<double>();
  const std::vector<double> norms = steps.at("grad_norms").to_vector<double>();
  for (int64_t it = 0; it < config[7]; ++it) {
    INFO("step " << it);
    const char_gpt::StepResult step = char_gpt::train_step(model, *optimizer, c, it, x, y);
    CHECK(optimizer->lr(0) == Approx(lrs[static_cast<size_t>(it)]).epsilon(1e-15));
    CHECK(step.loss == Approx(losses[static_cast<size_t>(it)]).epsilon(1e-12));
    CHECK(step.grad_norm == Approx(norms[static_cast<size_t>(it)]).epsilon(1e-10));
    if (it + 1 == 1 || it + 1 == 10 || it + 1 == 20) {
      const auto& snapshot = fixture("char_gpt.txt", "step" + std::to_string(it + 1));
      for (const auto& [name, parameter] : model.named_parameters()) {
        INFO(name);
        TG_REQUIRE_CLOSE(parameter, snapshot.at(name), 1e-10);
      }
    }
  }
}

TEST_CASE("char_gpt's GPT-2 initialisation draws the twin's numbers", "[examples][char_gpt][fixtures]") {
  // The twin: torch.manual_seed(0), the float32 model built (its constructors draw PyTorch's
  // default initialisation), init_gpt2, then converted to float64.
  const auto& init = fixture("char_gpt.txt", "init");
  const std::vector<int64_t>& config = init.ints("config");
  manual_seed(0);
  char_gpt::GPT model({.vocab_size = config[0], .block_size = config[4], .n_layer = config[1], .n_head = config[2],
                       .n_embd = config[3]});
  char_gpt::init_gpt2(model);
  model.to(kFloat64);
  for (const auto& [name, parameter] : model.named_parameters()) {
    INFO(name);
    TG_REQUIRE_CLOSE(parameter, init.at(name), 0.0);
  }
}
