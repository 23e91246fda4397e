// Per-thread free lists of small blocks, one per size class of 32 bytes.
//
// The lists live in trivially destructible thread_local storage, so they stay usable while the
// thread's other thread_local objects are destroyed (a tensor may die in one of them); a separate
// thread_local drains them when the thread ends, after which blocks go straight back to operator
// delete.
#include "memory/small_block_pool.hpp"

#include <array>
#include <cstdint>

namespace tg::detail {
namespace {

#if !defined(TG_ADDRESS_SANITIZER)
constexpr size_t kClassBytes = 32;
constexpr size_t kClassCount = kPooledBlockMaxBytes / kClassBytes;
// At most this many idle blocks per class and thread (at most ~2 MiB per thread in all): enough
// for the tensors and nodes of a small step, without holding on to a burst's worth.
constexpr uint32_t kMaxIdlePerClass = 128;

struct IdleBlock {
  IdleBlock* next;
};

struct FreeList {
  IdleBlock* head = nullptr;
  uint32_t count = 0;
};

thread_local std::array<FreeList, kClassCount> free_lists;
thread_local bool drain_registered = false;
thread_local bool thread_ending = false;

// Class c holds blocks of (c + 1) * kClassBytes bytes.
size_t class_of(size_t bytes) { return (bytes + kClassBytes - 1) / kClassBytes - 1; }

void drain_free_lists() noexcept {
  for (FreeList& list : free_lists) {
    while (list.head != nullptr) {
      IdleBlock* block = list.head;
      list.head = block->next;
      ::operator delete(block);
    }
    list.count = 0;
  }
}

struct DrainAtThreadEnd {
  bool armed = false;
  ~DrainAtThreadEnd() {
    thread_ending = true;
    drain_free_lists();
  }
};
thread_local DrainAtThreadEnd drain_at_thread_end;
#endif

void* new_block(size_t bytes) {
  // The nothrow form and an explicit throw: under AddressSanitizer the throwing one aborts on a
  // size beyond its limit instead of throwing.
  void* block = ::operator new(bytes, std::nothrow);
  if (block == nullptr) throw std::bad_alloc();
  return block;
}

}  // namespace

#if defined(TG_ADDRESS_SANITIZER)

void* allocate_small_block(size_t bytes) { return new_block(bytes); }
void release_small_block(void* block, size_t) noexcept { ::operator delete(block); }
void release_idle_small_blocks() noexcept {}

#else

void* allocate_small_block(size_t bytes) {
  if (bytes == 0 || bytes > kPooledBlockMaxBytes) return new_block(bytes == 0 ? 1 : bytes);
  const size_t size_class = class_of(bytes);
  FreeList& list = free_lists[size_class];
  if (IdleBlock* block = list.head) {
    list.head = block->next;
    --list.count;
    return block;
  }
  // A new block gets its class's full size, so that any request of the class can reuse it.
  return new_block((size_class + 1) * kClassBytes);
}

void release_small_block(void* block, size_t bytes) noexcept {
  if (bytes == 0 || bytes > kPooledBlockMaxBytes || thread_ending) {
    ::operator delete(block);
    return;
  }
  FreeList& list = free_lists[class_of(bytes)];
  if (list.count == kMaxIdlePerClass) {
    ::operator delete(block);
    return;
  }
  if (!drain_registered) {
    // First use on this thread: touching the drainer registers its destructor for thread exit.
    drain_at_thread_end.armed = true;
    drain_registered = true;
  }
  list.head = new (block) IdleBlock{list.head};
  ++list.count;
}

void release_idle_small_blocks() noexcept { drain_free_lists(); }

#endif

}  // namespace tg::detail
