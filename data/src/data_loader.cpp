// The DataLoader's epoch: its index batches and the stream that loads them, ahead on oneTBB.
#include "tapegrad/data/data_loader.hpp"

#include <tbb/task_group.h>

#include <deque>
#include <exception>
#include <optional>

#include "tapegrad/data/sampler.hpp"

namespace tg::data::detail {

void check_options(const DataLoaderOptions& options) {
  check_batch_size("DataLoader", options.batch_size);
  check(options.prefetch >= 0, "DataLoader", "prefetch should be >= 0, got ", options.prefetch);
}

EpochPlan epoch_batches(int64_t dataset_size, const DataLoaderOptions& options) {
  // PyTorch's _BaseDataLoaderIter draws its _base_seed (for worker processes) before the sampler
  // runs: draw it too, so that the shuffle order and every later draw match.
  const uint64_t seed = (options.generator != nullptr ? *options.generator : default_generator()).random64();
  std::vector<int64_t> order = options.shuffle ? RandomSampler(dataset_size, options.generator).indices()
                                               : SequentialSampler(dataset_size).indices();
  return {seed, batches_of(order, options.batch_size, options.drop_last)};
}

namespace {
// The generator of the batch this thread is loading, or null outside a loader's transforms.
thread_local Generator* current_transform_generator = nullptr;
}  // namespace

TransformGeneratorScope::TransformGeneratorScope(uint64_t seed)
    : generator_(seed), previous_(current_transform_generator) {
  current_transform_generator = &generator_;
}

TransformGeneratorScope::~TransformGeneratorScope() { current_transform_generator = previous_; }

// A batch being loaded: its own task_group, so that the consumer waits for exactly this batch
// while the ones behind it keep loading. The result and any exception land in the slot.
struct PendingBatch {
  tbb::task_group group;
  std::optional<Example> batch;
  std::exception_ptr error;
};

struct BatchStream::State {
  State(int64_t count, std::function<Example(int64_t)> load, int64_t prefetch)
      : count(count), load(std::move(load)), prefetch(prefetch) {}

  int64_t count;
  std::function<Example(int64_t)> load;
  int64_t prefetch;
  int64_t position = 0;        // the batch current() returns
  int64_t next_to_start = 0;   // the next batch to hand to oneTBB
  std::deque<std::unique_ptr<PendingBatch>> in_flight;  // batches next_to_start − size ... − 1
  Example current;

  void start_next() {
    auto pending = std::make_unique<PendingBatch>();
    PendingBatch* slot = pending.get();
    const int64_t k = next_to_start++;
    slot->group.run([this, slot, k] {
      try {
        slot->batch = load(k);
      } catch (...) {
        slot->error = std::current_exception();
      }
    });
    in_flight.push_back(std::move(pending));
  }

  // Makes batch `position` current: loaded right here without prefetching, else taken from the
  // front of the queue once the batches up to position + prefetch have been started.
  void load_current() {
    if (position >= count) return;
    if (prefetch == 0) {
      current = load(position);
      return;
    }
    while (next_to_start < count && next_to_start <= position + prefetch) start_next();
    std::unique_ptr<PendingBatch> front = std::move(in_flight.front());
    in_flight.pop_front();
    front->group.wait();
    if (front->error) std::rethrow_exception(front->error);
    current = std::move(*front->batch);
  }

  ~State() {
    // Tasks reference this state: none may outlive it, whatever they throw.
    for (const std::unique_ptr<PendingBatch>& pending : in_flight) {
      try {
        pending->group.wait();
      } catch (...) {
      }
    }
  }
};

BatchStream::BatchStream(int64_t count, std::function<Example(int64_t)> load, int64_t prefetch)
    : state_(std::make_unique<State>(count, std::move(load), prefetch)) {
  state_->load_current();
}

BatchStream::~BatchStream() = default;

bool BatchStream::done() const { return state_->position >= state_->count; }

const Example& BatchStream::current() const {
  check(!done(), "DataLoader", "the iterator is past the last batch");
  return state_->current;
}

void BatchStream::advance() {
  check(!done(), "DataLoader", "the iterator is past the last batch");
  ++state_->position;
  state_->load_current();
}

}  // namespace tg::data::detail

namespace tg::data {

Generator& transform_generator() {
  Generator* generator = detail::current_transform_generator;
  return generator != nullptr ? *generator : default_generator();
}

}  // namespace tg::data
