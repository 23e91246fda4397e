/// @file
/// tg::Generator — PyTorch's CPU random number generator: the same 32-bit Mersenne Twister, seeded
/// the same way, so that tapegrad's random functions draw PyTorch's numbers for the same seed.
///
/// @code
///   tg::manual_seed(0);                  // the default generator, like torch.manual_seed(0)
///   tg::Tensor a = tg::randn({4, 4});    // torch.randn(4, 4) after torch.manual_seed(0)
/// @endcode
///
/// @code
///   tg::Generator gen(42);               // torch.Generator().manual_seed(42)
///   tg::Tensor b = tg::rand({3}, gen);   // torch.rand(3, generator=gen)
///   const tg::GeneratorState saved = gen.get_state();
///   tg::Tensor c = tg::rand({3}, gen);
///   gen.set_state(saved);                // the next tg::rand({3}, gen) equals c again
/// @endcode
///
/// Every draw locks the generator, so one generator may be shared between threads; a tensor's
/// values are drawn in row-major order whatever the number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace tg {

namespace detail {
class LockedGenerator;
}

/// Everything a generator's future draws depend on, as a plain value: copy it, compare it, store
/// its bytes in a checkpoint (it is trivially copyable) and hand it back to set_state.
struct GeneratorState {
  static constexpr int kWords = 624;  ///< the Mersenne Twister's state: 624 words of 32 bits
  uint64_t seed = 0;                  ///< the seed it was last seeded with (initial_seed())
  std::array<uint32_t, kWords> words{};  ///< the twister's state words
  /// The next word to hand out; kWords means the block is used up and is regenerated first.
  uint32_t index = kWords;
  /// The second normal of the last Box–Muller pair drawn one at a time (tensors of fewer than
  /// 16 elements), returned by the next such draw, as PyTorch caches it.
  bool has_cached_normal = false;
  double cached_normal = 0.0;  ///< that second normal, when has_cached_normal

  bool operator==(const GeneratorState&) const = default;  ///< equal states draw equal numbers
};

/// PyTorch's CPU random number generator (a 32-bit Mersenne Twister), seeded as PyTorch seeds it.
class Generator {
 public:
  /// PyTorch's default seed, so that an unseeded program draws what an unseeded torch one does.
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;

  explicit Generator(uint64_t seed = kDefaultSeed);  ///< seeded as by manual_seed(seed)
  Generator(const Generator& other);  ///< an independent copy of other's state
  Generator& operator=(const Generator& other);  ///< takes a copy of other's state

  /// Restarts the sequence: torch.Generator.manual_seed. Only the low 32 bits seed the twister
  /// (as in PyTorch); initial_seed() returns all 64.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const;  ///< the seed last given to manual_seed (or the constructor)

  GeneratorState get_state() const;  ///< everything its future draws depend on
  void set_state(const GeneratorState& state);  ///< tg::Error if the state is not one a generator can be in

  /// The raw draws, for code that builds its own distributions: one 32-bit word, and 64 bits from
  /// two words (the first is the high half), as PyTorch's random() and random64().
  uint32_t random();
  uint64_t random64();  ///< 64 bits from two words, the first the high half

 private:
  // tapegrad's random functions hold the lock over a whole fill (core/src/random_draws.hpp), so
  // that a tensor's values are one uninterrupted sequence even when threads share the generator.
  friend class detail::LockedGenerator;

  mutable std::mutex mutex_;
  GeneratorState state_;
};

/// The generator behind tg::manual_seed and every random function called without one.
Generator& default_generator();

/// Seeds the default generator: torch.manual_seed(seed).
void manual_seed(uint64_t seed);

}  // namespace tg
