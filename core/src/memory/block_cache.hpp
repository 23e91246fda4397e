// Large tensor buffers, kept for reuse when their tensor dies instead of going back to the OS.
//
// Why: glibc serves blocks this large with mmap and unmaps them on free, so a training step that
// allocates the same activations and gradients every iteration page-faults all of them in again,
// one fault per 4 KiB page. Here a freed block waits in a free list of its size class and the
// next tensor of that class takes it, pages already mapped.
// Private to the library; tg::empty_cache() (tapegrad/memory.hpp) gives the idle blocks back.
#pragma once

#include <cstddef>

namespace tg::detail {

// Requests of at least this many bytes go through the cache; smaller ones stay with malloc,
// whose own bins already reuse them without a system call.
inline constexpr size_t kCachedBlockMinBytes = size_t{256} << 10;

struct CachedBlock {
  void* data = nullptr;
  size_t capacity = 0;  // the block's size class: at least the bytes asked for
};

// A 64-byte aligned block of at least `nbytes` (>= kCachedBlockMinBytes) bytes, uninitialised:
// an idle block of the same size class if there is one, else a new one. std::bad_alloc when
// memory runs out.
CachedBlock acquire_cached_block(size_t nbytes);

// Gives a block from acquire_cached_block back: it waits for reuse, or is freed when the idle
// blocks would exceed the cache's limit.
void release_cached_block(CachedBlock block) noexcept;

}  // namespace tg::detail
