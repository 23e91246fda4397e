// tg_bench_torch — the same cases as tg_bench, written the way a libtorch user would write them,
// for bench/run.py to compare against (it also sets libtorch's best environment: see run.py).
//
// Like tg_bench: forward under NoGradGuard, gradients reset to undefined (set_to_none) after each
// iteration. libtorch 1.13's Optimizer::zero_grad() zeroes gradients in place instead, which costs
// a memset and makes the next backward accumulate; set_to_none (PyTorch 2's default) is faster,
// so that is what this program does, to give libtorch its best chance.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <tuple>
#include <vector>

#include "harness.hpp"

namespace {

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  for (const torch::Tensor& t : tensors)
    if (!t.defined() || !torch::isfinite(t.to(torch::kFloat32)).all().item<bool>()) return false;
  return true;
}

void reset_grads(const std::vector<torch::Tensor>& tensors) {
  for (torch::Tensor t : tensors) t.mutable_grad().reset();
}

torch::nn::LayerNorm make_layer_norm(int64_t cols) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({cols}).eps(1e-5));
}

bench::Runner layer_norm_forward(bench::LayerNormShape shape) {
  struct State {
    torch::nn::LayerNorm ln;
    torch::Tensor x, y;
  };
  auto s = std::make_shared<State>(State{make_layer_norm(shape.cols), torch::randn({shape.rows, shape.cols}), {}});
  return {[s] {
            torch::NoGradGuard no_grad;
            s->y = torch::Tensor();
            s->y = s->ln(s->x);
          },
          [s] { return all_finite({s->y}); }};
}

bench::Runner layer_norm_forward_backward(bench::LayerNormShape shape) {
  struct State {
    torch::nn::LayerNorm ln;
    torch::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{make_layer_norm(shape.cols), torch::randn({shape.rows, shape.cols}),
                                         torch::randn({shape.rows, shape.cols})});
  s->x.requires_grad_();
  return {[s] {
            reset_grads({s->x, s->ln->weight, s->ln->bias});
            s->ln(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->ln->weight.grad(), s->ln->bias.grad()}); }};
}

bench::Runner train_step(bench::TrainShape shape) {
  struct State {
    torch::nn::Sequential model;
    torch::optim::SGD optimizer;
    torch::Tensor x, target, loss;
    explicit State(bench::TrainShape s)
        : model(torch::nn::Linear(s.in, s.hidden), torch::nn::ReLU(), make_layer_norm(s.hidden)),
          optimizer(model->parameters(), torch::optim::SGDOptions(0.1)),
          x(torch::randn({s.batch, s.in})),
          target(torch::randn({s.batch, s.hidden})) {}
  };
  torch::manual_seed(0);
  auto s = std::make_shared<State>(shape);
  return {[s] {
            s->loss = torch::mse_loss(s->model->forward(s->x), s->target);
            s->loss.backward();
            s->optimizer.step();
            reset_grads(s->model->parameters());  // zero_grad(set_to_none=True)
          },
          [s] {
            std::vector<torch::Tensor> outputs = s->model->parameters();
            outputs.push_back(s->loss);
            return all_finite(outputs);
          }};
}

bench::Runner gemm(bench::GemmShape shape) {
  struct State {
    torch::Tensor a, b, c;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.M, shape.K}), torch::randn({shape.K, shape.N}), {}});
  return {[s] {
            torch::NoGradGuard no_grad;
            s->c = torch::Tensor();
            s->c = torch::matmul(s->a, s->b);
          },
          [s] { return all_finite({s->c}); }};
}

// C = A·B on bf16 tensors (oneDNN's bf16 GEMM: bf16 products, float32 sums, the result rounded to
// bf16); libtorch 1.13 has no bf16 path for float32 CPU products.
bench::Runner gemm_bf16(bench::GemmShape shape) {
  struct State {
    torch::Tensor a, b, c;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.M, shape.K}).to(torch::kBFloat16),
                                         torch::randn({shape.K, shape.N}).to(torch::kBFloat16), {}});
  return {[s] {
            torch::NoGradGuard no_grad;
            s->c = torch::Tensor();
            s->c = torch::matmul(s->a, s->b);
          },
          [s] { return all_finite({s->c.to(torch::kFloat32)}); }};
}

// C = torch::bmm(A, B), then C.backward(dC); gradients reset with set_to_none.
bench::Runner bmm_forward_backward(bench::BmmShape shape) {
  struct State {
    torch::Tensor a, b, dc;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.B, shape.M, shape.K}).requires_grad_(),
                                         torch::randn({shape.B, shape.K, shape.N}).requires_grad_(),
                                         torch::randn({shape.B, shape.M, shape.N})});
  return {[s] {
            s->a.mutable_grad().reset();
            s->b.mutable_grad().reset();
            torch::bmm(s->a, s->b).backward(s->dc);
          },
          [s] { return all_finite({s->a.grad(), s->b.grad()}); }};
}

bench::Runner tiny_graph(int64_t n) {
  struct State {
    torch::Tensor a, b, c;
  };
  auto s = std::make_shared<State>(State{torch::randn({n}).requires_grad_(), torch::randn({n}).requires_grad_(),
                                         torch::randn({n}).requires_grad_()});
  return {[s] { ((s->a * s->b) + s->c).sum().backward(); },
          [s] { return all_finite({s->a.grad(), s->b.grad(), s->c.grad()}); }};
}

// The toolkit cases, each over a [rows, cols] float32 tensor.
template <typename Op>
bench::Runner unary_forward_backward(bench::ToolkitShape shape, Op op) {
  struct State {
    torch::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.rows, shape.cols}).requires_grad_(),
                                         torch::randn({shape.rows, shape.cols})});
  return {[s, op] {
            s->x.mutable_grad().reset();
            op(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad()}); }};
}

bench::Runner softmax_forward_backward(bench::ToolkitShape shape) {
  return unary_forward_backward(shape, [](const torch::Tensor& x) { return torch::softmax(x, -1); });
}

bench::Runner cross_entropy_forward_backward(bench::ToolkitShape shape) {
  struct State {
    torch::Tensor logits, targets;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.rows, shape.cols}).requires_grad_(),
                                         torch::randint(shape.cols, {shape.rows})});
  return {[s] {
            s->logits.mutable_grad().reset();
            torch::nn::functional::cross_entropy(s->logits, s->targets).backward();
          },
          [s] { return all_finite({s->logits.grad()}); }};
}

bench::Runner gelu_forward_backward(bench::ToolkitShape shape) {
  return unary_forward_backward(shape, [](const torch::Tensor& x) { return torch::gelu(x); });
}

bench::Runner gelu_tanh_forward_backward(bench::ToolkitShape shape) {
  return unary_forward_backward(shape, [](const torch::Tensor& x) { return torch::gelu(x, "tanh"); });
}

bench::Runner dropout_forward(bench::ToolkitShape shape) {
  struct State {
    torch::Tensor x, y;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.rows, shape.cols}), {}});
  return {[s] {
            torch::NoGradGuard no_grad;
            s->y = torch::Tensor();
            s->y = torch::dropout(s->x, 0.1, /*train=*/true);
          },
          [s] { return all_finite({s->y}); }};
}

bench::Runner adamw_step(bench::ToolkitShape shape) {
  struct State {
    torch::Tensor param;
    torch::optim::AdamW optimizer;
  };
  torch::Tensor param = torch::randn({shape.rows, shape.cols}).requires_grad_();
  param.mutable_grad() = torch::randn({shape.rows, shape.cols});
  auto s = std::make_shared<State>(
      State{param, torch::optim::AdamW({param}, torch::optim::AdamWOptions(1e-3).weight_decay(1e-2))});
  return {[s] { s->optimizer.step(); }, [s] { return all_finite({s->param}); }};
}

// Causal attention forward+backward, PyTorch 1.13's fastest path for it on the CPU: either the
// composite a user writes (nanoGPT's: q·kᵀ·scale, masked_fill of the upper triangle with −inf,
// softmax, ·v) or at::_scaled_dot_product_attention (1.13's private op, its math path). Both are
// timed for a few iterations when the case is built and the faster one is benchmarked; the choice
// is printed on stderr. With --min-time 0 (one sample: the CI's smoke run) each runs once, untimed
// warm-up left out: the choice is then only a check that both paths run.
bench::Runner attention_causal_forward_backward(bench::AttentionShape shape, torch::Dtype dtype = torch::kFloat32) {
  struct State {
    torch::Tensor q, k, v, dy, upper;
    double scale;
  };
  const std::vector<int64_t> dims{1, shape.batch_heads, shape.T, shape.D};
  auto leaf = [&] { return torch::randn(dims).to(dtype).requires_grad_(); };
  auto s = std::make_shared<State>(State{leaf(), leaf(), leaf(), torch::randn(dims).to(dtype),
                                         torch::ones({shape.T, shape.T}, torch::kBool).triu(1),
                                         1.0 / std::sqrt(static_cast<double>(shape.D))});
  auto composite = [s] {
    reset_grads({s->q, s->k, s->v});
    torch::Tensor scores = torch::matmul(s->q, s->k.transpose(-2, -1)) * s->scale;
    scores = scores.masked_fill(s->upper, -std::numeric_limits<float>::infinity());
    torch::matmul(torch::softmax(scores, -1), s->v).backward(s->dy);
  };
  auto fused = [s] {
    reset_grads({s->q, s->k, s->v});
    std::get<0>(at::_scaled_dot_product_attention(s->q, s->k, s->v, {}, 0.0, false, /*is_causal=*/true))
        .backward(s->dy);
  };
  const bool smoke = bench::options().min_time == 0;
  auto seconds = [smoke](const std::function<void()>& step) {
    if (!smoke) step();  // warm-up
    const auto start = bench::detail::Clock::now();
    for (int i = 0; i < (smoke ? 1 : 3); ++i) step();
    return bench::detail::seconds_since(start);
  };
  const bool use_fused = seconds(fused) < seconds(composite);
  std::fprintf(stderr, "# %s/%lldx%lldx%lld: libtorch's %s is faster\n",
               dtype == torch::kFloat32 ? "attention_causal_fwd_bwd" : "attention_causal_bf16_fwd_bwd",
               static_cast<long long>(shape.batch_heads), static_cast<long long>(shape.T),
               static_cast<long long>(shape.D), use_fused ? "_scaled_dot_product_attention" : "composite");
  return {use_fused ? std::function<void()>(fused) : std::function<void()>(composite),
          [s] { return all_finite({s->q.grad(), s->k.grad(), s->v.grad()}); }};
}

// (y, (h, c)) = torch::nn::LSTM(x) from zero states, then y.backward(dy): libtorch's CPU LSTM
// (at::lstm, per-step cells), gradients reset to none.
bench::Runner lstm_forward_backward(bench::LSTMShape shape) {
  struct State {
    torch::nn::LSTM lstm;
    torch::Tensor x, dy;
  };
  auto s = std::make_shared<State>(
      State{torch::nn::LSTM(torch::nn::LSTMOptions(shape.input, shape.hidden).num_layers(shape.layers)),
            torch::randn({shape.steps, shape.batch, shape.input}).requires_grad_(),
            torch::randn({shape.steps, shape.batch, shape.hidden})});
  return {[s] {
            reset_grads({s->x});
            reset_grads(s->lstm->parameters());
            std::get<0>(s->lstm->forward(s->x)).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->lstm->parameters()[0].grad()}); }};
}

// values and indices of torch::sort(x, -1) (or torch::topk(x, kTopK, -1)), no grad.
template <typename Op>
bench::Runner sorting_forward(bench::ToolkitShape shape, Op op) {
  struct State {
    torch::Tensor x, values, indices;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.rows, shape.cols}), {}, {}});
  return {[s, op] {
            torch::NoGradGuard no_grad;
            s->values = torch::Tensor();
            s->indices = torch::Tensor();
            std::tie(s->values, s->indices) = op(s->x);
          },
          [s] { return all_finite({s->values}) && s->indices.defined(); }};
}

bench::Runner sort_forward(bench::ToolkitShape shape) {
  return sorting_forward(shape, [](const torch::Tensor& x) { return torch::sort(x, -1); });
}

bench::Runner topk_forward(bench::ToolkitShape shape) {
  return sorting_forward(shape, [](const torch::Tensor& x) { return torch::topk(x, bench::kTopK, -1); });
}

// y = x.permute(dims).contiguous(), then y.backward(dy): the copy tapegrad's permute makes, and
// the one its gradient needs.
bench::Runner permute_forward_backward(const bench::PermuteShape& shape) {
  struct State {
    torch::Tensor x, dy;
  };
  const torch::Tensor dy = torch::randn(torch::randn(shape.shape).permute(shape.dims).sizes());
  auto s = std::make_shared<State>(State{torch::randn(shape.shape).requires_grad_(), dy});
  return {[s, dims = shape.dims] {
            reset_grads({s->x});
            s->x.permute(dims).contiguous().backward(s->dy);
          },
          [s] { return all_finite({s->x.grad()}); }};
}

// y = Conv2d(x) (with bias), then y.backward(dy): dx, dw and db.
bench::Runner conv2d_forward_backward(bench::ConvShape shape, torch::Dtype dtype = torch::kFloat32) {
  struct State {
    torch::nn::Conv2d conv;
    torch::Tensor x, dy;
  };
  torch::manual_seed(0);
  auto s = std::make_shared<State>(
      State{torch::nn::Conv2d(torch::nn::Conv2dOptions(shape.C_in, shape.C_out, shape.kernel)
                                  .stride(shape.stride)
                                  .padding(shape.padding)
                                  .dilation(shape.dilation)
                                  .groups(shape.groups)),
            torch::randn({shape.N, shape.C_in, shape.H, shape.W}).to(dtype).requires_grad_(),
            torch::randn({shape.N, shape.C_out, shape.H_out(), shape.W_out()}).to(dtype)});
  s->conv->to(dtype);
  return {[s] {
            reset_grads({s->x, s->conv->weight, s->conv->bias});
            s->conv(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->conv->weight.grad(), s->conv->bias.grad()}); }};
}

// y = BatchNorm2d(C)(x) in training mode, then y.backward(dy): dx, dγ and dβ.
bench::Runner batch_norm2d_forward_backward(bench::ImageShape shape) {
  struct State {
    torch::nn::BatchNorm2d bn;
    torch::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{torch::nn::BatchNorm2d(shape.C),
                                         torch::randn({shape.N, shape.C, shape.H, shape.W}).requires_grad_(),
                                         torch::randn({shape.N, shape.C, shape.H, shape.W})});
  return {[s] {
            reset_grads({s->x, s->bn->weight, s->bn->bias});
            s->bn(s->x).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad(), s->bn->weight.grad(), s->bn->bias.grad()}); }};
}

// y = max_pool2d(x, 2), then y.backward(dy): dx.
bench::Runner max_pool2d_forward_backward(bench::ImageShape shape) {
  struct State {
    torch::Tensor x, dy;
  };
  auto s = std::make_shared<State>(State{torch::randn({shape.N, shape.C, shape.H, shape.W}).requires_grad_(),
                                         torch::randn({shape.N, shape.C, shape.H / 2, shape.W / 2})});
  return {[s] {
            reset_grads({s->x});
            torch::max_pool2d(s->x, {2, 2}).backward(s->dy);
          },
          [s] { return all_finite({s->x.grad()}); }};
}

}  // namespace

int main(int argc, char** argv) {
  torch::manual_seed(0);
  const bench::Backend backend{
      .set_num_threads = [](int n) { torch::set_num_threads(n); },
      .layer_norm_forward = layer_norm_forward,
      .layer_norm_forward_backward = layer_norm_forward_backward,
      .copy = {},
      .train_step = train_step,
      .tiny_graph = tiny_graph,
      .stream_copy = {},  // the memcpy and STREAM references are measured by tg_bench only
      .stream_triad = {},
      .gemm = gemm,
      .gemm_bf16 = gemm_bf16,
      .bmm_forward_backward = bmm_forward_backward,
      .softmax_forward_backward = softmax_forward_backward,
      .cross_entropy_forward_backward = cross_entropy_forward_backward,
      .gelu_forward_backward = gelu_forward_backward,
      .gelu_tanh_forward_backward = gelu_tanh_forward_backward,
      .dropout_forward = dropout_forward,
      .adamw_step = adamw_step,
      .attention_causal_forward_backward = [](bench::AttentionShape shape) { return attention_causal_forward_backward(shape); },
      .attention_causal_bf16_forward_backward =
          [](bench::AttentionShape shape) { return attention_causal_forward_backward(shape, torch::kBFloat16); },
      .lstm_forward_backward = lstm_forward_backward,
      .sort_forward = sort_forward,
      .topk_forward = topk_forward,
      .permute_forward_backward = permute_forward_backward,
      .conv2d_forward_backward = [](bench::ConvShape shape) { return conv2d_forward_backward(shape); },
      .conv2d_bf16_forward_backward = [](bench::ConvShape shape) { return conv2d_forward_backward(shape, torch::kBFloat16); },
      .batch_norm2d_forward_backward = batch_norm2d_forward_backward,
      .max_pool2d_forward_backward = max_pool2d_forward_backward,
      .fma_peak = {},
      .fma_flops_per_thread = {},
      .banner = {},
  };
  return bench::run_main(argc, argv, backend);
}
