// Small blocks recycled per thread: the TensorImpls, small Storages and tape nodes that every
// recorded op makes and a backward pass frees again.
//
// Why: a tiny training step makes dozens of heap allocations, and there malloc and free, with
// their locks and bookkeeping, are a large part of the step. A block freed here waits on its
// thread's free list of its size class, and the next request of that class on that thread pops
// it: a few instructions, no lock.
// A block may be freed on another thread than the one that took it: it is plain operator new
// memory, so it simply joins the freeing thread's list.
//
// Under AddressSanitizer every block goes straight to operator new and delete, so that a use after
// free is still reported. Private to the library.
#pragma once

#include <cstddef>
#include <new>

// Defined when AddressSanitizer instruments this build: GCC says so with __SANITIZE_ADDRESS__,
// Clang (14 at least) only through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define TG_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_ADDRESS_SANITIZER 1
#endif
#endif

namespace tg::detail {

// Requests above this size go to operator new and delete directly.
inline constexpr size_t kPooledBlockMaxBytes = 1024;

// A block of at least `bytes` bytes, aligned to __STDCPP_DEFAULT_NEW_ALIGNMENT__: a recycled one
// of its size class or a new one. std::bad_alloc when memory runs out (through operator new, so
// that a replaced operator new, as in the fault-injection tests, sees every new block).
void* allocate_small_block(size_t bytes);

// Gives back a block from allocate_small_block of the same `bytes`.
void release_small_block(void* block, size_t bytes) noexcept;

// Frees the blocks waiting on this thread's free lists (tg::empty_cache calls it).
void release_idle_small_blocks() noexcept;

// The allocator for std::allocate_shared of the pooled objects: the control block and the object
// become one pooled block.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_small_block(n * sizeof(T))); }
  void deallocate(T* block, size_t n) noexcept { release_small_block(block, n * sizeof(T)); }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

}  // namespace tg::detail
