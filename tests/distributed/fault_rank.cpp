// A job in which one rank fails while the others wait for it in a collective:
//   fault_rank exit   rank 1 calls std::exit(3) (a crash without MPI_Finalize)
//   fault_rank throw  rank 1 lets a tg::Error escape main (Context's terminate handler: MPI_Abort)
//   fault_rank exit_async, throw_async   the same while the healthy ranks wait in a collective
//                                       that tg::dist's communication thread runs (all_reduce_async
//                                       of a tensor too large to travel with the agreement check)
// run_fault_test.cmake checks that mpirun then ends within its timeout, with a non-zero status.
#include <cstdlib>
#include <iostream>
#include <string>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

int main(int argc, char** argv) {
  tg::dist::Context context = tg::dist::init(argc, argv);
  std::string mode = argc > 1 ? argv[1] : "exit";
  const bool async = mode.ends_with("_async");
  if (async) mode.resize(mode.size() - 6);
  tg::Tensor t = tg::ones({async ? 100000 : 4});
  for (int step = 0;; ++step) {  // the healthy ranks never leave this loop on their own
    if (step == 10 && tg::dist::rank() == 1) {
      if (mode == "exit") std::exit(3);
      throw tg::Error("fault_rank: rank 1 fails on purpose at step 10");
    }
    if (async) {
      tg::dist::all_reduce_async(t, tg::dist::ReduceOp::Max).wait();
    } else {
      tg::dist::all_reduce(t, tg::dist::ReduceOp::Max);
    }
  }
}
