// tg_bench_torch — the same cases as tg_bench, written the way a libtorch user would write them,
// for bench/run.py to compare against (it also sets libtorch's best environment: see run.py).
//
// Like tg_bench: forward under NoGradGuard, gradients reset to undefined (set_to_none) after each
// iteration. libtorch 1.13's Optimizer::zero_grad() zeroes gradients in place instead, which costs
// a memset and makes the next backward accumulate; set_to_none (PyTorch 2's default) is faster,
// so that is what this program does, to give libtorch its best chance.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "harness.hpp"

namespace {

bool all_finite(const std::vector<torch::Tensor>& tensors) {
  for (const torch::Tensor& t : tensors)
    if (!t.defined() || !torch::isfinite(t).all().item<bool>()) return false;
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
      .bmm_forward_backward = bmm_forward_backward,
      .softmax_forward_backward = softmax_forward_backward,
      .cross_entropy_forward_backward = cross_entropy_forward_backward,
      .gelu_forward_backward = gelu_forward_backward,
      .dropout_forward = dropout_forward,
      .adamw_step = adamw_step,
      .permute_forward_backward = permute_forward_backward,
      .fma_peak = {},
      .fma_flops_per_thread = {},
      .banner = {},
  };
  return bench::run_main(argc, argv, backend);
}
