// The cache of large tensor buffers: free lists per size class behind one mutex.
//
// Size classes are 8 steps per power of two (a block is at most 12.5% larger than asked), so
// tensors of nearby sizes share blocks. Allocation and release are a few per training step, so
// one mutex costs nothing measurable.
#include "memory/block_cache.hpp"
#include "memory/small_block_pool.hpp"

#include <sys/mman.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "tapegrad/memory.hpp"

#if defined(TG_ADDRESS_SANITIZER)
#include <sanitizer/asan_interface.h>
// An idle block is poisoned, so that AddressSanitizer still reports a use after free of a
// tensor's buffer, which the cache would otherwise hide.
#define TG_POISON_IDLE(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TG_UNPOISON_IDLE(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TG_POISON_IDLE(p, n) ((void)(p), (void)(n))
#define TG_UNPOISON_IDLE(p, n) ((void)(p), (void)(n))
#endif

namespace tg {
namespace detail {
namespace {

constexpr std::align_val_t kBlockAlignment{64};
constexpr size_t kMaxIdleBytes = size_t{1} << 30;  // tapegrad/memory.hpp documents this limit
constexpr int kStepsPerDoubling = 8;

// Asks the kernel to back the 2 MiB-aligned interior of a new block with transparent huge pages, as
// it does only on request in its default "madvise" mode (Debian's). Why: a large tensor is written
// once right after allocation, and each 4 KiB page of it faults in separately (a 188 MB data set:
// ~46,000 faults per copy, against ~100 with 2 MiB pages). Advice only: where it is refused or
// unsupported, nothing changes. Blocks are never returned to the kernel while cached, so a huge
// page split by a later partial unmap does not happen.
void advise_huge_pages(void* data, size_t bytes) {
#if defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data, (void)bytes;
#endif
}

// The smallest class >= nbytes: a multiple of 1/8 of the power of two just below nbytes.
size_t size_class(size_t nbytes) {
  const size_t step = std::bit_floor(nbytes) / kStepsPerDoubling;
  return (nbytes + step - 1) / step * step;
}

class BlockCache {
 public:
  CachedBlock acquire(size_t nbytes) {
    const size_t capacity = size_class(nbytes);
    {
      std::lock_guard lock(mutex_);
      auto it = idle_.find(capacity);
      if (it != idle_.end() && !it->second.empty()) {
        void* data = it->second.back();
        it->second.pop_back();
        idle_bytes_ -= capacity;
        TG_UNPOISON_IDLE(data, capacity);
        return {data, capacity};
      }
    }
    // Through operator new, not aligned_alloc, so that a replaced operator new (the
    // fault-injection tests) sees these blocks too.
    void* data = ::operator new(capacity, kBlockAlignment, std::nothrow);
    if (data == nullptr) {
      // Memory is short: give back what is idle and try once more.
      release_all();
      data = ::operator new(capacity, kBlockAlignment, std::nothrow);
      // The nothrow form and an explicit throw: under AddressSanitizer the throwing form aborts
      // on a size beyond its limit instead of throwing.
      if (data == nullptr) throw std::bad_alloc();
    }
    advise_huge_pages(data, capacity);
    return {data, capacity};
  }

  void release(CachedBlock block) noexcept {
    {
      std::lock_guard lock(mutex_);
      if (idle_bytes_ + block.capacity <= kMaxIdleBytes) {
        try {
          idle_[block.capacity].push_back(block.data);
          idle_bytes_ += block.capacity;
          TG_POISON_IDLE(block.data, block.capacity);
          return;
        } catch (const std::bad_alloc&) {
          // No room to remember the block: free it below.
        }
      }
    }
    ::operator delete(block.data, kBlockAlignment);
  }

  void release_all() noexcept {
    std::unordered_map<size_t, std::vector<void*>> idle;
    {
      std::lock_guard lock(mutex_);
      idle.swap(idle_);
      idle_bytes_ = 0;
    }
    for (auto& [capacity, blocks] : idle)
      for (void* data : blocks) {
        TG_UNPOISON_IDLE(data, capacity);
        ::operator delete(data, kBlockAlignment);
      }
  }

  size_t idle_bytes() {
    std::lock_guard lock(mutex_);
    return idle_bytes_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> idle_;  // size class -> idle blocks of it
  size_t idle_bytes_ = 0;
};

// Never destroyed: tensors in other static objects may die after this file's statics, and their
// buffers must still find the cache (the OS reclaims the idle blocks at exit).
BlockCache& cache() {
  static BlockCache* instance = new BlockCache;
  return *instance;
}

}  // namespace

CachedBlock acquire_cached_block(size_t nbytes) { return cache().acquire(nbytes); }

void release_cached_block(CachedBlock block) noexcept { cache().release(block); }

}  // namespace detail

size_t cached_memory_bytes() { return detail::cache().idle_bytes(); }

void empty_cache() {
  detail::cache().release_all();
  detail::release_idle_small_blocks();  // and this thread's recycled small blocks
}

}  // namespace tg
