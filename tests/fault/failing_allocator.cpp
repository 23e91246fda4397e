#include "failing_allocator.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace tg::fault {
namespace {

std::atomic<bool> counting{false};
std::atomic<int64_t> count{0};
std::atomic<int64_t> fail_at{0};
std::atomic<bool> has_failed{false};
std::atomic<size_t> size_limit{0};

// True when this allocation is the one chosen to fail, or larger than the limit.
bool should_fail(size_t size) {
  const size_t limit = size_limit.load(std::memory_order_relaxed);
  if (limit != 0 && size > limit) return true;
  if (!counting.load(std::memory_order_relaxed)) return false;
  const int64_t n = count.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n != fail_at.load(std::memory_order_relaxed)) return false;
  has_failed.store(true, std::memory_order_relaxed);
  return true;
}

}  // namespace

void fail_allocation(int64_t k) {
  count = 0;
  has_failed = false;
  fail_at = k;
  counting = true;
}

void stop() { counting = false; }

int64_t allocations() { return count.load(); }

bool failed() { return has_failed.load(); }

void refuse_allocations_over(size_t bytes) { size_limit = bytes; }

}  // namespace tg::fault

// The replaceable forms that allocate, on malloc and aligned_alloc; every operator delete calls free.
void* operator new(std::size_t size) {
  if (tg::fault::should_fail(size)) throw std::bad_alloc();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

void* operator new(std::size_t size, std::align_val_t alignment) {
  if (tg::fault::should_fail(size)) throw std::bad_alloc();
  const auto align = static_cast<std::size_t>(alignment);
  const std::size_t rounded = (size + align - 1) / align * align;  // aligned_alloc wants a multiple
  if (void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded)) return p;
  throw std::bad_alloc();
}

// Every other form is replaced too, so that each allocation is counted and every block is freed
// by the allocator that made it (AddressSanitizer reports a block made by its own operator new
// and freed by free).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  try {
    return operator new(size, alignment);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new[](std::size_t size, std::align_val_t alignment) { return operator new(size, alignment); }
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t& tag) noexcept {
  return operator new(size, alignment, tag);
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
