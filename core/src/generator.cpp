// tg::Generator: the 32-bit Mersenne Twister MT19937 (Matsumoto & Nishimura, 1998), with its state
// kept as a plain GeneratorState so that it can be saved and restored exactly.
#include "tapegrad/generator.hpp"

#include <algorithm>
#include <type_traits>

#include "random_draws.hpp"
#include "tapegrad/error.hpp"

namespace tg {

static_assert(std::is_trivially_copyable_v<GeneratorState>, "GeneratorState is saved as raw bytes");

namespace {

constexpr int kWords = GeneratorState::kWords;
constexpr int kShift = 397;  // the twist combines word i with word i + 397
constexpr uint32_t kTwistMatrix = 0x9908b0dfU;

// MT19937's initialisation from a 32-bit seed: w[0] = seed, w[i] = 1812433253·(w[i−1] ⊕ (w[i−1] >> 30)) + i.
GeneratorState seeded_state(uint64_t seed) {
  GeneratorState state;
  state.seed = seed;
  state.words[0] = static_cast<uint32_t>(seed & 0xffffffffU);  // PyTorch seeds with the low 32 bits
  for (int i = 1; i < kWords; ++i) {
    const uint32_t previous = state.words[i - 1];
    state.words[i] = 1812433253U * (previous ^ (previous >> 30)) + static_cast<uint32_t>(i);
  }
  state.index = kWords;  // the first draw twists
  return state;
}

// The twist: each word becomes the next element of the linear recurrence over GF(2).
//   w[i] = w[(i + 397) mod 624] ^ twist(w[i], w[(i + 1) mod 624])
// in three stretches, so that no index needs a modulo and the first two loops vectorise (bulk
// draws, as Dropout's, spend a third of their time here otherwise).
void regenerate(GeneratorState& state) {
  auto& w = state.words;
  const auto twisted = [&](int i, int next, int ahead) {
    const uint32_t y = (w[i] & 0x80000000U) | (w[next] & 0x7fffffffU);
    return w[ahead] ^ (y >> 1) ^ ((y & 1U) ? kTwistMatrix : 0U);
  };
  int i = 0;
  for (; i < kWords - kShift; ++i) w[i] = twisted(i, i + 1, i + kShift);
  for (; i < kWords - 1; ++i) w[i] = twisted(i, i + 1, i + kShift - kWords);
  w[i] = twisted(i, 0, i + kShift - kWords);
  state.index = 0;
}

// A tempered word: spreads the state's bits so that every output bit is equidistributed.
uint32_t tempered(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

}  // namespace

namespace detail {

uint32_t next_word(GeneratorState& state) {
  if (state.index >= kWords) regenerate(state);
  return tempered(state.words[state.index++]);
}

void next_words(GeneratorState& state, uint32_t* out, int64_t n) {
  while (n > 0) {
    if (state.index >= kWords) regenerate(state);
    const int64_t count = std::min<int64_t>(n, kWords - state.index);
    const uint32_t* from = state.words.data() + state.index;
    for (int64_t k = 0; k < count; ++k) out[k] = tempered(from[k]);
    state.index += static_cast<uint32_t>(count);
    out += count;
    n -= count;
  }
}

}  // namespace detail

Generator::Generator(uint64_t seed) : state_(seeded_state(seed)) {}

Generator::Generator(const Generator& other) : state_(other.get_state()) {}

Generator& Generator::operator=(const Generator& other) {
  if (this != &other) set_state(other.get_state());
  return *this;
}

void Generator::manual_seed(uint64_t seed) {
  GeneratorState state = seeded_state(seed);  // outside the lock: 624 multiplications
  std::lock_guard lock(mutex_);
  state_ = state;  // also drops a cached normal, as torch.manual_seed does
}

uint64_t Generator::initial_seed() const {
  std::lock_guard lock(mutex_);
  return state_.seed;
}

GeneratorState Generator::get_state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void Generator::set_state(const GeneratorState& state) {
  check(state.index <= static_cast<uint32_t>(kWords), "Generator::set_state", "expected a word index in [0, ",
        kWords, "], got ", state.index);
  std::lock_guard lock(mutex_);
  state_ = state;
}

uint32_t Generator::random() { return detail::LockedGenerator(this).random(); }

uint64_t Generator::random64() { return detail::LockedGenerator(this).random64(); }

Generator& default_generator() {
  static Generator instance;
  return instance;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace tg
