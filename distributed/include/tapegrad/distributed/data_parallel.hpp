/// @file
/// tg::dist::DataParallel — PyTorch's DistributedDataParallel for a tg::nn::Module, on MPI.
///
/// @code
///   tg::dist::DataParallel ddp(model, {.bucket_cap_mb = 25});  // every rank now has rank 0's weights
///   tg::optim::SGD optimizer(model.parameters(), {.lr = 0.1});
///   for (const tg::data::Example& batch : loader) {             // this rank's share of the batch
///     optimizer.zero_grad();
///     ddp.backward(tg::nn::cross_entropy(ddp(batch.data), batch.target));
///     optimizer.step();                                        // the same step on every rank
///   }
/// @endcode
///
/// How gradients travel: the parameters are grouped into buckets of about bucket_cap_mb MiB, in
/// reverse registration order (the order backward usually finishes them). Each parameter's
/// post-accumulate-grad hook copies its gradient into its bucket's flat buffer; once a bucket is
/// full its all-reduce starts (a blocking MPI_Allreduce on tg::dist's communication thread, see
/// collectives.hpp), while backward goes on with the layers below.
/// Buckets start in index order on every rank, as MPI requires of collectives. `backward(loss)`
/// is loss.backward() followed by `synchronize()`, which waits for the buckets and writes back
/// the averaged gradients (sum over ranks / world size): tapegrad's engine has no end-of-backward
/// callback, and a wrapper call is harder to forget than a separate one.
///
/// Two modes:
/// - default: every rank runs one backward per step on its share of the batch; the all-reduce
///   sums in an order Open MPI fixes by message size and rank count, so runs are bitwise
///   reproducible at a fixed world size, and agree with one process on the whole batch to
///   rounding (1e-12 relative in float64).
/// - exact (`.exact_shards = S`): the batch is cut into S equal shards; each rank runs backward
///   once per local shard (S / world_size of them) and the gradient is the fixed-order sum
///   g_0 + g_1 + ... + g_{S−1} over all shards, divided by S. The result is bitwise the same for
///   every world size that divides S, a single process included. It costs S / world_size smaller
///   backward passes per rank, and an all-gather of every shard's gradient (S × the model's
///   gradient bytes per rank) instead of an all-reduce, with no overlap with backward.
///
/// Buffers (BatchNorm's running_mean, running_var, num_batches_tracked), as DDP with its default
/// broadcast_buffers=True: the constructor broadcasts rank 0's buffers with its parameters, and
/// each forward through the wrapper first broadcasts rank 0's buffers to every rank, all of them in
/// one message (their bytes back to back, whatever their dtypes), so every rank starts the forward
/// from, and a checkpoint written after it holds, rank 0's running statistics. In that same message
/// each rank reports whether its buffers still have the names, shapes and dtypes of
/// construction: if not, the forward throws tg::Error on every rank. As in DDP that broadcast happens only if the previous forward ran
/// with grad mode on and outside no_sync() (and before the first forward): forwards under a
/// NoGradGuard (evaluation) or inside no_sync() do not make the next one communicate, so ranks may
/// evaluate different numbers of batches; the first forward after a training forward still
/// broadcasts, on every rank. A module without buffers sends nothing. BatchNorm's batch statistics
/// in training mode are this rank's (its share of the batch), as in DDP: BatchNorm does not see
/// the whole batch (PyTorch's SyncBatchNorm, which would, is not provided).
///
/// Exact mode and buffers: the parameters and gradients stay bitwise the same at every world size
/// (BatchNorm in training mode normalises each shard with that shard's statistics, whichever rank
/// runs it), but the running statistics are rank 0's, updated once per forward by rank 0's
/// S / world_size shards per step: they depend on the world size (one process updates them S times
/// per step), and so do outputs computed from them in evaluation mode.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tapegrad/nn/module.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::dist {

/// DataParallel's options.
struct DataParallelOptions {
  double bucket_cap_mb = 25.0;  ///< MiB of gradients per all-reduce (PyTorch's bucket_cap_mb)
  /// A parameter that gets no gradient in a backward is an error naming it, on every rank; with
  /// this option it counts as a zero gradient instead, and one that no rank used keeps its grad.
  bool find_unused_parameters = false;
  int64_t exact_shards = 0;  ///< S > 0: exact mode (above); S must be a multiple of world_size()
  /// DDP's broadcast_buffers: rank 0's buffers sent to every rank before a forward (above). The
  /// constructor broadcasts them either way.
  bool broadcast_buffers = true;
};

/// PyTorch's DistributedDataParallel for a module: rank 0's weights everywhere, gradients averaged
/// over the ranks (data_parallel.hpp).
class DataParallel {
 public:
  /// Broadcasts rank 0's parameters and buffers to every rank (tg::Error on every rank if the ranks'
  /// models differ in the number, shapes or dtypes of their parameters or buffers) and hooks every
  /// parameter. The module must outlive the wrapper; convert its dtype (Module::to) before wrapping
  /// it: its buffers must keep their shapes and dtypes while it is wrapped.
  explicit DataParallel(nn::Module& module, DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(DataParallel&&) noexcept;  ///< takes over the hooks and the buckets
  DataParallel& operator=(DataParallel&&) = delete;
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// module(input), after broadcasting rank 0's buffers to every rank if due (see Buffers above);
  /// tg::Error if the previous backward was not synchronized, or, on every rank, if a rank's
  /// buffers changed shape or dtype since construction.
  Tensor operator()(const Tensor& input);
  /// loss.backward(), then synchronize() — in exact mode once every local shard has had its
  /// backward, and never inside no_sync().
  void backward(const Tensor& loss);
  /// Waits for this pass's all-reduces and replaces every parameter's grad with the average over
  /// the ranks. Needed only after a backward called directly (loss.backward()). A gradient that
  /// requires grad (from a backward with create_graph = true) is a tg::Error naming the parameters:
  /// the average is not differentiable, as PyTorch's data-parallel wrappers refuse such gradients.
  void synchronize();

  /// While the returned guard lives, backward accumulates gradients locally without any
  /// communication (gradient accumulation); the first backward after it all-reduces the sum.
  class [[nodiscard]] NoSyncGuard {
   public:
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    friend class DataParallel;
    explicit NoSyncGuard(DataParallel& parallel);
    DataParallel& parallel_;
    bool previous_;
  };
  NoSyncGuard no_sync();  ///< no all-reduce while the returned guard lives (NoSyncGuard)

  nn::Module& module();  ///< the wrapped module
  /// The parameters' names, bucket by bucket, in the order the buckets are all-reduced.
  std::vector<std::vector<std::string>> buckets() const;
  /// Exact mode: the local shards this rank runs per step, and the global index of its j-th one
  /// (rank r has shards r·S/N ... (r + 1)·S/N − 1).
  ///@{
  int64_t local_shards() const;
  int64_t global_shard(int64_t local_shard) const;
  ///@}

  struct State;  // data_parallel.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace tg::dist
