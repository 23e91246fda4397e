// The process-wide thread count, as oneTBB's global_control of the allowed parallelism, and the
// one oneTBB loop that every parallel kernel runs through (parallel_for.hpp says why).
#include "tapegrad/parallel.hpp"

#include <memory>
#include <mutex>

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include "ops/matmul_precision.hpp"
#include "parallel_for.hpp"
#include "tapegrad/error.hpp"

namespace tg {

namespace {
std::mutex control_mutex;
std::unique_ptr<tbb::global_control> control;  // absent: oneTBB's default (all cores)
}  // namespace

void set_num_threads(int num_threads) {
  check(num_threads >= 1, "set_num_threads", "expected at least 1 thread, got ", num_threads);
  std::lock_guard lock(control_mutex);
  control.reset();  // only one global_control per parameter should be alive to set it exactly
  control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  static_cast<size_t>(num_threads));
}

int get_num_threads() {
  return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

namespace detail {

void run_chunks_in_parallel(int64_t chunks, const void* context,
                            void (*run_chunks)(const void* context, int64_t first, int64_t last)) {
  // One chunk per task (simple_partitioner, grain 1): the chunks are already sized to the work.
  // A product of bfloat16 tensors is one on every thread that runs a part of it.
  const Bf16Products bf16_products = forced_bf16_products();
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, chunks, 1),
      [&](const tbb::blocked_range<int64_t>& range) {
        const ForceBf16Products products(bf16_products);
        run_chunks(context, range.begin(), range.end());
      },
      tbb::simple_partitioner());
}

}  // namespace detail

}  // namespace tg
