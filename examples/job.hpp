// The processes that one run of an example (fashion_mnist, char_gpt) trains with: this process alone, or, with
// --distributed under `mpirun -np N`, the N ranks of an MPI job training data-parallel.
//
//   Job job;                                  // alone: rank 0 of 1, every call below is a no-op
//   Job job = Job::join_mpi();                // after tg::dist::init: this rank of the MPI job
//   job.replicate(model);                     // DataParallel: rank 0's weights on every rank
//   job.backward(loss);                       // loss.backward(), gradients averaged over the ranks
//   job.sum({loss_sum, correct, seen});       // the epoch's figures over every rank's share
//
// The program reads the same in both cases; only this file knows about tg::dist, and only when
// tapegrad::distributed was built (TG_EXAMPLES_DISTRIBUTED, set by examples/CMakeLists.txt).
#pragma once

#include <chrono>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>
#include <tapegrad/tapegrad.hpp>

#if TG_EXAMPLES_DISTRIBUTED
#include <tapegrad/distributed.hpp>
#endif

namespace examples {

class Job {
 public:
  Job() = default;  // one process

  // The MPI job this process is a rank of: tg::dist::init must have run.
  static Job join_mpi() {
    Job job;
#if TG_EXAMPLES_DISTRIBUTED
    job.rank_ = tg::dist::rank();
    job.world_size_ = tg::dist::world_size();
    job.distributed_ = true;
#endif
    return job;
  }

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool distributed() const { return distributed_; }
  // Rank 0 speaks for the job: the progress bar, metrics.csv, metrics.png and the checkpoint.
  bool leads() const { return rank_ == 0; }

  // Every rank's values summed element by element, in one float64 all-reduce (the same order on
  // every rank: the same sums everywhere). Alone: the values themselves, untouched.
  std::vector<double> sum(std::vector<double> values) const {
#if TG_EXAMPLES_DISTRIBUTED
    if (distributed_) {
      tg::Tensor sums = tg::tensor(values, {static_cast<int64_t>(values.size())}, tg::kFloat64);
      tg::dist::all_reduce(sums, tg::dist::ReduceOp::Sum);
      values = sums.to_vector<double>();
    }
#endif
    return values;
  }

  // From here on backward() averages the gradients of `model` over the ranks (DataParallel, which
  // first broadcasts rank 0's parameters). The model must outlive the job.
  void replicate(tg::nn::Module& model) {
#if TG_EXAMPLES_DISTRIBUTED
    if (distributed_) parallel_ = std::make_shared<tg::dist::DataParallel>(model);
#else
    (void)model;
#endif
  }

  void backward(const tg::Tensor& loss) {
    loss.backward();
#if TG_EXAMPLES_DISTRIBUTED
    if (parallel_) {
      // Timed apart from backward: the communication that backward did not hide, and the wait
      // for the slowest rank (--verbose prints it per epoch).
      const auto start = std::chrono::steady_clock::now();
      parallel_->synchronize();
      synchronize_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
#endif
  }
  // Seconds spent in synchronize() since the last call, and resets the count. Alone: 0.
  double take_synchronize_seconds() { return std::exchange(synchronize_seconds_, 0.0); }

  // `generator`'s state on every rank, in rank order, on every rank (an all-gather): each rank
  // draws its own dropout masks, so a checkpoint must hold every rank's generator. Alone: one state.
  std::vector<tg::GeneratorState> gather(const tg::Generator& generator) const {
    std::vector<tg::GeneratorState> states{generator.get_state()};
#if TG_EXAMPLES_DISTRIBUTED
    if (distributed_) {
      // GeneratorState is trivially copyable : its bytes travel as int64 words.
      static_assert(std::is_trivially_copyable_v<tg::GeneratorState>);
      constexpr int64_t kWords = (sizeof(tg::GeneratorState) + sizeof(int64_t) - 1) / sizeof(int64_t);
      tg::Tensor mine = tg::zeros({kWords}, tg::kInt64);
      std::memcpy(mine.mutable_data<int64_t>(), &states[0], sizeof(tg::GeneratorState));
      const tg::Tensor everyone = tg::dist::all_gather(mine);  // [world_size, kWords]
      states.resize(static_cast<size_t>(world_size_));
      for (int r = 0; r < world_size_; ++r)
        std::memcpy(static_cast<void*>(&states[static_cast<size_t>(r)]), everyone.data<int64_t>() + r * kWords, sizeof(tg::GeneratorState));
    }
#endif
    return states;
  }

 private:
  int rank_ = 0;
  int world_size_ = 1;
  bool distributed_ = false;
  double synchronize_seconds_ = 0.0;
#if TG_EXAMPLES_DISTRIBUTED
  std::shared_ptr<tg::dist::DataParallel> parallel_;
#endif
};

// The body of an example's main: `train(job)` on this process alone, or, with --distributed, as
// this rank of the MPI job (after tg::dist::init). Alone, an error is printed after the program's
// name and the exit status is 2. In an MPI job an error on a rank escapes main: the Context then
// aborts the whole job (MPI_Abort) rather than leave the other ranks waiting in a collective.
template <typename Train>
int run_job(int argc, char** argv, bool distributed, const char* program, Train train) {
  if (distributed) {
#if TG_EXAMPLES_DISTRIBUTED
    const tg::dist::Context context = tg::dist::init(argc, argv);
    Job job = Job::join_mpi();
    return train(job);
#else
    (void)argc, (void)argv;
    std::cerr << program << ": --distributed: this " << program
              << " was built without MPI (tapegrad::distributed needs libopenmpi-dev and openmpi-bin at "
                 "configure time)\n";
    return 2;
#endif
  }
  try {
    Job alone;
    return train(alone);
  } catch (const std::exception& error) {
    std::cerr << program << ": " << error.what() << "\n";
    return 2;
  }
}

}  // namespace examples
