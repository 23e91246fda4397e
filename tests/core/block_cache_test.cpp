// The cache of large tensor buffers (core/src/memory/block_cache.cpp): a dead tensor's buffer is
// reused by the next tensor of its size class, never hands out dirty values as zeros, stays within
// its 1 GiB limit, gives everything back on empty_cache(), and is safe from several threads.
#include <thread>
#include <vector>

#include "core_test_util.hpp"

using tg::Tensor;

namespace {
constexpr int64_t kLarge = int64_t{1} << 18;  // float32 elements: 1 MiB, well above the 256 KiB threshold
constexpr size_t kLargeBytes = kLarge * sizeof(float);
}  // namespace

TEST_CASE("block cache: a dead tensor's buffer is reused by the next tensor of its size", "[core][memory]") {
  tg::empty_cache();
  REQUIRE(tg::cached_memory_bytes() == 0);
  const float* first = nullptr;
  {
    Tensor t = tg::empty({kLarge});
    first = t.data<float>();
    REQUIRE(tg::cached_memory_bytes() == 0);  // in use, not idle
  }
  REQUIRE(tg::cached_memory_bytes() == kLargeBytes);  // 2^20 bytes is its own size class
  // A slightly smaller tensor falls in the same class (classes are 1/8 of a power of two apart).
  Tensor again = tg::empty({kLarge - 1000});
  REQUIRE(again.data<float>() == first);
  REQUIRE(tg::cached_memory_bytes() == 0);
  // A larger class does not take a smaller block.
  Tensor other = tg::empty({kLarge * 2});
  REQUIRE(other.data<float>() != first);
}

TEST_CASE("block cache: small tensors do not go through it", "[core][memory]") {
  tg::empty_cache();
  { Tensor small = tg::empty({1000}); }
  REQUIRE(tg::cached_memory_bytes() == 0);
}

TEST_CASE("block cache: a reused buffer never leaks old values into a new tensor", "[core][memory]") {
  tg::empty_cache();
  const float* buffer = nullptr;
  {
    Tensor dirty = tg::full({kLarge}, 7.0);
    buffer = dirty.data<float>();
  }
  Tensor z = tg::zeros({kLarge});
  REQUIRE(z.data<float>() == buffer);  // the dirty block was reused...
  for (int64_t i = 0; i < kLarge; ++i) REQUIRE(z.data<float>()[i] == 0.0f);  // ...and zeroed
  Tensor a = tg::ones({kLarge});
  REQUIRE(tg::cached_memory_bytes() == 0);
  Tensor sum = z + a;  // an op's output comes from the cache too and holds the op's result
  for (int64_t i = 0; i < kLarge; i += 997) REQUIRE(sum.data<float>()[i] == 1.0f);
}

TEST_CASE("block cache: idle buffers stay within 1 GiB and empty_cache returns them", "[core][memory]") {
  tg::empty_cache();
  constexpr int64_t kQuarterGiB = int64_t{1} << 26;  // float32 elements: 256 MiB, never touched
  {
    std::vector<Tensor> held;
    for (int i = 0; i < 6; ++i) held.push_back(tg::empty({kQuarterGiB}));
  }  // 1.5 GiB dies at once
  REQUIRE(tg::cached_memory_bytes() == size_t{1} << 30);  // four kept, two freed
  tg::empty_cache();
  REQUIRE(tg::cached_memory_bytes() == 0);
}

TEST_CASE("block cache: concurrent allocation from several threads gives each tensor its own buffer",
          "[core][memory][threads]") {
  tg::empty_cache();
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &wrong] {
      for (int round = 0; round < kRounds; ++round) {
        // Sizes from two classes, values that identify the thread and round.
        const double value = t * 1000 + round;
        Tensor a = tg::full({kLarge + (round % 2) * kLarge}, value);
        Tensor b = a * 2.0;
        for (int64_t i = 0; i < a.numel(); i += 4093)
          wrong[t] += a.data<float>()[i] != static_cast<float>(value) || b.data<float>()[i] != static_cast<float>(2 * value);
      }
    });
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) REQUIRE(wrong[t] == 0);
}
