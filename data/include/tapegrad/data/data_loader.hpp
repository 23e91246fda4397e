/// @file
/// tg::data::DataLoader — batches of a dataset, in order or shuffled, as torch.utils.data.DataLoader
/// with num_workers=0: iterate it with range-for, once per epoch.
///
/// @code
///   tg::Generator generator(0);
///   tg::data::DataLoader loader(tg::data::TensorDataset(images, labels),
///                               {.batch_size = 128, .shuffle = true, .generator = &generator, .prefetch = 2});
///   for (const tg::data::Example& batch : loader)  // batch.data [128, ...], batch.target [128]
///     ...
/// @endcode
///
/// With shuffle and a generator seeded s, the batches are PyTorch's for
/// DataLoader(dataset, batch_size, shuffle=True, generator=torch.Generator().manual_seed(s)), epoch
/// after epoch. As PyTorch's iterator does, each epoch first draws one 64-bit number from the
/// generator (the default one when none is given, shuffled or not), so that the default
/// generator's later draws (dropout, say) stay in step with a PyTorch program too.
///
/// That draw also seeds the random transforms (tg::data::transforms): each batch's transform and
/// batch_transform draw from a generator of the batch's own, seeded with the draw + the batch's
/// index (as PyTorch seeds a worker process with base_seed + worker_id), which
/// transform_generator() returns. The augmented images thus depend on the loader's generator
/// only: the same with or without prefetching, whichever thread loads a batch and whenever.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "tapegrad/data/dataset.hpp"
#include "tapegrad/data/sampler.hpp"
#include "tapegrad/generator.hpp"

namespace tg::data {

/// The generator a random transform draws from when it was given none: while a DataLoader's
/// transform or batch_transform runs, the generator of the batch being loaded (seeded from the
/// loader's per-epoch draw and the batch's index); anywhere else, tg::default_generator(). Drawing
/// from it inside a transform of one's own keeps that transform reproducible under prefetching.
Generator& transform_generator();

/// The DataLoader's options, by PyTorch's names and with its defaults.
struct DataLoaderOptions {
  int64_t batch_size = 1;  ///< samples per batch
  bool shuffle = false;    ///< a new random order every epoch (RandomSampler), else in order
  bool drop_last = false;  ///< drop the last batch when it is smaller than batch_size
  Generator* generator = nullptr;  ///< for shuffling (not owned); null: the default generator
  /// Batches loaded ahead of the one in use, on oneTBB's threads. Never changes the batches or
  /// their order; the transforms must then be safe to call from several threads at once.
  int64_t prefetch = 0;
  std::function<Example(Example)> transform{};        ///< applied to each sample, before collation
  std::function<Example(Example)> batch_transform{};  ///< applied to each collated batch
};

/// Stacks the samples' data, and their targets, along a new dim 0 (PyTorch's default_collate):
/// n samples of shape S make one batch of shape [n, S...]. tg::Error when the samples' shapes or
/// dtypes differ, naming the first sample that differs. tg::stack underneath: recorded on the tape
/// when a sample requires grad, as default_collate's torch.stack is.
Example collate(const std::vector<Example>& samples);

namespace detail {

// One epoch's plan: the 64-bit draw PyTorch's iterator makes (its _base_seed), then the sampler's
// order (RandomSampler or SequentialSampler) cut into batches.
struct EpochPlan {
  uint64_t seed;
  std::vector<std::vector<int64_t>> batches;
};
EpochPlan epoch_batches(int64_t dataset_size, const DataLoaderOptions& options);

// While alive, transform_generator() on this thread is a generator of its own seeded with `seed`;
// the previous one is restored after (scopes nest when oneTBB runs a task inside another's wait).
class TransformGeneratorScope {
 public:
  explicit TransformGeneratorScope(uint64_t seed);
  ~TransformGeneratorScope();
  TransformGeneratorScope(const TransformGeneratorScope&) = delete;
  TransformGeneratorScope& operator=(const TransformGeneratorScope&) = delete;

 private:
  Generator generator_;
  Generator* previous_;
};

// One epoch's batches, produced by load(k) for k = 0 ... count − 1 in order, with up to `prefetch`
// of them loading ahead on oneTBB. Waits for the batches in flight when destroyed.
class BatchStream {
 public:
  BatchStream(int64_t count, std::function<Example(int64_t)> load, int64_t prefetch);
  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  bool done() const;
  const Example& current() const;
  void advance();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

void check_options(const DataLoaderOptions& options);

}  // namespace detail

/// Batches of a dataset, epoch after epoch, as torch.utils.data.DataLoader: `for (const Example&
/// batch : loader)` is one epoch.
template <Dataset D>
class DataLoader {
 public:
  /// Takes the dataset (moved or copied in; shared by the loader's copies). tg::Error for invalid options.
  explicit DataLoader(D dataset, DataLoaderOptions options = {})
      : dataset_(std::make_shared<const D>(std::move(dataset))), options_(std::move(options)) {
    detail::check_options(options_);
  }

  /// An input iterator over one epoch's batches; copies share the epoch.
  class Iterator {
   public:
    using value_type = Example;              ///< a batch
    using difference_type = std::ptrdiff_t;  ///< a distance between two

    Iterator() = default;
    explicit Iterator(std::shared_ptr<detail::BatchStream> stream) : stream_(std::move(stream)) {}  ///< over `stream`
    const Example& operator*() const { return stream_->current(); }        ///< the current batch
    const Example* operator->() const { return &stream_->current(); }      ///< the current batch
    /// To the next batch.
    Iterator& operator++() {
      stream_->advance();
      return *this;
    }
    void operator++(int) { ++*this; }  ///< to the next batch
    /// The epoch is over.
    bool operator==(std::default_sentinel_t) const { return stream_ == nullptr || stream_->done(); }

   private:
    std::shared_ptr<detail::BatchStream> stream_;
  };

  /// Starts an epoch: draws its order (shuffle) and begins loading.
  Iterator begin() const {
    detail::EpochPlan plan = detail::epoch_batches(dataset_->size(), options_);
    const auto count = static_cast<int64_t>(plan.batches.size());
    // The loader runs on oneTBB's threads when prefetching: it owns what it reads.
    auto load = [dataset = dataset_, transform = options_.transform, batch_transform = options_.batch_transform,
                 batches = std::move(plan.batches), seed = plan.seed](int64_t k) {
      const std::vector<int64_t>& indices = batches[static_cast<size_t>(k)];
      // The random transforms' draws: the batch's own generator, whatever thread runs this.
      std::optional<detail::TransformGeneratorScope> draws;
      if (transform || batch_transform) draws.emplace(seed + static_cast<uint64_t>(k));
      auto collate_samples = [&] {
        std::vector<Example> samples;
        samples.reserve(indices.size());
        for (const int64_t index : indices) {
          Example sample = dataset->get(index);
          samples.push_back(transform ? transform(std::move(sample)) : std::move(sample));
        }
        return collate(samples);
      };
      Example batch;
      if constexpr (BatchDataset<D>)  // the same batch, without a tensor per sample
        batch = transform ? collate_samples() : Example(dataset->get_batch(indices));
      else
        batch = collate_samples();
      return batch_transform ? batch_transform(std::move(batch)) : batch;
    };
    return Iterator(std::make_shared<detail::BatchStream>(count, std::move(load), options_.prefetch));
  }
  std::default_sentinel_t end() const { return {}; }  ///< the end of any epoch

  /// Batches per epoch (len(DataLoader)).
  int64_t size() const { return detail::batch_count(dataset_->size(), options_.batch_size, options_.drop_last); }
  const D& dataset() const { return *dataset_; }                 ///< the dataset it loads from
  const DataLoaderOptions& options() const { return options_; }  ///< the options it was built with

 private:
  std::shared_ptr<const D> dataset_;
  DataLoaderOptions options_;
};

}  // namespace tg::data
