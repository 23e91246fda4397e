// tg_bench — tapegrad's side of the benchmark: LayerNorm, training steps, the toolkit's softmax,
// cross-entropy, GELU, Dropout and AdamW, sort and topk, attention and its permutes, conv2d,
// BatchNorm2d and max_pool2d, the per-op
// overhead of a tiny graph, plus the references that say what "fast" means on this machine: a memcpy of each
// LayerNorm input (the memory-bound limit of its forward) and STREAM copy and triad.
//
//   ./build/bench/tg_bench --threads 2 --filter layer_norm --min-time 1
//
// The case list, the flags and the output format live in harness.hpp, shared with tg_bench_torch.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <tapegrad/tapegrad.hpp>
#include <vector>

#include "fma_peak.hpp"
#include "harness.hpp"

namespace {

namespace nn = tg::nn;

bool all_finite(const tg::Tensor& t) {
  if (!t.defined()) return false;
  const float* data = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(data[i])) return false;
  return true;
}

bool all_finite(const std::vector<tg::Tensor>& tensors) {
  for (const tg::Tensor& t : tensors)
    if (!all_finite(t)) return false;
  return true;
}

// y = LayerNorm({N})(x) with x: [M, N], under NoGradGuard: the kernel alone, no tape node.
bench::Runner layer_norm_forward(bench::LayerNormShape shape) {
  struct State {
    nn::LayerNorm ln;
    tg::Tensor x, y;
  };
  auto s = std::make_shared<State>(State{nn::LayerNorm({shape.cols}), tg::randn({shape.rows, shape.cols}), {}});
  return {[s] {
            tg::NoGradGuard no_grad;
            s->y = tg::Tensor();  // free the previous result first, as a training loop would
            s->y = s->ln(s->x);
          },
          [s] { return all_finite(s->y); }};
}

// y = LayerNorm({N})(x), then y.backward(dy) with a fixed random dy: dx, dγ and dβ. Gradients are
// reset to undefined after each iteration (set_to_none), so every iteration writes them afresh.
bench::Runner layer_norm_forward_backward(bench::LayerNormShape shape) {
  struct State {
    nn::LayerNorm ln;
    tg::Tensor x, dy;
    std::vector<tg::Tensor> gradients;  // dx, dγ, dβ of the last iteration
  };
  auto s = std::make_shared<State>(State{nn::LayerNorm({shape.cols}), tg::randn({shape.rows, shape.cols}),
                                         tg::randn({shape.rows, shape.cols}), {}});
  s->x.requires_grad_();
  return {[s] {
            s->x.set_grad({});
            s->ln.zero_grad();
            s->ln(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->ln.weight.grad(), s->ln.bias.grad()}); }};
}

// dst = src with memcpy, in equal contiguous parts over the threads: the memory-bound limit of a
// LayerNorm forward (which also reads M·N floats and writes M·N floats). dst is allocated once.
void parallel_copy(float* dst, const float* src, int64_t n) {
  constexpr int64_t kSerialBelow = int64_t{1} << 18;  // 1 MiB: a thread hand-off costs more than it saves
  if (n < kSerialBelow) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n, 4096),
      [&](const tbb::blocked_range<int64_t>& r) {
        std::memcpy(dst + r.begin(), src + r.begin(), static_cast<size_t>(r.size()) * sizeof(float));
      },
      tbb::static_partitioner());
}

bench::Runner copy(bench::LayerNormShape shape) {
  struct State {
    tg::Tensor x, y;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.rows, shape.cols}), tg::empty({shape.rows, shape.cols})});
  return {[s] { parallel_copy(s->y.mutable_data<float>(), s->x.data<float>(), s->x.numel()); },
          [s] { return all_finite(s->y); }};
}

// C = A·B with A: [M, K], B: [K, N], float32, under NoGradGuard: the GEMM kernel alone.
bench::Runner gemm(bench::GemmShape shape) {
  struct State {
    tg::Tensor a, b, c;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.M, shape.K}), tg::randn({shape.K, shape.N}), {}});
  return {[s] {
            tg::NoGradGuard no_grad;
            s->c = tg::Tensor();
            s->c = tg::matmul(s->a, s->b);
          },
          [s] { return all_finite(s->c); }};
}

// A case's step at "medium" matmul precision: bf16 factors, float32 sums (vdpbf16ps where the CPU
// has AVX512-BF16), float32 tensors in and out.
bench::Runner at_medium_precision(bench::Runner float32) {
  return {[step = float32.step] {
            tg::set_float32_matmul_precision("medium");
            step();
            tg::set_float32_matmul_precision("highest");
          },
          float32.outputs_finite};
}

// C = bmm(A, B) with A: [B, M, K], B: [B, K, N], float32, then C.backward(dC): dA and dB, the
// gradients reset to undefined before each iteration.
bench::Runner bmm_forward_backward(bench::BmmShape shape) {
  struct State {
    tg::Tensor a, b, dc;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.B, shape.M, shape.K}), tg::randn({shape.B, shape.K, shape.N}),
                                         tg::randn({shape.B, shape.M, shape.N})});
  s->a.requires_grad_();
  s->b.requires_grad_();
  return {[s] {
            s->a.set_grad({});
            s->b.set_grad({});
            tg::bmm(s->a, s->b).backward(s->dc);
          },
          [s] { return all_finite({s->a.grad(), s->b.grad()}); }};
}

// The FMA loop on every thread tapegrad may use (tg::get_num_threads()), one chunk per thread.
bench::Runner fma_peak(int64_t fmas) {
  auto sums = std::make_shared<std::vector<float>>(static_cast<size_t>(tg::get_num_threads()), 0.0f);
  return {[sums, fmas] {
            tbb::parallel_for(
                tbb::blocked_range<size_t>(0, sums->size(), 1),
                [&](const tbb::blocked_range<size_t>& r) {
                  for (size_t t = r.begin(); t != r.end(); ++t) (*sums)[t] = bench::fma_loop(fmas, (*sums)[t] * 1e-9f);
                },
                tbb::static_partitioner());
          },
          [sums] {
            for (float sum : *sums)
              if (!std::isfinite(sum)) return false;
            return true;
          }};
}

// One training step: forward, MSE against a fixed target, backward, SGD(lr=0.1).step(), zero_grad().
bench::Runner train_step(bench::TrainShape shape) {
  struct State {
    nn::Sequential model;
    tg::optim::SGD optimizer;
    tg::Tensor x, target, loss;
    explicit State(bench::TrainShape s)
        : model(nn::Linear(s.in, s.hidden), nn::ReLU(), nn::LayerNorm({s.hidden})),
          optimizer(model.parameters(), {.lr = 0.1}),
          x(tg::randn({s.batch, s.in})),
          target(tg::randn({s.batch, s.hidden})) {}
  };
  tg::manual_seed(0);
  auto s = std::make_shared<State>(shape);
  return {[s] {
            s->loss = nn::mse_loss(s->model(s->x), s->target);
            s->loss.backward();
            s->optimizer.step();
            s->optimizer.zero_grad();
          },
          [s] { return all_finite(s->loss) && all_finite(s->model.parameters()); }};
}

// The toolkit cases, each over a [rows, cols] float32 tensor; gradients are reset to undefined
// before each iteration, as in the LayerNorm cases.
// y = op(x), then y.backward(dy) with a fixed random dy; x's gradient reset each iteration.
template <typename Op>
bench::Runner unary_forward_backward(bench::ToolkitShape shape, Op op) {
  struct State {
    tg::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.rows, shape.cols}), tg::randn({shape.rows, shape.cols})});
  s->x.requires_grad_();
  return {[s, op] {
            s->x.set_grad({});
            op(s->x).backward(s->dy);
          },
          [s] { return all_finite(s->x.grad()); }};
}

bench::Runner softmax_forward_backward(bench::ToolkitShape shape) {
  return unary_forward_backward(shape, [](const tg::Tensor& x) { return tg::softmax(x, -1); });
}

bench::Runner cross_entropy_forward_backward(bench::ToolkitShape shape) {
  struct State {
    tg::Tensor logits, targets;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.rows, shape.cols}), tg::randint(shape.cols, {shape.rows})});
  s->logits.requires_grad_();
  return {[s] {
            s->logits.set_grad({});
            nn::cross_entropy(s->logits, s->targets).backward();
          },
          [s] { return all_finite(s->logits.grad()); }};
}

bench::Runner gelu_forward_backward(bench::ToolkitShape shape) {
  return unary_forward_backward(shape, [](const tg::Tensor& x) { return nn::functional::gelu(x); });
}

bench::Runner gelu_tanh_forward_backward(bench::ToolkitShape shape) {
  return unary_forward_backward(shape, [](const tg::Tensor& x) { return nn::functional::gelu(x, "tanh"); });
}

bench::Runner dropout_forward(bench::ToolkitShape shape) {
  struct State {
    tg::Tensor x, y;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.rows, shape.cols}), {}});
  return {[s] {
            tg::NoGradGuard no_grad;
            s->y = tg::Tensor();
            s->y = nn::functional::dropout(s->x, 0.1, /*training=*/true);
          },
          [s] { return all_finite(s->y); }};
}

bench::Runner adamw_step(bench::ToolkitShape shape) {
  struct State {
    tg::Tensor param;
    tg::optim::AdamW optimizer;
    explicit State(const tg::Tensor& p) : param(p), optimizer({p}, {.lr = 1e-3, .weight_decay = 1e-2}) {}
  };
  tg::Tensor param = tg::randn({shape.rows, shape.cols}).requires_grad_();
  param.set_grad(tg::randn({shape.rows, shape.cols}));
  auto s = std::make_shared<State>(param);
  return {[s] { s->optimizer.step(); }, [s] { return all_finite(s->param); }};
}

// y = scaled_dot_product_attention(q, k, v, causal), then y.backward(dy): the fused kernels.
bench::Runner attention_causal_forward_backward(bench::AttentionShape shape) {
  struct State {
    tg::Tensor q, k, v, dy;
  };
  const tg::Shape dims{1, shape.batch_heads, shape.T, shape.D};
  auto s = std::make_shared<State>(State{tg::randn(dims), tg::randn(dims), tg::randn(dims), tg::randn(dims)});
  for (tg::Tensor* t : {&s->q, &s->k, &s->v}) t->requires_grad_();
  return {[s] {
            for (tg::Tensor* t : {&s->q, &s->k, &s->v}) t->set_grad({});
            nn::functional::scaled_dot_product_attention(s->q, s->k, s->v, {.is_causal = true}).backward(s->dy);
          },
          [s] { return all_finite({s->q.grad(), s->k.grad(), s->v.grad()}); }};
}

// (y, (h, c)) = LSTM(x) from zero states, then y.backward(dy): dx and every weight's gradient.
bench::Runner lstm_forward_backward(bench::LSTMShape shape) {
  struct State {
    nn::LSTM lstm;
    tg::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{nn::LSTM(shape.input, shape.hidden, {.num_layers = shape.layers}),
                                         tg::randn({shape.steps, shape.batch, shape.input}).requires_grad_(),
                                         tg::randn({shape.steps, shape.batch, shape.hidden})});
  return {[s] {
            s->x.set_grad({});
            s->lstm.zero_grad();
            std::get<0>(s->lstm.forward(s->x, std::nullopt)).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->lstm.flat_weights[0].grad()}); }};
}

// values and indices of x.sort(-1) (or x.topk(kTopK, -1)) with x: [rows, cols], under NoGradGuard.
template <typename Op>
bench::Runner sorting_forward(bench::ToolkitShape shape, Op op) {
  struct State {
    tg::Tensor x, values, indices;
  };
  auto s = std::make_shared<State>(State{tg::randn({shape.rows, shape.cols}), {}, {}});
  return {[s, op] {
            tg::NoGradGuard no_grad;
            s->values = tg::Tensor();
            s->indices = tg::Tensor();
            auto [values, indices] = op(s->x);
            s->values = values;
            s->indices = indices;
          },
          [s] { return all_finite(s->values) && s->indices.defined(); }};
}

bench::Runner sort_forward(bench::ToolkitShape shape) {
  return sorting_forward(shape, [](const tg::Tensor& x) { return x.sort(-1); });
}

bench::Runner topk_forward(bench::ToolkitShape shape) {
  return sorting_forward(shape, [](const tg::Tensor& x) { return x.topk(bench::kTopK, -1); });
}

// y = x.permute(dims), then y.backward(dy): one strided copy each way.
bench::Runner permute_forward_backward(const bench::PermuteShape& shape) {
  struct State {
    tg::Tensor x, dy;
  };
  const tg::Tensor dy = tg::randn(tg::randn(shape.shape).permute(shape.dims).shape());
  auto s = std::make_shared<State>(State{tg::randn(shape.shape), dy});
  s->x.requires_grad_();
  return {[s, dims = shape.dims] {
            s->x.set_grad({});
            s->x.permute(dims).backward(s->dy);
          },
          [s] { return all_finite(s->x.grad()); }};
}

// y = Conv2d(x) (with bias), then y.backward(dy): dx, dw and db, reset to undefined each iteration.
bench::Runner conv2d_forward_backward(bench::ConvShape shape) {
  struct State {
    nn::Conv2d conv;
    tg::Tensor x, dy;
  };
  tg::manual_seed(0);
  auto s = std::make_shared<State>(
      State{nn::Conv2d(shape.C_in, shape.C_out, shape.kernel,
                       nn::Conv2dOptions{.stride = shape.stride, .padding = shape.padding, .dilation = shape.dilation,
                                         .groups = shape.groups}),
            tg::randn({shape.N, shape.C_in, shape.H, shape.W}),
            tg::randn({shape.N, shape.C_out, shape.H_out(), shape.W_out()})});
  s->x.requires_grad_();
  return {[s] {
            s->x.set_grad({});
            s->conv.zero_grad();
            s->conv(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->conv.weight.grad(), s->conv.bias.grad()}); }};
}

// y = BatchNorm2d(C)(x) in training mode (batch statistics, running statistics updated), then
// y.backward(dy): dx, dγ and dβ.
bench::Runner batch_norm2d_forward_backward(bench::ImageShape shape) {
  struct State {
    nn::BatchNorm2d bn;
    tg::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{nn::BatchNorm2d(shape.C), tg::randn({shape.N, shape.C, shape.H, shape.W}),
                                         tg::randn({shape.N, shape.C, shape.H, shape.W})});
  s->x.requires_grad_();
  return {[s] {
            s->x.set_grad({});
            s->bn.zero_grad();
            s->bn(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->bn.weight.grad(), s->bn.bias.grad()}); }};
}

// y = max_pool2d(x, 2), then y.backward(dy): dx.
bench::Runner max_pool2d_forward_backward(bench::ImageShape shape) {
  struct State {
    tg::Tensor x, dy;
  };
  auto s = std::make_shared<State>(
      State{tg::randn({shape.N, shape.C, shape.H, shape.W}), tg::randn({shape.N, shape.C, shape.H / 2, shape.W / 2})});
  s->x.requires_grad_();
  return {[s] {
            s->x.set_grad({});
            nn::functional::max_pool2d(s->x, 2).backward(s->dy);
          },
          [s] { return all_finite(s->x.grad()); }};
}

// ((a*b)+c).sum().backward() on n-element tensors: four tape nodes, so this is per-op overhead.
// The gradients of a, b and c accumulate over the iterations, as they would in user code.
bench::Runner tiny_graph(int64_t n) {
  struct State {
    tg::Tensor a, b, c;
  };
  auto s = std::make_shared<State>(State{tg::randn({n}), tg::randn({n}), tg::randn({n})});
  for (tg::Tensor* t : {&s->a, &s->b, &s->c}) t->requires_grad_();
  return {[s] { ((s->a * s->b) + s->c).sum().backward(); },
          [s] { return all_finite({s->a.grad(), s->b.grad(), s->c.grad()}); }};
}

// STREAM-style kernels over arrays far larger than the L3, split in equal parts over the threads.
// Plain loops that GCC vectorises; bytes counted as STREAM does (copy 8 B, triad 12 B per
// element: the write-allocate read of the destination is not counted).
template <typename Kernel>
void stream_for(int64_t n, const Kernel& kernel) {
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n, 4096),
      [&](const tbb::blocked_range<int64_t>& r) { kernel(r.begin(), r.end()); }, tbb::static_partitioner());
}

struct StreamArrays {
  std::vector<float> a, b, c;
  explicit StreamArrays(int64_t n) : a(n, 0.0f), b(n, 1.0f), c(n, 2.0f) {}  // first touch: every page mapped
  bool finite() const { return std::isfinite(a.front()) && std::isfinite(a.back()); }
};

bench::Runner stream_copy(int64_t n) {
  auto s = std::make_shared<StreamArrays>(n);
  return {[s, n] {
            float* __restrict a = s->a.data();
            const float* __restrict b = s->b.data();
            stream_for(n, [=](int64_t i0, int64_t i1) {
              for (int64_t i = i0; i < i1; ++i) a[i] = b[i];  // a = b
            });
          },
          [s] { return s->finite(); }};
}

bench::Runner stream_triad(int64_t n) {
  auto s = std::make_shared<StreamArrays>(n);
  return {[s, n] {
            float* __restrict a = s->a.data();
            const float* __restrict b = s->b.data();
            const float* __restrict c = s->c.data();
            stream_for(n, [=](int64_t i0, int64_t i1) {
              for (int64_t i = i0; i < i1; ++i) a[i] = b[i] + 3.0f * c[i];  // a = b + s·c
            });
          },
          [s] { return s->finite(); }};
}

}  // namespace

int main(int argc, char** argv) {
  tg::manual_seed(0);
  const bench::Backend backend{
      .set_num_threads = [](int n) { tg::set_num_threads(n); },
      .layer_norm_forward = layer_norm_forward,
      .layer_norm_forward_backward = layer_norm_forward_backward,
      .copy = copy,
      .train_step = train_step,
      .tiny_graph = tiny_graph,
      .stream_copy = stream_copy,
      .stream_triad = stream_triad,
      .gemm = gemm,
      .gemm_bf16 = [](bench::GemmShape shape) { return at_medium_precision(gemm(shape)); },
      .bmm_forward_backward = bmm_forward_backward,
      .softmax_forward_backward = softmax_forward_backward,
      .cross_entropy_forward_backward = cross_entropy_forward_backward,
      .gelu_forward_backward = gelu_forward_backward,
      .gelu_tanh_forward_backward = gelu_tanh_forward_backward,
      .dropout_forward = dropout_forward,
      .adamw_step = adamw_step,
      .attention_causal_forward_backward = attention_causal_forward_backward,
      .attention_causal_bf16_forward_backward =
          [](bench::AttentionShape shape) { return at_medium_precision(attention_causal_forward_backward(shape)); },
      .lstm_forward_backward = lstm_forward_backward,
      .sort_forward = sort_forward,
      .topk_forward = topk_forward,
      .permute_forward_backward = permute_forward_backward,
      .conv2d_forward_backward = conv2d_forward_backward,
      .conv2d_bf16_forward_backward =
          [](bench::ConvShape shape) { return at_medium_precision(conv2d_forward_backward(shape)); },
      .batch_norm2d_forward_backward = batch_norm2d_forward_backward,
      .max_pool2d_forward_backward = max_pool2d_forward_backward,
      .fma_peak = fma_peak,
      .fma_flops_per_thread = [] { return bench::flops_per_fma() * bench::kFmaPerIteration; },
      .banner = [] { return "cpu: " + tg::to_string(tg::cpu_info()); },
  };
  return bench::run_main(argc, argv, backend);
}
