/// @file
/// Collectives on tensors across the ranks of the job (torch.distributed's, on MPI).
///
/// @code
///   tg::Tensor loss_sum = tg::scalar_tensor(batch_loss, tg::kFloat64);
///   tg::dist::all_reduce(loss_sum, tg::dist::ReduceOp::Mean);  // in place: the mean over ranks
///   tg::Tensor everyone = tg::dist::all_gather(local);         // [world_size, local's shape...]
/// @endcode
///
/// @code
///   tg::dist::Work work = tg::dist::all_reduce_async(grad, tg::dist::ReduceOp::Sum);
///   ...                                                        // compute while it travels
///   work.wait();
/// @endcode
///
/// Every rank must call the same collectives in the same order, with tensors of one dtype
/// (float32, float64 or int64) and one shape. That is checked first: each collective exchanges a
/// small descriptor (which collective, op, root, dtype, shape) before any data moves, and a rank
/// that differs makes the collective throw tg::Error on EVERY rank, naming both ranks' tensors,
/// instead of hanging or mixing up bytes. That check costs one small all-gather per collective; a
/// tensor of up to 256 bytes (a loss, a metric, a flag) travels inside it, so such a collective is
/// over after that one round trip (reduced in rank order: the same bits on every rank and in every
/// run at a fixed world size).
///
/// How they run: a blocking collective checks, then makes the blocking MPI call on the calling
/// thread. An asynchronous one checks on the calling thread (so that disagreeing ranks throw at
/// the call), then queues the blocking MPI call for tg::dist's communication thread, one per
/// process, which runs the queue in order (as PyTorch's gloo process group does): no MPI_Test
/// from the caller is needed for it to progress, and it moves at the blocking call's speed
/// (Open MPI's non-blocking collectives take slower paths). A collective called while others are
/// queued first waits for them, since every rank must reach MPI in the same order. A failure in
/// MPI becomes a tg::Error thrown by wait().
///
/// Results are bitwise identical from run to run at a fixed world size: Open MPI's reduction
/// order depends on the message size and the number of ranks only.
#pragma once

#include <memory>

#include "tapegrad/tensor.hpp"

namespace tg::dist {

/// Mean is Sum divided by world_size() (float tensors only), as ReduceOp.AVG.
enum class ReduceOp { Sum, Mean, Max, Min };

/// A collective in flight. wait() blocks until it has completed on this rank and returns its
/// result (the tensor updated in place, or the new tensor); tg::Error if MPI reported a failure.
/// A Work dropped without wait() waits in its destructor: its buffers must outlive the transfer.
class [[nodiscard]] Work {
 public:
  struct State;  // collectives.cpp
  explicit Work(std::shared_ptr<State> state);  ///< made by the *_async collectives
  Work(Work&&) noexcept;                        ///< takes over the collective
  Work& operator=(Work&&) noexcept;             ///< waits for its own collective, then takes over other's
  ~Work();
  Tensor wait();                                ///< blocks until done; the result
  bool is_completed();  ///< true once wait() would not block

 private:
  std::shared_ptr<State> state_;
};

/// In place: tensor becomes op over every rank's tensor, elementwise.
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum);
/// The same, returning at once: Work::wait() gives the result.
Work all_reduce_async(Tensor& tensor, ReduceOp op = ReduceOp::Sum);

/// In place: every rank's tensor becomes root's.
void broadcast(Tensor& tensor, int root = 0);
/// The same, returning at once: Work::wait() gives the result.
Work broadcast_async(Tensor& tensor, int root = 0);

/// [world_size, input's shape...]: row r is rank r's input (torch.stack of dist.all_gather's list).
Tensor all_gather(const Tensor& input);
/// The same, returning at once: Work::wait() gives the result.
Work all_gather_async(const Tensor& input);

/// input: [world_size, S...] on every rank. Returns [S...] = op over ranks of their input[rank()]
/// (dist.reduce_scatter with the list stacked along dim 0).
Tensor reduce_scatter(const Tensor& input, ReduceOp op = ReduceOp::Sum);
/// The same, returning at once: Work::wait() gives the result.
Work reduce_scatter_async(const Tensor& input, ReduceOp op = ReduceOp::Sum);

}  // namespace tg::dist
