// The function the user called for the backward pass running on this thread ("backward",
// "autograd::grad"): the engine's errors name it, including those raised deep inside a node (a
// saved tensor's version, a gradient's shape, a second backward through a freed graph). Set by
// the public entry points around their call of run_backward; "backward" when none is set.
// Private to core/.
#pragma once

namespace tg::autograd {

const char* current_pass_op();

// Names the passes run on this thread while it lives; the previous name comes back after it (a
// backward may run inside another pass's node).
class NamedPass {
 public:
  explicit NamedPass(const char* op);
  ~NamedPass();
  NamedPass(const NamedPass&) = delete;
  NamedPass& operator=(const NamedPass&) = delete;

 private:
  const char* previous_;
};

}  // namespace tg::autograd
