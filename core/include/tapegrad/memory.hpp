/// @file
/// Memory held for reuse. Tensor buffers of 256 KiB and more are not returned to the OS when their
/// tensor dies: they wait to be reused by the next tensor of their size class, so a training loop
/// that allocates the same shapes every step stops page-faulting them in (like PyTorch's caching
/// allocator on CUDA). At most 1 GiB is held idle this way; beyond that, freed buffers go back to
/// the OS at once.
#pragma once

#include <cstddef>

namespace tg {

/// Bytes of idle buffers held for reuse now (like torch.cuda.memory_reserved() minus the memory in use).
size_t cached_memory_bytes();

/// Returns every idle buffer to the OS (like torch.cuda.empty_cache()). Thread-safe.
void empty_cache();

}  // namespace tg
