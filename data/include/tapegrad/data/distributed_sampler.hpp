/// @file
/// tg::data::DistributedSampler — each replica's share of a dataset, as PyTorch 1.13's
/// torch.utils.data.distributed.DistributedSampler partitions it.
///
/// @code
///   tg::data::DistributedSampler sampler(dataset.size(), {.num_replicas = tg::dist::world_size(),
///                                                         .rank = tg::dist::rank()});
///   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
///     sampler.set_epoch(epoch);                        // a new shuffle, the same on every rank
///     for (const auto& batch : tg::data::BatchSampler(sampler, 32, false).batches()) ...
///   }
/// @endcode
///
/// One pass: the order (randperm(size) from a generator seeded seed + epoch, or 0 ... size − 1),
/// padded to a multiple of num_replicas by repeating its start (or, with drop_last, cut down to
/// one), then every num_replicas-th index from position rank. The replicas' shares are disjoint
/// apart from the padding, and of equal length, so every rank runs the same number of steps.
///
/// It lives in tg::data, not tg::dist: it needs no MPI (num_replicas and rank are plain numbers),
/// so it is there in every build and testable in one process.
#pragma once

#include <cstdint>
#include <vector>

namespace tg::data {

/// DistributedSampler's options, by PyTorch's names and with its defaults.
struct DistributedSamplerOptions {
  int64_t num_replicas = 1;  ///< the world size
  int64_t rank = 0;          ///< this replica, 0 ... num_replicas − 1
  bool shuffle = true;       ///< a new random order every epoch (seeded by seed + epoch)
  uint64_t seed = 0;         ///< the same on every replica
  bool drop_last = false;    ///< drop the tail instead of padding it
};

/// Each replica's share of a dataset's indices, as torch.utils.data.DistributedSampler.
class DistributedSampler {
 public:
  /// tg::Error for size < 0, num_replicas < 1, or a rank outside [0, num_replicas − 1].
  DistributedSampler(int64_t size, DistributedSamplerOptions options = {});
  int64_t size() const { return num_samples_; }  ///< indices per pass on this replica
  std::vector<int64_t> indices();                ///< this replica's share of the current epoch
  void set_epoch(int64_t epoch) { epoch_ = epoch; }  ///< the epoch whose order indices() draws
  int64_t epoch() const { return epoch_; }            ///< as set by set_epoch (0 at first)

 private:
  int64_t dataset_size_;
  DistributedSamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace tg::data
