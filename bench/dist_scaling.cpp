// Data-parallel scaling on one machine: the same global batch trained by N ranks of T threads.
//
//   mpirun --allow-run-as-root -np 2 build/bench/tg_bench_dist_scaling --threads 1
//   mpirun --allow-run-as-root -np 1 build/bench/tg_bench_dist_scaling --threads 2
//
// Cases (float32; the global batch is split evenly over the ranks):
//   dist_step/1024³   bench's train_step/1024³: Linear(1024, 1024) → ReLU → LayerNorm(1024), MSE,
//                     SGD(lr 0.1), global batch 1024 — 4.2 MB of gradients per step
//   dist_mlp/fmnist   a Fashion-MNIST-sized MLP: Linear(784, 512) → ReLU → Linear(512, 512) → ReLU →
//                     Linear(512, 10), cross-entropy, SGD(lr 0.1, momentum 0.9), global batch 256
// Each step is timed in three parts on every rank: forward + loss.backward() (the hooks start the
// buckets' all-reduces during it), synchronize() (the communication backward did not hide) and
// optimizer.step(). The line reports the medians over the steps, of the slowest rank, and the time
// of one blocking all_reduce of all the gradients alone (what the communication would cost with
// no overlap at all):
//   case=dist_step/1024³ ranks=2 threads=1 steps_per_s=.. step_ms=.. compute_ms=.. unhidden_comm_ms=.. optimizer_ms=.. allreduce_ms=.. grad_bytes=..
#include <tapegrad/distributed.hpp>
#include <tapegrad/tapegrad.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double since_ms(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The slowest rank's value: a data-parallel step is as fast as its slowest rank.
double slowest(double value) {
  tg::Tensor t = tg::scalar_tensor(value, tg::kFloat64);
  tg::dist::all_reduce(t, tg::dist::ReduceOp::Max);
  return t.item();
}

struct Case {
  std::string name;
  tg::nn::Sequential model;
  std::function<tg::Tensor(tg::nn::Module&)> loss;  // this rank's loss on its share of the batch
  tg::optim::SGDOptions sgd;
};

void run(Case& c, int steps) {
  tg::dist::DataParallel ddp(c.model);
  tg::optim::SGD optimizer(c.model.parameters(), c.sgd);
  std::vector<double> step_ms, compute_ms, comm_ms, optimizer_ms;
  for (int step = -3; step < steps; ++step) {  // 3 warm-up steps
    tg::dist::barrier();
    const Clock::time_point start = Clock::now();
    optimizer.zero_grad();
    c.loss(ddp.module()).backward();  // the hooks launch the buckets' all-reduces meanwhile
    const double computed = since_ms(start);
    ddp.synchronize();
    const double synchronized = since_ms(start);
    optimizer.step();
    const double stepped = since_ms(start);
    if (step < 0) continue;
    step_ms.push_back(stepped);
    compute_ms.push_back(computed);
    comm_ms.push_back(synchronized - computed);
    optimizer_ms.push_back(stepped - synchronized);
  }
  // All the gradients in one blocking all-reduce, alone: the communication's full cost.
  int64_t numel = 0;
  for (const tg::Tensor& p : c.model.parameters()) numel += p.numel();
  tg::Tensor flat = tg::zeros({numel});
  std::vector<double> allreduce_ms;
  for (int i = -2; i < steps; ++i) {
    tg::dist::barrier();
    const Clock::time_point start = Clock::now();
    tg::dist::all_reduce(flat);
    if (i >= 0) allreduce_ms.push_back(since_ms(start));
  }
  const double step = slowest(median(step_ms));
  const double compute = slowest(median(compute_ms)), comm = slowest(median(comm_ms));
  const double opt = slowest(median(optimizer_ms)), allreduce = slowest(median(allreduce_ms));
  if (tg::dist::rank() == 0) {
    std::printf("case=%s ranks=%d threads=%d steps_per_s=%.4g step_ms=%.4g compute_ms=%.4g unhidden_comm_ms=%.4g "
                "optimizer_ms=%.4g allreduce_ms=%.4g grad_bytes=%lld\n",
                c.name.c_str(), tg::dist::world_size(), tg::get_num_threads(), 1000.0 / step, step, compute, comm, opt,
                allreduce, static_cast<long long>(numel * 4));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  tg::dist::Context context = tg::dist::init(argc, argv);
  int threads = 1, steps = 20;
  std::string filter;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") threads = std::atoi(argv[i + 1]);
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--filter") filter = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--threads T] [--steps N] [--filter SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  tg::set_num_threads(threads);
  const int ranks = tg::dist::world_size();

  tg::manual_seed(0);
  {
    const int64_t batch = 1024 / ranks;
    const tg::Tensor x = tg::randn({batch, 1024}), target = tg::randn({batch, 1024});
    Case step{"dist_step/1024³", tg::nn::Sequential(tg::nn::Linear(1024, 1024), tg::nn::ReLU(), tg::nn::LayerNorm({1024})),
              [x, target](tg::nn::Module& m) { return tg::nn::mse_loss(m(x), target); }, {.lr = 0.1}};
    if (step.name.find(filter) != std::string::npos) run(step, steps);
  }
  {
    const int64_t batch = 256 / ranks;
    const tg::Tensor x = tg::randn({batch, 784}), labels = tg::randint(10, {batch});
    Case mlp{"dist_mlp/fmnist",
             tg::nn::Sequential(tg::nn::Linear(784, 512), tg::nn::ReLU(), tg::nn::Linear(512, 512), tg::nn::ReLU(),
                                tg::nn::Linear(512, 10)),
             [x, labels](tg::nn::Module& m) { return tg::nn::cross_entropy(m(x), labels); }, {.lr = 0.1, .momentum = 0.9}};
    if (mlp.name.find(filter) != std::string::npos) run(mlp, steps);
  }
}
