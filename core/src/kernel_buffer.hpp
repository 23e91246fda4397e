// A heap array for a hot kernel's per-channel or per-chunk scratch, compiled per vector level
// (its namespace is the level's, cpu/isa_namespace.hpp). Not std::vector: its members would be
// weak symbols compiled with this level's instructions, which the linker may hand to every level's
// callers (tests/core/check_isa_objects.cmake checks that no kernel object exports one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cpu/isa_namespace.hpp"

namespace tg::detail {
inline namespace TG_ISA_HELPERS {

// n elements of U, uninitialised unless `zeroed`.
template <typename U>
class KernelBuffer {
 public:
  explicit KernelBuffer(int64_t n, bool zeroed = false)
      : data_(std::make_unique_for_overwrite<U[]>(static_cast<size_t>(n > 0 ? n : 1))) {
    if (zeroed)
      for (int64_t i = 0; i < n; ++i) data_[static_cast<size_t>(i)] = U{};
  }
  U* data() const { return data_.get(); }
  U& operator[](size_t i) const { return data_[i]; }

 private:
  std::unique_ptr<U[]> data_;
};

}  // namespace TG_ISA_HELPERS
}  // namespace tg::detail
