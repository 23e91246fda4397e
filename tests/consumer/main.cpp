// Fits y = 2x with one weight, using only the core: tensors, the tape and a hand-written SGD step.
// Exits non-zero when the fit did not converge.
#include <cmath>
#include <iostream>

#include <tapegrad/tapegrad.hpp>

int main() {
  tg::manual_seed(0);
  const tg::Tensor x = tg::randn({32, 1});
  const tg::Tensor y = x * 2.0;
  tg::Tensor w = tg::zeros({1, 1}).requires_grad_();
  double loss_value = 0.0;
  for (int step = 0; step < 200; ++step) {
    const tg::Tensor loss = (tg::matmul(x, w) - y).pow(2).mean();
    loss_value = loss.item();
    loss.backward();
    tg::NoGradGuard no_grad;
    w.copy_(w - 0.1 * w.grad());
    w.set_grad(tg::Tensor());
  }
  std::cout << "loss " << loss_value << ", w " << w << '\n';
  const bool converged = loss_value < 1e-8 && std::fabs(w.item() - 2.0) < 1e-4;
  return converged ? 0 : 1;
}
