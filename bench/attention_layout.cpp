// attention_layout — what the copies of MultiheadAttention's layout changes cost beside the
// matmuls around them, forward+backward, float32, at the character GPT's default shape
// (B 12, T 64, E 128, H 4, D 32):
//
//   in_proj   y = Linear(E, 3E)(x)                      x [B, T, E] -> [B, T, 3E]
//   qkv       view [B, T, 3, H, D], permute to [3, B, H, T, D]   (one copy; its gradient one more)
//   heads     [B, H, T, D] permuted to [B, T, H, D], view [B, T, E]  (likewise)
//   out_proj  y = Linear(E, E)(x)
//
// tapegrad tensors are contiguous, so each permute is a copy; the views are free. The program
// prints the median time of each step and the copies' share of the four.
//
//   ./build/bench/tg_bench_attention_layout [--threads N] [--iterations N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tapegrad/tapegrad.hpp>
#include <vector>

namespace {

constexpr int64_t B = 12, T = 64, E = 128, H = 4, D = 32;

// The median over `samples` of the mean time of `iterations` calls, in microseconds.
double median_us(const std::function<void()>& step, int iterations, int samples = 15) {
  for (int i = 0; i < iterations; ++i) step();  // warm-up: caches, the buffer cache, the pools
  std::vector<double> times;
  for (int s = 0; s < samples; ++s) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) step();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
                    iterations);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, iterations = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
  }
  tg::set_num_threads(threads);
  tg::manual_seed(0);
  std::printf("# cpu: %s, %d threads\n", tg::to_string(tg::cpu_info()).c_str(), threads);

  tg::nn::Linear in_proj(E, 3 * E), out_proj(E, E);
  tg::Tensor x = tg::randn({B, T, E}).requires_grad_();
  const tg::Tensor d_qkv_proj = tg::randn({B, T, 3 * E});
  tg::Tensor packed = tg::randn({B, T, 3 * E}).requires_grad_();  // in_proj's output
  const tg::Tensor d_heads_in = tg::randn({3, B, H, T, D});
  tg::Tensor heads = tg::randn({B, H, T, D}).requires_grad_();  // attention's output
  const tg::Tensor d_merged = tg::randn({B, T, E});
  const tg::Tensor d_out = tg::randn({B, T, E});

  struct Row {
    std::string name;
    double us;
    bool copy;
  };
  std::vector<Row> rows;
  rows.push_back({"in_proj   Linear(128, 384) [12, 64, 128]", median_us([&] {
                    x.set_grad({});
                    in_proj.zero_grad();
                    in_proj(x).backward(d_qkv_proj);
                  }, iterations), false});
  rows.push_back({"qkv       [12, 64, 384] -> view -> permute [3, 12, 4, 64, 32]", median_us([&] {
                    packed.set_grad({});
                    packed.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4}).backward(d_heads_in);
                  }, iterations), true});
  rows.push_back({"heads     [12, 4, 64, 32] -> permute [12, 64, 4, 32] -> view [12, 64, 128]", median_us([&] {
                    heads.set_grad({});
                    heads.permute({0, 2, 1, 3}).view({B, T, E}).backward(d_merged);
                  }, iterations), true});
  rows.push_back({"out_proj  Linear(128, 128) [12, 64, 128]", median_us([&] {
                    x.set_grad({});
                    out_proj.zero_grad();
                    out_proj(x).backward(d_out);
                  }, iterations), false});

  double copies = 0, total = 0;
  std::printf("%-80s %10s\n", "forward+backward", "us");
  for (const Row& row : rows) {
    std::printf("%-80s %10.1f\n", row.name.c_str(), row.us);
    total += row.us;
    if (row.copy) copies += row.us;
  }
  // Each permute reads and writes its tensor once forward and once backward.
  const double bytes = 2.0 * 2.0 * 4.0 * static_cast<double>(3 * B * T * E + B * T * E);
  std::printf("layout copies: %.1f us of %.1f us (%.0f%%), %.1f GB/s moved\n", copies, total, 100.0 * copies / total,
              bytes / (copies * 1e3));
  return 0;
}
