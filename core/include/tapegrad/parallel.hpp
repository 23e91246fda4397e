/// @file
/// Threads. All of tapegrad's parallel work runs on oneTBB; Eigen's own threading is off.
///
/// Work is split into chunks whose boundaries depend only on the problem size, and every
/// reduction adds its per-chunk partial results in chunk order, so results are bitwise identical
/// for any number of threads.
#pragma once

namespace tg {

void set_num_threads(int num_threads);  ///< >= 1; process-wide, like torch::set_num_threads
int get_num_threads();  ///< the number of threads tapegrad's parallel work uses

}  // namespace tg
