#include "tapegrad/distributed/data_parallel.hpp"

#include <cmath>
#include <cstring>
#include <optional>

#include "dispatch.hpp"
#include "mpi.hpp"
#include "parallel_for.hpp"
#include "tapegrad/distributed/collectives.hpp"
#include "tapegrad/distributed/process_group.hpp"
#include "tensor_impl.hpp"

namespace tg::dist {

namespace {

constexpr const char* kOp = "DataParallel";

// One parameter, where its gradient sits in its bucket, and whether it has arrived in this pass.
struct Slot {
  std::string name;
  Tensor parameter;
  size_t bucket = 0;
  int64_t offset = 0;  // of its gradient in the bucket's buffer
  size_t flag = 0;     // the index of its "no gradient here" flag in the buffer
  bool ready = false;
};

// Parameters of one dtype whose gradients travel in one all-reduce.
struct Bucket {
  DType dtype = kFloat32;
  std::vector<size_t> slots{};
  int64_t gradient_numel = 0;
  // buffer: [gradient_numel + slots.size()]: the slots' gradients back to back, then one flag per
  // slot, 1 where this rank (or shard) had no gradient for it. Summed over the ranks, a flag
  // counts them: every rank learns which parameters went unused where, with no extra message.
  Tensor buffer{};
  Tensor shards{};  // exact mode: [local_shards, buffer's length], one row per local shard
  int64_t pending = 0;  // slots not ready yet in this pass
  std::optional<Work> work{};
};

// One buffer's bytes in the coalesced broadcast before a forward.
struct BufferSlot {
  std::string name;
  DType dtype = kFloat32;
  Shape shape{};
  int64_t offset = 0;  // in bytes, into State::buffer_words
  int64_t bytes = 0;
};

int64_t length_of(const Bucket& bucket) { return bucket.gradient_numel + static_cast<int64_t>(bucket.slots.size()); }

std::byte* bytes_of(const Tensor& t) { return static_cast<std::byte*>(tg::detail::impl_of(t)->storage->data); }

// buffer[offset, offset + numel) = grad's values; buffer[flag] = 0. Without a gradient: zeros and
// flag 1. `row` selects a row of a 2-d buffer (exact mode's shards).
void store(const Tensor& buffer, int64_t row_length, int64_t row, const Slot& slot, const Tensor& grad) {
  tg::detail::dispatch_floating(kOp, buffer.dtype(), [&]<typename T>() {
    T* values = reinterpret_cast<T*>(bytes_of(buffer)) + row * row_length;
    const int64_t numel = slot.parameter.numel();
    if (grad.defined()) {
      std::memcpy(values + slot.offset, grad.data<T>(), static_cast<size_t>(numel) * sizeof(T));
    } else {
      std::fill(values + slot.offset, values + slot.offset + numel, T(0));
    }
    values[slot.flag] = grad.defined() ? T(0) : T(1);
  });
}

}  // namespace

struct DataParallel::State {
  nn::Module* module = nullptr;
  DataParallelOptions options;
  int ranks = 1;
  int64_t local_shards = 0;  // exact mode
  std::vector<Slot> slots;   // in bucket order: reverse registration order
  std::vector<Bucket> buckets;  // in all-reduce order
  std::vector<HookHandle> hooks;
  size_t next_bucket = 0;     // the next bucket to launch: they start in index order on every rank
  bool pass_started = false;  // a gradient arrived since the last synchronize()
  bool sync_enabled = true;   // false inside no_sync()
  int64_t shards_done = 0;    // exact mode: local shards whose gradients are stored
  std::vector<BufferSlot> buffer_slots;  // the module's buffers when the wrapper was made
  // Every buffer's bytes back to back, rounded up to whole int64 words, then one flag per rank
  // (broadcast_buffers): an integer sum with zeros copies bytes exactly, so one message carries
  // float32, float64 and int64 buffers alike.
  Tensor buffer_words;
  // DDP's require_forward_param_sync: the last forward ran with grad mode on and outside no_sync()
  // (true before the first). Only then does the next forward broadcast the buffers first.
  bool buffers_due = true;

  bool exact() const { return options.exact_shards > 0; }

  // Starts the full buckets in index order on the communication thread, except the last bucket:
  // its gradients (the first layers') arrive at the very end of backward, so nothing is left to
  // overlap it with, and synchronize() runs it on its own thread instead (no hand-off to the
  // communication thread and back, which on a loaded machine costs scheduler wake-ups).
  void launch_full_buckets() {
    while (next_bucket + 1 < buckets.size() && buckets[next_bucket].pending == 0) {
      Bucket& bucket = buckets[next_bucket++];
      bucket.work.emplace(detail::all_reduce_unchecked(bucket.buffer, ReduceOp::Sum, kOp));
    }
  }

  // The post-accumulate-grad hook of slot `index`.
  void gradient_ready(size_t index) {
    if (!sync_enabled || exact()) return;
    Slot& slot = slots[index];
    check(!slot.ready, kOp, "parameter '", slot.name, "' received a second gradient before synchronize(): after "
          "loss.backward() call ddp.synchronize(), or use ddp.backward(loss)");
    Bucket& bucket = buckets[slot.bucket];
    store(bucket.buffer, 0, 0, slot, slot.parameter.grad());
    slot.ready = true;
    pass_started = true;
    if (--bucket.pending == 0) launch_full_buckets();
  }

  // Every bucket's buffer holds the sum over `count` contributions (ranks, or exact mode's
  // shards), flags included. Each parameter's grad becomes its sum / count, plus `previous` (exact
  // mode: the grads from before the step); one that no contribution had keeps its grad.
  void write_back(int64_t count, const char* contributors, const std::vector<Tensor>& previous) {
    std::vector<double> unused(slots.size());
    std::string missing;
    for (size_t i = 0; i < slots.size(); ++i) {
      const Slot& slot = slots[i];
      unused[i] = buffer_value(buckets[slot.bucket].buffer, static_cast<int64_t>(slot.flag));
      if (unused[i] > 0 && !options.find_unused_parameters) {
        missing += tg::detail::concat(missing.empty() ? "" : ", ", "'", slot.name, "' (on ",
                                      static_cast<int64_t>(std::lround(unused[i])), " of ", count, " ", contributors, ")");
      }
    }
    check(missing.empty(), kOp, "parameters that received no gradient: ", missing,
          ". Every parameter must take part in the loss on every rank, or pass .find_unused_parameters = true");
    NoGradGuard no_grad;
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& slot = slots[i];
      if (std::lround(unused[i]) == count) continue;  // no rank used it: its grad stays as it was
      const Tensor sum = buckets[slot.bucket].buffer;
      Tensor mean = empty(slot.parameter.shape(), slot.parameter.dtype());
      tg::detail::dispatch_floating(kOp, sum.dtype(), [&]<typename T>() {
        const T* from = sum.data<T>() + slot.offset;
        T* to = mean.mutable_data<T>();
        // mean = sum / count, a division as torch's ReduceOp.AVG does
        tg::detail::parallel_for(mean.numel(), tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
          for (int64_t k = begin; k < end; ++k) to[k] = from[k] / static_cast<T>(count);
        });
      });
      slot.parameter.set_grad(previous.empty() || !previous[i].defined() ? mean : previous[i] + mean);
    }
  }

  static double buffer_value(const Tensor& buffer, int64_t index) {
    return tg::detail::dispatch_floating(kOp, buffer.dtype(), [&]<typename T>() {
      return static_cast<double>(buffer.data<T>()[index]);
    });
  }

  // A gradient that requires grad comes from a backward with create_graph = true. The average over
  // the ranks is computed from its values alone, a constant: writing it back would silently drop
  // the graph that create_graph asked for, and a differentiable average would need the all-reduce
  // on the tape of every rank. Refused after the buckets completed, so no rank is left waiting in a
  // collective; the local gradients stay as they are.
  void check_no_graph() const {
    std::string differentiable;
    for (const Slot& slot : slots) {
      if (slot.ready && slot.parameter.grad().requires_grad())
        differentiable += tg::detail::concat(differentiable.empty() ? "" : ", ", "'", slot.name, "'");
    }
    check(differentiable.empty(), kOp, "the gradients of ", differentiable, " require grad (a backward with "
          "create_graph = true): their average over the ranks would not be differentiable. Call ddp.backward(loss) "
          "without create_graph; a gradient penalty (autograd::grad of the output w.r.t. the input with "
          "create_graph, added to the loss) is fine");
  }

  // The next pass starts from nothing: no slot ready, no bucket launched.
  void reset() {
    for (Slot& slot : slots) slot.ready = false;
    for (Bucket& bucket : buckets) {
      bucket.pending = static_cast<int64_t>(bucket.slots.size());
      bucket.work.reset();
    }
    next_bucket = 0;
    pass_started = false;
    shards_done = 0;
  }

  void synchronize_buckets() {
    // Parameters backward did not reach: zeros and their flag, so every bucket still all-reduces.
    for (size_t b = next_bucket; b < buckets.size(); ++b) {
      for (size_t index : buckets[b].slots) {
        if (!slots[index].ready) store(buckets[b].buffer, 0, 0, slots[index], Tensor());
      }
      buckets[b].pending = 0;
    }
    launch_full_buckets();
    try {
      // The last bucket, blocking, here (after the queued ones: the same order on every rank).
      detail::all_reduce_unchecked_now(buckets.back().buffer, ReduceOp::Sum, kOp);
      next_bucket = buckets.size();
      for (Bucket& bucket : buckets) {
        if (bucket.work) bucket.work->wait();
      }
      check_no_graph();
      write_back(ranks, "ranks", {});
    } catch (...) {
      reset();
      throw;
    }
    reset();
  }

  // What changed in the module's buffers since the wrapper was made ("" if nothing): the
  // coalesced broadcast relies on every rank packing the same layout.
  std::string buffer_layout_change(const std::vector<std::pair<std::string, Tensor>>& buffers) const {
    if (buffers.size() != buffer_slots.size()) {
      return tg::detail::concat("it had ", buffer_slots.size(), " buffers, it has ", buffers.size());
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      const BufferSlot& slot = buffer_slots[i];
      const auto& [name, buffer] = buffers[i];
      if (name != slot.name || buffer.dtype() != slot.dtype || buffer.shape() != slot.shape) {
        return tg::detail::concat("buffer '", slot.name, "' was a ", slot.dtype, " tensor of shape ", slot.shape,
                                  ", now '", name, "' is a ", buffer.dtype(), " tensor of shape ", buffer.shape());
      }
    }
    return "";
  }

  // DDP's _sync_buffers: every rank's buffers become rank 0's, in one collective. The buffers are
  // looked up again each time (an assignment to a module's member replaces its buffer), and each
  // rank checks that their layout is still the one agreed at construction. The message is an
  // unchecked (its size was agreed then) int64 sum over the ranks of [buffer words | one flag per
  // rank]: rank 0 puts its buffers' bytes in the words and the other ranks zeros, so the sum is
  // rank 0's bytes exactly (x + 0 in integers), and each rank sets its own flag when its layout
  // changed, so that all of them throw and none unpacks bytes into the wrong buffers. One round
  // trip, where a checked broadcast takes two.
  void broadcast_buffers() {
    NoGradGuard no_grad;
    const std::vector<std::pair<std::string, Tensor>> buffers = module->named_buffers();
    const std::string change = buffer_layout_change(buffers);
    const bool root = rank() == 0;
    int64_t* words = buffer_words.mutable_data<int64_t>();
    const int64_t flags = buffer_words.numel() - ranks;  // the flags' offset
    if (!root) std::fill(words, words + flags, int64_t{0});
    if (change.empty() && root) {
      for (size_t i = 0; i < buffers.size(); ++i) {
        const BufferSlot& slot = buffer_slots[i];
        std::memcpy(bytes_of(buffer_words) + slot.offset, bytes_of(buffers[i].second), static_cast<size_t>(slot.bytes));
      }
    }
    std::fill(words + flags, words + flags + ranks, int64_t{0});
    words[flags + rank()] = change.empty() ? 0 : 1;
    detail::all_reduce_unchecked_now(buffer_words, ReduceOp::Sum, kOp);
    std::string where;
    for (int r = 0; r < ranks; ++r) {
      if (words[flags + r] != 0) where += tg::detail::concat(where.empty() ? "" : ", ", r);
    }
    check(where.empty(), kOp, "the module's buffers must keep the names, shapes and dtypes they had when the wrapper "
          "was made; they changed on rank ", where, change.empty() ? "" : " (here " + change + ")");
    if (root) return;
    for (size_t i = 0; i < buffers.size(); ++i) {
      const BufferSlot& slot = buffer_slots[i];
      // In place, as BatchNorm updates its running statistics: every handle to the buffer sees them.
      std::memcpy(bytes_of(buffers[i].second), bytes_of(buffer_words) + slot.offset, static_cast<size_t>(slot.bytes));
      tg::detail::bump_version(buffers[i].second);
    }
  }

  // Exact mode: every shard's stored gradient from every rank, summed in shard order 0 ... S − 1.
  void synchronize_shards() {
    check(shards_done == local_shards, kOp, "exact mode: synchronize() after ", shards_done, " of this rank's ",
          local_shards, " shards; call backward once per local shard");
    std::vector<Tensor> previous;
    for (Slot& slot : slots) previous.push_back(slot.parameter.grad());
    try {
      for (Bucket& bucket : buckets) {
        const Tensor gathered = all_gather(bucket.shards);  // [ranks, local_shards, length] = shards in order
        const int64_t length = length_of(bucket);
        tg::detail::dispatch_floating(kOp, bucket.dtype, [&]<typename T>() {
          const T* shard = gathered.data<T>();
          T* sum = bucket.buffer.mutable_data<T>();
          std::copy(shard, shard + length, sum);
          // The fixed order that makes the result independent of the world size: g_0 + g_1 + ...
          // for each element (the split over elements changes no element's order).
          tg::detail::parallel_for(length, tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
            for (int64_t s = 1; s < options.exact_shards; ++s) {
              for (int64_t k = begin; k < end; ++k) sum[k] += shard[s * length + k];
            }
          });
        });
      }
      write_back(options.exact_shards, "shards", previous);
    } catch (...) {
      reset();
      throw;
    }
    reset();
  }
};

DataParallel::DataParallel(nn::Module& module, DataParallelOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.module = &module;
  s.options = options;
  s.ranks = world_size();
  const std::vector<std::pair<std::string, Tensor>> parameters = module.named_parameters();
  const std::vector<std::pair<std::string, Tensor>> buffers = module.named_buffers();
  // The ranks agree on the options and the number of parameters and buffers first: otherwise the
  // broadcasts below would pair up different tensors.
  const Tensor settings = tensor({options.bucket_cap_mb, double(options.find_unused_parameters),
                                  double(options.exact_shards), double(options.broadcast_buffers),
                                  double(parameters.size()), double(buffers.size())}, {6}, kFloat64);
  const Tensor all_settings = all_gather(settings);
  const auto describe = [](const std::vector<double>& v) {
    return tg::detail::concat(v[4], " parameters and ", v[5], " buffers with {.bucket_cap_mb = ", v[0],
                              ", .find_unused_parameters = ", v[1], ", .exact_shards = ", v[2],
                              ", .broadcast_buffers = ", v[3], "}");
  };
  for (int r = 1; r < s.ranks; ++r) {
    const std::vector<double> mine = all_settings.index_select(0, tensor({double(r)}, {1}, kInt64)).to_vector<double>();
    const std::vector<double> first = all_settings.index_select(0, tensor({0.0}, {1}, kInt64)).to_vector<double>();
    check(mine == first, kOp, "the ranks disagree: rank 0 has ", describe(first), ", rank ", r, " has ", describe(mine));
  }
  check(options.bucket_cap_mb > 0, kOp, "expected bucket_cap_mb > 0, got ", options.bucket_cap_mb);
  check(options.exact_shards >= 0 && options.exact_shards % s.ranks == 0, kOp,
        "exact_shards must be a multiple of the world size ", s.ranks, ", got ", options.exact_shards);
  s.local_shards = options.exact_shards / s.ranks;
  {
    NoGradGuard no_grad;
    auto broadcast_each = [](const auto& named, const char* kind) {
      for (const auto& [name, tensor] : named) {
        Tensor values = tensor;
        try {
          broadcast(values, 0);
        } catch (const Error& error) {
          throw Error(tg::detail::concat(kOp, ": ", kind, " '", name, "' differs between the ranks: ", error.what()));
        }
      }
    };
    broadcast_each(parameters, "parameter");
    // Buffers too, whatever broadcast_buffers says, as DDP's constructor does.
    broadcast_each(buffers, "buffer");
  }
  int64_t buffer_bytes = 0;
  for (const auto& [name, buffer] : buffers) {
    const int64_t bytes = buffer.numel() * static_cast<int64_t>(element_size(buffer.dtype()));
    s.buffer_slots.push_back(
        BufferSlot{.name = name, .dtype = buffer.dtype(), .shape = buffer.shape(), .offset = buffer_bytes, .bytes = bytes});
    buffer_bytes += bytes;
  }
  if (!buffers.empty()) s.buffer_words = zeros({(buffer_bytes + 7) / 8 + s.ranks}, kInt64);  // + the flags
  // Buckets in reverse registration order, a new one when the dtype changes or the cap is reached.
  const auto cap_bytes = static_cast<int64_t>(options.bucket_cap_mb * 1024 * 1024);
  for (size_t i = parameters.size(); i-- > 0;) {
    const Tensor& parameter = parameters[i].second;
    const int64_t bytes = parameter.numel() * static_cast<int64_t>(element_size(parameter.dtype()));
    if (s.buckets.empty() || s.buckets.back().dtype != parameter.dtype() ||
        (s.buckets.back().gradient_numel > 0 &&
         (s.buckets.back().gradient_numel * static_cast<int64_t>(element_size(parameter.dtype())) + bytes > cap_bytes))) {
      s.buckets.push_back(Bucket{.dtype = parameter.dtype()});
    }
    Bucket& bucket = s.buckets.back();
    s.slots.push_back(Slot{.name = parameters[i].first, .parameter = parameter, .bucket = s.buckets.size() - 1,
                           .offset = bucket.gradient_numel});
    bucket.slots.push_back(s.slots.size() - 1);
    bucket.gradient_numel += parameter.numel();
  }
  for (Bucket& bucket : s.buckets) {
    for (size_t k = 0; k < bucket.slots.size(); ++k) s.slots[bucket.slots[k]].flag = static_cast<size_t>(bucket.gradient_numel) + k;
    bucket.buffer = zeros({length_of(bucket)}, bucket.dtype);
    if (s.exact()) bucket.shards = zeros({s.local_shards, length_of(bucket)}, bucket.dtype);
  }
  s.reset();
  State* shared = state_.get();  // stable: the hooks outlive moves of the wrapper
  for (size_t i = 0; i < s.slots.size(); ++i) {
    s.hooks.push_back(s.slots[i].parameter.register_post_accumulate_grad_hook(
        [shared, i](const Tensor&) { shared->gradient_ready(i); }));
  }
}

DataParallel::DataParallel(DataParallel&&) noexcept = default;

DataParallel::~DataParallel() {
  if (!state_) return;
  for (HookHandle& hook : state_->hooks) hook.remove();
  // Buckets in flight finish in their Work's destructor: MPI must not write into freed buffers.
}

Tensor DataParallel::operator()(const Tensor& input) {
  check(!state_->pass_started, kOp, "forward before the previous backward was synchronized: after "
        "loss.backward() call ddp.synchronize(), or use ddp.backward(loss)");
  State& s = *state_;
  if (s.buffers_due && s.options.broadcast_buffers && !s.buffer_slots.empty()) s.broadcast_buffers();
  Tensor output = (*s.module)(input);
  s.buffers_due = is_grad_enabled() && s.sync_enabled;
  return output;
}

void DataParallel::backward(const Tensor& loss) {
  State& s = *state_;
  if (!s.exact()) {
    loss.backward();
    if (s.sync_enabled) synchronize();
    return;
  }
  check(s.sync_enabled, kOp, "exact mode has no no_sync(): its shards already accumulate");
  check(s.shards_done < s.local_shards, kOp, "exact mode: more backward calls than the ", s.local_shards, " local shards");
  // This shard's gradient alone: the grads from before set aside, then put back.
  std::vector<Tensor> previous;
  for (Slot& slot : s.slots) {
    previous.push_back(slot.parameter.grad());
    slot.parameter.set_grad(Tensor());
  }
  const auto restore = [&] {
    for (size_t i = 0; i < s.slots.size(); ++i) s.slots[i].parameter.set_grad(previous[i]);
  };
  try {
    loss.backward();
  } catch (...) {
    restore();
    throw;
  }
  for (const Slot& slot : s.slots) {
    const Bucket& bucket = s.buckets[slot.bucket];
    store(bucket.shards, length_of(bucket), s.shards_done, slot, slot.parameter.grad());
  }
  restore();
  if (++s.shards_done == s.local_shards) synchronize();
}

void DataParallel::synchronize() {
  State& s = *state_;
  check(s.sync_enabled, kOp, "synchronize() inside no_sync()");
  if (s.exact()) {
    s.synchronize_shards();
  } else {
    s.synchronize_buckets();
  }
}

DataParallel::NoSyncGuard::NoSyncGuard(DataParallel& parallel) : parallel_(parallel), previous_(parallel.state_->sync_enabled) {
  parallel_.state_->sync_enabled = false;
}

DataParallel::NoSyncGuard::~NoSyncGuard() { parallel_.state_->sync_enabled = previous_; }

DataParallel::NoSyncGuard DataParallel::no_sync() {
  check(!state_->exact(), kOp, "exact mode has no no_sync(): its shards already accumulate");
  check(!state_->pass_started, kOp, "no_sync() during a backward pass that was not synchronized");
  return NoSyncGuard(*this);
}

nn::Module& DataParallel::module() { return *state_->module; }

std::vector<std::vector<std::string>> DataParallel::buckets() const {
  std::vector<std::vector<std::string>> names;
  for (const Bucket& bucket : state_->buckets) {
    names.emplace_back();
    for (size_t index : bucket.slots) names.back().push_back(state_->slots[index].name);
  }
  return names;
}

int64_t DataParallel::local_shards() const { return state_->local_shards; }

int64_t DataParallel::global_shard(int64_t local_shard) const {
  check(local_shard >= 0 && local_shard < state_->local_shards, kOp, "local shard ", local_shard,
        " out of range: this rank has ", state_->local_shards);
  return rank() * state_->local_shards + local_shard;
}

}  // namespace tg::dist
