/// @file
/// Grad mode and tape introspection.
///
/// Every operation on tensors that require grad appends a node to the tape: the inputs that need
/// gradients, what the backward needs saved, and one backward function. `backward()` walks the
/// nodes reachable from its root once, in reverse topological order, and frees each node's saved
/// tensors as soon as it has run (PyTorch's retain_graph=false): a second backward through the same
/// graph throws tg::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace tg {

/// While alive, no operation on this thread is recorded (torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

bool is_grad_enabled();  ///< false while a NoGradGuard is alive on this thread

/// Anomaly detection, like torch.autograd.set_detect_anomaly: while it is on, backward checks
/// every gradient it computes and throws tg::Error at the first NaN or Inf, naming the operation
/// that produced it and where that operation was recorded (the AnomalyTag alive at the time).
/// Off by default; when off it costs one relaxed atomic load per recorded operation.
///
/// @code
///   tg::DetectAnomalyGuard detect;              // on until the end of the scope
///   {
///     tg::AnomalyTag tag("block 2");            // ops recorded here are reported as "block 2"
///     y = block2(x);
///   }
///   loss.backward();  // tg::Error: "backward: anomaly: LogBackward produced a NaN gradient for
///                     //  its input 0 (shape [4, 8]); the operation was recorded in 'block 2'"
/// @endcode
void set_detect_anomaly(bool enabled);  ///< process-wide
bool is_anomaly_enabled();  ///< whether anomaly detection is on

/// Turns anomaly detection on (or off) while alive, and restores the previous setting after.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true);  ///< set_detect_anomaly(enabled) until destroyed
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

/// Labels the operations recorded on this thread while it is alive; nested tags join with '/'
/// ("encoder/block 2"). Only read while anomaly detection is on.
class AnomalyTag {
 public:
  explicit AnomalyTag(const std::string& tag);  ///< pushes `tag` on this thread's label until destroyed
  ~AnomalyTag();
  AnomalyTag(const AnomalyTag&) = delete;
  AnomalyTag& operator=(const AnomalyTag&) = delete;

 private:
  size_t previous_length_;
};

/// What register_hook and the other hook registrations return: remove() unregisters the hook (at
/// most once; later calls, and calls after the hooked tensor or module is gone, do nothing).
/// Dropping the handle keeps the hook, as in PyTorch.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remover) : remover_(std::move(remover)) {}  ///< calls `remover` on remove()
  /// Unregisters the hook (the first call only).
  void remove() {
    if (remover_) std::exchange(remover_, nullptr)();
  }

 private:
  std::function<void()> remover_;
};

/// Introspection of the tape.
namespace autograd {
/// Number of tape nodes alive in the process (for tests and leak hunting).
int64_t live_nodes();
}  // namespace autograd

}  // namespace tg
