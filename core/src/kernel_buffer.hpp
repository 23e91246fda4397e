// A heap array for a hot kernel's per-channel or per-chunk scratch, compiled per vector level
// (its namespace is the level's, cpu/isa_namespace.hpp). Not std::vector: its members would be
// weak symbols compiled with this level's instructions, which the linker may hand to every level's
// callers (tests/core/check_isa_objects.cmake checks that no kernel object exports one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "cpu/isa_namespace.hpp"
#include "memory/block_cache.hpp"

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// n elements of U, uninitialised unless `zeroed`. A large buffer (from kCachedBlockMinBytes) is a
// block of the buffer cache (memory/block_cache.hpp), as a large tensor is: a kernel that takes
// one per call (a convolution's weight-gradient partial sums, 2 MiB and more) then reuses mapped
// pages instead of faulting fresh ones in on every call (a tenth of a convolution's time).
template <typename U>
class KernelBuffer {
  static_assert(std::is_trivially_default_constructible_v<U> && std::is_trivially_destructible_v<U>,
                "KernelBuffer holds plain values: the cache's blocks are raw bytes");

 public:
  explicit KernelBuffer(int64_t n, bool zeroed = false) {
    const size_t count = static_cast<size_t>(n > 0 ? n : 1);
    if (count * sizeof(U) >= kCachedBlockMinBytes) {
      block_ = acquire_cached_block(count * sizeof(U));
      data_ = static_cast<U*>(block_.data);
    } else {
      heap_ = std::make_unique_for_overwrite<U[]>(count);
      data_ = heap_.get();
    }
    if (zeroed)
      for (int64_t i = 0; i < n; ++i) data_[static_cast<size_t>(i)] = U{};
  }
  KernelBuffer(KernelBuffer&& other) noexcept
      : heap_(std::move(other.heap_)), block_(std::exchange(other.block_, {})), data_(std::exchange(other.data_, nullptr)) {}
  KernelBuffer& operator=(KernelBuffer&& other) noexcept {
    if (this != &other) {
      release();
      heap_ = std::move(other.heap_);
      block_ = std::exchange(other.block_, {});
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  KernelBuffer(const KernelBuffer&) = delete;
  KernelBuffer& operator=(const KernelBuffer&) = delete;
  ~KernelBuffer() { release(); }

  U* data() const { return data_; }
  U& operator[](size_t i) const { return data_[i]; }

 private:
  void release() noexcept {
    if (block_.data != nullptr) release_cached_block(std::exchange(block_, {}));
  }

  std::unique_ptr<U[]> heap_;
  CachedBlock block_;
  U* data_ = nullptr;
};

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail
