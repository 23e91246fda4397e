// The benchmark harness shared by tg_bench (tapegrad) and tg_bench_torch (libtorch).
//
// Both programs run the same cases, named the same way, and print the same lines, so that
// bench/run.py can interleave them and compare line by line. A program supplies a Backend — one
// factory per family of cases — and calls bench::run_main; this header owns the case list, the
// flags, the timing and the output format:
//
//   case=layer_norm_fwd/8192x768 threads=2 median_ms=1.234 p10_ms=1.2 p90_ms=1.3 iters=400 cpu_ms=2.4
//
// (cpu_ms: the median CPU time per iteration of the whole process, every thread's, which a busy
// machine's time-slicing does not inflate.)
//
// Timing: each case is built once (inputs, modules, optimizer), warmed up, then timed in samples.
// A sample is `iters_per_sample` back-to-back iterations (enough for ~0.5 ms, so that the clock's
// resolution never matters) and yields one per-iteration time; the line reports the median and
// the 10th/90th percentiles of the samples. Samples continue until both --min-time seconds have
// passed and --repetitions samples were taken. After timing, the case checks that its outputs
// (results and gradients) are finite; the program exits non-zero if any case fails, which is what
// the CI smoke test relies on. No timing is ever asserted.
#pragma once

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace bench {

// --- the case list: shapes shared by both programs ---

struct LayerNormShape {
  int64_t rows;  // M: the leading dims flattened
  int64_t cols;  // N: the normalized_shape {N}
};
// LayerNorm over the last dim, float32: the large shapes are memory-bound, the small ones overhead-bound.
inline const std::vector<LayerNormShape> kLayerNormShapes = {{8192, 768}, {32768, 64}, {512, 4096}, {64, 8}, {2, 4}};

struct TrainShape {
  int64_t batch;   // B: rows of x
  int64_t in;      // IN: Linear's in_features
  int64_t hidden;  // H: Linear's out_features and LayerNorm's normalized_shape {H}
};
// One step of Linear(IN,H) -> ReLU -> LayerNorm(H), MSE against a fixed target, SGD(lr=0.1).
inline const std::vector<TrainShape> kTrainShapes = {{2, 5, 6}, {64, 32, 64}, {256, 512, 512}, {1024, 1024, 1024}};

struct GemmShape {
  int64_t M, K, N;  // C[M, N] = A[M, K] · B[K, N]
};
// tg::matmul / torch::matmul alone, float32, no grad: the GEMM kernel against the FMA peak.
inline const std::vector<GemmShape> kGemmShapes = {{1024, 1024, 1024}, {2048, 2048, 2048}};

struct BmmShape {
  int64_t B, M, K, N;  // C[B, M, N] = A[B, M, K] · B[B, K, N]
};
// bmm forward + backward (dA, dB), float32: attention's products, [B·H, T, D] · [B·H, D, T] at the
// small GPT's size and at T = 1024.
inline const std::vector<BmmShape> kBmmShapes = {{48, 64, 32, 64}, {64, 1024, 64, 1024}};

struct ToolkitShape {
  int64_t rows;  // softmax and cross-entropy: rows of `cols` classes; the others: rows·cols elements
  int64_t cols;
};
// The training toolkit, float32: softmax forward+backward over the last dim, cross-entropy
// (log_softmax + nll) forward+backward, GELU forward+backward, Dropout(0.1) forward in training
// mode, and one AdamW step of a rows×cols parameter. 8192×128 is 1 Mi elements (memory-bound), 4×8
// measures the per-call cost.
inline const std::vector<ToolkitShape> kToolkitShapes = {{8192, 128}, {4, 8}};
// Sorting, float32, no grad: x.sort(-1) and x.topk(kTopK, -1) of every row (a language model's
// top-k sampling over its vocabulary, batched).
inline const std::vector<ToolkitShape> kSortShapes = {{8192, 128}};
inline constexpr int64_t kTopK = 10;

struct AttentionShape {
  int64_t batch_heads;  // B·H: independent heads, q, k, v: [B·H, T, D]
  int64_t T;            // positions (L = S)
  int64_t D;            // E = Ev
};
// Causal scaled-dot-product attention forward+backward, float32 (q, k, v as [1, B·H, T, D]): the
// GPT example's heads (48 = 12 sequences × 4 heads, T 64, D 32) and a long sequence.
inline const std::vector<AttentionShape> kAttentionShapes = {{48, 64, 32}, {64, 1024, 64}};

struct LSTMShape {
  int64_t batch, steps, layers, hidden, input;  // x: [steps, batch, input], LSTM(input, hidden, layers)
};
// A two-layer LSTM forward+backward, float32, from zero states: the character LSTM's shape.
inline const std::vector<LSTMShape> kLSTMShapes = {{32, 128, 2, 256, 128}};

struct PermuteShape {
  std::vector<int64_t> shape;  // the input's
  std::vector<int64_t> dims;   // y = x.permute(dims), a contiguous result
};
// Attention's layout changes, float32 forward+backward: the heads' output [B, H, T, D] back to
// [B, T, H, D] (here from [B, T, H, D], the same copy), and the packed q/k/v [B, T, 3, H, D] to
// [3, B, H, T, D]; B 12, T 64, H 4, D 32 (the character GPT's batch).
inline const std::vector<PermuteShape> kPermuteShapes = {{{12, 64, 4, 32}, {0, 2, 1, 3}},
                                                         {{12, 64, 3, 4, 32}, {2, 0, 3, 1, 4}}};

struct ConvShape {
  int64_t N, C_in, C_out, H, W;  // input [N, C_in, H, W]
  int64_t kernel, stride, padding, dilation, groups;  // square kernel, the same in H and W
  int64_t H_out() const { return (H + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1; }
  int64_t W_out() const { return (W + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1; }
};
// Conv2d (with bias) forward + backward (dx, dw, db), float32: the CNN example's two dense layers
// (1→32 at 28×28, 32→64 at 14×14), a wide layer (64→64 at 56×56), a depthwise one (groups = C) and
// a strided, dilated one. Named N x C_in x C_out x H x W, then k<kernel>, s<stride> (if not 1),
// p<padding>, d<dilation> (if not 1), g<groups> (if not 1): run.py parses it back for the FLOPs.
inline const std::vector<ConvShape> kConvShapes = {{128, 1, 32, 28, 28, 3, 1, 1, 1, 1},
                                                   {128, 32, 64, 14, 14, 3, 1, 1, 1, 1},
                                                   {32, 64, 64, 56, 56, 3, 1, 1, 1, 1},
                                                   {32, 128, 128, 28, 28, 3, 1, 1, 1, 128},
                                                   {32, 64, 128, 56, 56, 3, 2, 2, 2, 1}};

struct ImageShape {
  int64_t N, C, H, W;  // [N, C, H, W]
};
// BatchNorm2d(C) forward in training mode + backward (dx, dγ, dβ), float32, on a tensor far larger
// than the L3 (51 MB): memory-bound, compared with STREAM triad.
inline const std::vector<ImageShape> kBatchNormShapes = {{64, 64, 56, 56}};
// max_pool2d with a 2×2 kernel (stride 2) forward + backward, float32: the CNN example's pooling.
inline const std::vector<ImageShape> kMaxPoolShapes = {{128, 32, 28, 28}};

// The register-only FMA loop of the peak reference: this many FMA instructions per thread and
// iteration (kFmaChains independent accumulators, so that latency never stalls the FMA units).
inline constexpr int64_t kFmaChains = 16;
inline constexpr int64_t kFmaPerIteration = int64_t{1} << 20;

// STREAM arrays: 32 Mi floats = 128 MiB each, 4x the 32 MiB L3 they were sized for, so nothing
// stays cached.
inline constexpr int64_t kStreamElements = int64_t{1} << 25;
inline constexpr int64_t kTinyGraphElements = 4;

// --- what a program implements ---

// One benchmark case, built and ready: `step` runs one iteration; `outputs_finite` is called once
// after timing and checks every result and gradient the iterations produced.
struct Runner {
  std::function<void()> step;
  std::function<bool()> outputs_finite;
};

// One factory per family. Absent (empty) factories skip their cases: the libtorch program has no
// copy or STREAM reference, those belong to the tapegrad run only.
struct Backend {
  std::function<void(int)> set_num_threads;
  std::function<Runner(LayerNormShape)> layer_norm_forward;           // y = LayerNorm({N})(x), no grad
  std::function<Runner(LayerNormShape)> layer_norm_forward_backward;  // then y.backward(dy): dx, dγ, dβ
  std::function<Runner(LayerNormShape)> copy;                         // memcpy of x: the memory-bound limit
  std::function<Runner(TrainShape)> train_step;
  std::function<Runner(int64_t)> tiny_graph;                          // ((a*b)+c).sum().backward()
  std::function<Runner(int64_t)> stream_copy;                         // a[i] = b[i]
  std::function<Runner(int64_t)> stream_triad;                        // a[i] = b[i] + s*c[i]
  std::function<Runner(GemmShape)> gemm;                              // C = A·B, no grad
  // The *_bf16 families: the same work with bf16 products and float32 sums: tapegrad's float32
  // tensors at "medium" matmul precision; libtorch's bf16 tensors and modules (1.13 has no bf16
  // path for float32 CPU products).
  std::function<Runner(GemmShape)> gemm_bf16;
  std::function<Runner(BmmShape)> bmm_forward_backward;               // C = bmm(A, B); C.backward(dC)
  std::function<Runner(ToolkitShape)> softmax_forward_backward;       // y = softmax(x, -1); y.backward(dy)
  std::function<Runner(ToolkitShape)> cross_entropy_forward_backward; // cross_entropy(logits, t).backward()
  std::function<Runner(ToolkitShape)> gelu_forward_backward;          // y = gelu(x); y.backward(dy)
  std::function<Runner(ToolkitShape)> gelu_tanh_forward_backward;     // the same, approximate = "tanh"
  std::function<Runner(ToolkitShape)> dropout_forward;                // dropout(x, 0.1, training), no grad
  std::function<Runner(ToolkitShape)> adamw_step;                     // AdamW(lr 1e-3, wd 1e-2).step()
  std::function<Runner(AttentionShape)> attention_causal_forward_backward;  // causal SDPA, then backward
  std::function<Runner(AttentionShape)> attention_causal_bf16_forward_backward;
  std::function<Runner(LSTMShape)> lstm_forward_backward;             // (y, (h, c)) = LSTM(x); y.backward(dy): dx and every weight
  std::function<Runner(ToolkitShape)> sort_forward;                   // x.sort(-1), no grad
  std::function<Runner(ToolkitShape)> topk_forward;                   // x.topk(kTopK, -1), no grad
  std::function<Runner(PermuteShape)> permute_forward_backward;       // y = x.permute(dims), contiguous; y.backward(dy)
  std::function<Runner(ConvShape)> conv2d_forward_backward;           // y = Conv2d(x); y.backward(dy): dx, dw, db
  std::function<Runner(ConvShape)> conv2d_bf16_forward_backward;
  std::function<Runner(ImageShape)> batch_norm2d_forward_backward;    // y = BatchNorm2d(x), training; y.backward(dy)
  std::function<Runner(ImageShape)> max_pool2d_forward_backward;      // y = max_pool2d(x, 2); y.backward(dy)
  // kFmaPerIteration FMAs on every thread: the core's float32 peak. Its case name carries the
  // FLOPs per thread and iteration (2 × lanes × FMAs), for run.py.
  std::function<Runner(int64_t)> fma_peak;
  std::function<int64_t()> fma_flops_per_thread;                      // of one fma_peak iteration
  std::function<std::string()> banner;                                // printed first, as "# <text>"
};

// --- flags ---

struct Options {
  int threads = 1;
  std::string filter;        // run only cases whose name contains it, or one of its comma-separated parts
  double min_time = 0.5;     // seconds of timed samples per case (at least)
  int repetitions = 10;      // timed samples per case (at least)
  bool list = false;         // print the case names and exit
};

namespace detail {

inline void usage(const char* program) {
  std::printf(
      "usage: %s [--threads N] [--filter SUBSTRING] [--min-time SECONDS] [--repetitions N] [--list]\n"
      "  --threads N          intra-op threads (default 1)\n"
      "  --filter S           only the cases whose name contains S (or one of S's comma-separated parts)\n"
      "  --min-time S         time each case for at least S seconds (default 0.5; 0 = one sample)\n"
      "  --repetitions N      take at least N timed samples per case (default 10)\n"
      "  --list               print the case names and exit\n"
      "Prints one line per case: case=<name> threads=<n> median_ms=<x> p10_ms=<x> p90_ms=<x> iters=<n>\n",
      program);
}

// Parses "--name value" and "--name=value"; returns false (after printing why) on a bad command line.
inline bool parse(int argc, char** argv, Options& options, bool& help) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      help = true;
      continue;
    }
    if (arg == "--list") {
      options.list = true;
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "flag %s needs a value\n", arg.c_str());
      return false;
    }
    try {
      if (arg == "--threads") options.threads = std::stoi(value);
      else if (arg == "--filter") options.filter = value;
      else if (arg == "--min-time") options.min_time = std::stod(value);
      else if (arg == "--repetitions") options.repetitions = std::stoi(value);
      else {
        std::fprintf(stderr, "unknown flag %s\n", arg.c_str());
        return false;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "bad value for %s: %s\n", arg.c_str(), value.c_str());
      return false;
    }
  }
  if (options.threads < 1 || options.repetitions < 1 || !(options.min_time >= 0)) {
    std::fprintf(stderr, "expected --threads >= 1, --repetitions >= 1, --min-time >= 0\n");
    return false;
  }
  return true;
}

inline std::string dims(const std::vector<int64_t>& sizes) {
  std::string out;
  for (int64_t size : sizes) {
    if (!out.empty()) out += 'x';
    out += std::to_string(size);
  }
  return out;
}

// "128x32x64x14x14k3p1", with s<stride>, d<dilation>, g<groups> where not 1 (ConvShape).
inline std::string conv_name(const ConvShape& s) {
  std::string out = dims({s.N, s.C_in, s.C_out, s.H, s.W}) + "k" + std::to_string(s.kernel);
  if (s.stride != 1) out += "s" + std::to_string(s.stride);
  out += "p" + std::to_string(s.padding);
  if (s.dilation != 1) out += "d" + std::to_string(s.dilation);
  if (s.groups != 1) out += "g" + std::to_string(s.groups);
  return out;
}

// Whether `name` contains `filter`, or one of its comma-separated parts ("gemm,train_step").
inline bool selected(const std::string& name, const std::string& filter) {
  size_t begin = 0;
  while (true) {
    const size_t comma = filter.find(',', begin);
    if (name.find(filter.substr(begin, comma - begin)) != std::string::npos) return true;
    if (comma == std::string::npos) return false;
    begin = comma + 1;
  }
}

struct NamedCase {
  std::string name;
  std::function<Runner()> build;  // allocates only when the case is selected
};

// The case list, in output order. Names are "<family>/<shape>"; run.py parses them back.
inline std::vector<NamedCase> cases(const Backend& backend) {
  std::vector<NamedCase> out;
  auto add = [&](const auto& factory, const std::string& family, const std::string& shape, auto argument) {
    if (factory) out.push_back({family + "/" + shape, [&factory, argument] { return factory(argument); }});
  };
  for (const LayerNormShape& s : kLayerNormShapes) {
    const std::string shape = dims({s.rows, s.cols});
    add(backend.copy, "copy", shape, s);
    add(backend.layer_norm_forward, "layer_norm_fwd", shape, s);
    add(backend.layer_norm_forward_backward, "layer_norm_fwd_bwd", shape, s);
  }
  if (backend.fma_peak && backend.fma_flops_per_thread)
    add(backend.fma_peak, "fma_peak", std::to_string(backend.fma_flops_per_thread()), kFmaPerIteration);
  for (const GemmShape& s : kGemmShapes) add(backend.gemm, "gemm", dims({s.M, s.K, s.N}), s);
  for (const GemmShape& s : kGemmShapes) add(backend.gemm_bf16, "gemm_bf16", dims({s.M, s.K, s.N}), s);
  for (const BmmShape& s : kBmmShapes) add(backend.bmm_forward_backward, "bmm_fwd_bwd", dims({s.B, s.M, s.K, s.N}), s);
  for (const TrainShape& s : kTrainShapes) add(backend.train_step, "train_step", dims({s.batch, s.in, s.hidden}), s);
  for (const ToolkitShape& s : kToolkitShapes) {
    const std::string shape = dims({s.rows, s.cols});
    add(backend.softmax_forward_backward, "softmax_fwd_bwd", shape, s);
    add(backend.cross_entropy_forward_backward, "cross_entropy_fwd_bwd", shape, s);
    add(backend.gelu_forward_backward, "gelu_fwd_bwd", shape, s);
    add(backend.gelu_tanh_forward_backward, "gelu_tanh_fwd_bwd", shape, s);
    add(backend.dropout_forward, "dropout_fwd", shape, s);
    add(backend.adamw_step, "adamw_step", shape, s);
  }
  for (const AttentionShape& s : kAttentionShapes)
    add(backend.attention_causal_forward_backward, "attention_causal_fwd_bwd", dims({s.batch_heads, s.T, s.D}), s);
  for (const AttentionShape& s : kAttentionShapes)
    add(backend.attention_causal_bf16_forward_backward, "attention_causal_bf16_fwd_bwd", dims({s.batch_heads, s.T, s.D}),
        s);
  for (const LSTMShape& s : kLSTMShapes)
    add(backend.lstm_forward_backward, "lstm_fwd_bwd", dims({s.batch, s.steps, s.layers, s.hidden, s.input}), s);
  for (const ToolkitShape& s : kSortShapes) {
    const std::string shape = dims({s.rows, s.cols});
    add(backend.sort_forward, "sort_fwd", shape, s);
    add(backend.topk_forward, "topk" + std::to_string(kTopK) + "_fwd", shape, s);
  }
  for (const PermuteShape& s : kPermuteShapes) add(backend.permute_forward_backward, "permute_fwd_bwd", dims(s.shape), s);
  for (const ConvShape& s : kConvShapes) add(backend.conv2d_forward_backward, "conv2d_fwd_bwd", conv_name(s), s);
  for (const ConvShape& s : kConvShapes)
    add(backend.conv2d_bf16_forward_backward, "conv2d_bf16_fwd_bwd", conv_name(s), s);
  for (const ImageShape& s : kBatchNormShapes)
    add(backend.batch_norm2d_forward_backward, "batch_norm2d_fwd_bwd", dims({s.N, s.C, s.H, s.W}), s);
  for (const ImageShape& s : kMaxPoolShapes)
    add(backend.max_pool2d_forward_backward, "max_pool2d_fwd_bwd", dims({s.N, s.C, s.H, s.W}), s);
  add(backend.tiny_graph, "tiny_graph", dims({kTinyGraphElements}), kTinyGraphElements);
  add(backend.stream_copy, "stream_copy", dims({kStreamElements}), kStreamElements);
  add(backend.stream_triad, "stream_triad", dims({kStreamElements}), kStreamElements);
  return out;
}

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The q-quantile (0..1) of sorted values, interpolated linearly between neighbours.
inline double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(position);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

// CPU time of the whole process (every thread), in seconds: on a shared machine where other
// processes take turns on the cores, wall time counts their turns too, CPU time only ours.
inline double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct Timing {
  std::vector<double> sample_ms;      // per-iteration time of each sample, sorted
  std::vector<double> sample_cpu_ms;  // per-iteration CPU time (all threads) of each sample, sorted
  int64_t iterations = 0;         // timed iterations in total
};

inline Timing time_case(const Runner& runner, const Options& options) {
  constexpr double kSampleSeconds = 0.5e-3;
  constexpr size_t kMaxSamples = 20000;
  // Warm-up: at least one iteration (allocator, caches, thread pool), and 10% of the time budget.
  int64_t warmup_iterations = 0;
  const Clock::time_point warmup_start = Clock::now();
  do {
    runner.step();
    ++warmup_iterations;
  } while (seconds_since(warmup_start) < 0.1 * options.min_time);
  const double per_iteration = seconds_since(warmup_start) / static_cast<double>(warmup_iterations);
  const int64_t iters_per_sample = std::max<int64_t>(1, static_cast<int64_t>(kSampleSeconds / per_iteration));

  Timing timing;
  const Clock::time_point start = Clock::now();
  while (timing.sample_ms.size() < static_cast<size_t>(options.repetitions) ||
         (seconds_since(start) < options.min_time && timing.sample_ms.size() < kMaxSamples)) {
    const Clock::time_point sample_start = Clock::now();
    const double cpu_start = process_cpu_seconds();
    for (int64_t i = 0; i < iters_per_sample; ++i) runner.step();
    timing.sample_ms.push_back(1e3 * seconds_since(sample_start) / static_cast<double>(iters_per_sample));
    timing.sample_cpu_ms.push_back(1e3 * (process_cpu_seconds() - cpu_start) / static_cast<double>(iters_per_sample));
    timing.iterations += iters_per_sample;
  }
  std::sort(timing.sample_ms.begin(), timing.sample_ms.end());
  std::sort(timing.sample_cpu_ms.begin(), timing.sample_cpu_ms.end());
  return timing;
}

}  // namespace detail

// The command line's options, for a case that must choose between ways of running when it is built.
inline Options& options() {
  static Options parsed;
  return parsed;
}

// The whole program: parses the flags, runs the selected cases, prints one line each.
// Returns 0, or 1 when a case threw or produced a non-finite output (2 on a bad command line).
inline int run_main(int argc, char** argv, const Backend& backend) {
  Options& options = bench::options();
  bool help = false;
  if (!detail::parse(argc, argv, options, help)) {
    detail::usage(argv[0]);
    return 2;
  }
  if (help) {
    detail::usage(argv[0]);
    return 0;
  }
  const std::vector<detail::NamedCase> all = detail::cases(backend);
  if (options.list) {
    for (const auto& c : all) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  backend.set_num_threads(options.threads);
  int failures = 0;
  if (backend.banner) {
    try {
      std::printf("# %s\n", backend.banner().c_str());
    } catch (const std::exception& error) {
      std::fprintf(stderr, "banner: FAILED: %s\n", error.what());
      ++failures;
    }
  }
  for (const auto& c : all) {
    if (!detail::selected(c.name, options.filter)) continue;
    try {
      const Runner runner = c.build();
      const detail::Timing timing = detail::time_case(runner, options);
      std::printf("case=%s threads=%d median_ms=%.6g p10_ms=%.6g p90_ms=%.6g iters=%lld cpu_ms=%.6g\n",
                  c.name.c_str(), options.threads, detail::quantile(timing.sample_ms, 0.5),
                  detail::quantile(timing.sample_ms, 0.1), detail::quantile(timing.sample_ms, 0.9),
                  static_cast<long long>(timing.iterations), detail::quantile(timing.sample_cpu_ms, 0.5));
      std::fflush(stdout);
      if (!runner.outputs_finite()) {
        std::fprintf(stderr, "case=%s: FAILED: non-finite values in its outputs or gradients\n", c.name.c_str());
        ++failures;
      }
    } catch (const std::exception& error) {
      std::fprintf(stderr, "case=%s: FAILED: %s\n", c.name.c_str(), error.what());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace bench
