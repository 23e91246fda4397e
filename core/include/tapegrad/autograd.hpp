// Grad mode and tape introspection.
//
// Every operation on tensors that require grad appends a node to the tape: the inputs that need
// gradients, what the backward needs saved, and one backward function. `backward()` walks the
// nodes reachable from its root once, in reverse topological order, and frees each node's saved
// tensors as soon as it has run (PyTorch's retain_graph=false): a second backward through the same
// graph throws tg::Error.
#pragma once

#include <cstdint>

namespace tg {

// While alive, no operation on this thread is recorded (torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

bool is_grad_enabled();  // false while a NoGradGuard is alive on this thread

namespace autograd {
// Number of tape nodes alive in the process (for tests and leak hunting).
int64_t live_nodes();
}  // namespace autograd

}  // namespace tg
