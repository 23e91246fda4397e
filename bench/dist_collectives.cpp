// tg::dist's collectives against the raw MPI call on the same buffer, interleaved:
//
//   mpirun --allow-run-as-root --bind-to none -np 2 build/bench/tg_bench_dist_collectives [--rounds R]
//
// Cases (float32, sum, in place): 1 element (latency: the agreement check's share) and 25 MiB
// (6 553 600 elements, DataParallel's default bucket: bandwidth). Each round times, one after the
// other on the same tensor, `reps` calls of
//   mpi      MPI_Allreduce(MPI_IN_PLACE, ...) on a duplicate of MPI_COMM_WORLD
//   allgather128  MPI_Allgather of 128 bytes per rank: about the agreement check's message alone
//   both     allgather128 then mpi: the floor of a checked collective that does not fit inline
//   tg       tg::dist::all_reduce(t)                      (agreement check, then the collective)
//   tg_async tg::dist::all_reduce_async(t).wait()         (the path DataParallel's buckets take)
// with a barrier before each, and keeps the slowest rank's time per call. The line reports the
// medians over the rounds and the ratios to mpi:
//   case=allreduce/1 ranks=2 ... mpi_us=.. allgather128_us=.. both_us=.. tg_us=.. tg_async_us=.. tg/mpi=.. tg_async/mpi=..
// The tensor holds zeros, so repeated sums stay finite (and take the same time as any normal value).
#include <mpi.h>

#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Microseconds per call of `body`, the slowest rank's: a collective is as fast as its last rank.
double time_per_call(MPI_Comm comm, int reps, const std::function<void()>& body) {
  MPI_Barrier(comm);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < reps; ++i) body();
  double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / reps;
  MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, comm);
  return us;
}

void run(MPI_Comm comm, int64_t numel, int rounds, int reps) {
  tg::Tensor t = tg::zeros({numel});
  float* data = t.mutable_data<float>();
  const int count = static_cast<int>(numel);
  const std::function<void()> raw = [&] { MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comm); };
  char descriptor[128] = {}, descriptors[128 * 64] = {};  // the agreement check's message (up to 64 ranks)
  const std::function<void()> gather = [&] {
    MPI_Allgather(descriptor, sizeof descriptor, MPI_BYTE, descriptors, sizeof descriptor, MPI_BYTE, comm);
  };
  const std::function<void()> both = [&] { gather(); raw(); };
  const std::function<void()> blocking = [&] { tg::dist::all_reduce(t); };
  const std::function<void()> async = [&] { tg::dist::all_reduce_async(t).wait(); };
  for (int i = 0; i < std::max(2, reps / 10); ++i) {  // warm-up: connections, pages, caches
    raw();
    blocking();
    async();
  }
  std::vector<double> both_us, mpi_us, gather_us, tg_us, async_us;
  for (int round = 0; round < rounds; ++round) {
    mpi_us.push_back(time_per_call(comm, reps, raw));
    gather_us.push_back(time_per_call(comm, reps, gather));
    both_us.push_back(time_per_call(comm, reps, both));
    tg_us.push_back(time_per_call(comm, reps, blocking));
    async_us.push_back(time_per_call(comm, reps, async));
  }
  if (tg::dist::rank() == 0) {
    const double m = median(mpi_us), b = median(tg_us), a = median(async_us);
    std::printf("case=allreduce/%lld ranks=%d rounds=%d reps=%d mpi_us=%.2f allgather128_us=%.2f both_us=%.2f tg_us=%.2f tg_async_us=%.2f tg/mpi=%.3f "
                "tg_async/mpi=%.3f\n",
                static_cast<long long>(numel), tg::dist::world_size(), rounds, reps, m, median(gather_us), median(both_us), b, a, b / m, a / m);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  tg::dist::Context context = tg::dist::init(argc, argv);
  int rounds = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::atoi(argv[++i]);
  }
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  run(comm, 1, rounds, 2000);
  run(comm, 25 * 1024 * 1024 / 4, rounds, 10);
  MPI_Comm_free(&comm);
  return 0;
}
