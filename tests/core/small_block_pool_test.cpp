// The per-thread recycling of small blocks (core/src/memory/small_block_pool.cpp): a freed block
// is reused by the next request of its size class on the same thread, blocks freed on another
// thread are safe, and tensors made from recycled blocks
// never carry another tensor's values or autograd state.
#include <thread>
#include <vector>

#include "core_test_util.hpp"
#include "memory/small_block_pool.hpp"

using tg::Tensor;
namespace detail = tg::detail;

#if !defined(TG_ADDRESS_SANITIZER)  // under ASan every block goes to operator new and delete
TEST_CASE("small block pool: a freed block is reused by the next request of its size class", "[core][memory]") {
  detail::release_idle_small_blocks();
  void* first = detail::allocate_small_block(100);
  detail::release_small_block(first, 100);
  // 100 and 120 bytes share the 128-byte class (classes are 32 bytes apart).
  void* again = detail::allocate_small_block(120);
  REQUIRE(again == first);
  // A request of another class does not take it.
  detail::release_small_block(again, 120);
  void* other = detail::allocate_small_block(200);
  REQUIRE(other != first);
  detail::release_small_block(other, 200);
}

TEST_CASE("small block pool: blocks too large for it come and go through operator new", "[core][memory]") {
  void* large = detail::allocate_small_block(detail::kPooledBlockMaxBytes + 1);
  REQUIRE(large != nullptr);
  detail::release_small_block(large, detail::kPooledBlockMaxBytes + 1);
}
#endif

TEST_CASE("small block pool: a tensor on a recycled block starts clean", "[core][memory]") {
  {
    Tensor leaf = tg::full({2, 3}, 5.0).requires_grad_();
    Tensor y = leaf * 2.0;
    y.sum().backward();
    REQUIRE(leaf.grad().defined());
  }
  // The blocks of leaf, y and their nodes are idle now; new tensors of the same sizes take them.
  Tensor fresh = tg::zeros({2, 3});
  CHECK_FALSE(fresh.requires_grad());
  CHECK(fresh.is_leaf());
  CHECK_FALSE(fresh.grad().defined());
  CHECK(fresh.grad_fn_name() == nullptr);
  for (float value : fresh.to_vector<float>()) CHECK(value == 0.0f);
  Tensor product = fresh * 3.0;
  CHECK_FALSE(product.requires_grad());
}

TEST_CASE("small block pool: tensors and graphs made on one thread and freed on another", "[core][memory]") {
  constexpr int kRounds = 2000;
  const int64_t live_before = tg::autograd::live_nodes();
  std::vector<Tensor> made(kRounds);
  Tensor weight = tg::ones({4}).requires_grad_();
  std::thread producer([&] {
    for (int i = 0; i < kRounds; ++i) made[i] = weight * static_cast<double>(i);  // each with a node
  });
  producer.join();
  // The producer's thread has ended (its idle blocks freed); this thread frees its tensors and
  // nodes into its own lists and reuses them.
  std::thread consumer([&] {
    for (int i = 0; i < kRounds; ++i) {
      made[i].sum().backward();
      made[i] = Tensor();
    }
  });
  consumer.join();
  // sum over i of i, per element
  const double expected = kRounds * (kRounds - 1) / 2.0;
  for (float value : weight.grad().to_vector<float>()) CHECK(value == Approx(expected).epsilon(1e-6));
  REQUIRE(tg::autograd::live_nodes() == live_before);
}
