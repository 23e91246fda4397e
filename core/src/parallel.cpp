// The process-wide thread count, as oneTBB's global_control of the allowed parallelism.
#include "tapegrad/parallel.hpp"

#include <memory>
#include <mutex>

#include <tbb/global_control.h>

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

}  // namespace tg
