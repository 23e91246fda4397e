#include "tapegrad/distributed/collectives.hpp"

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "dispatch.hpp"
#include "mpi.hpp"
#include "tapegrad/autograd.hpp"
#include "tapegrad/distributed/process_group.hpp"
#include "tensor_impl.hpp"

namespace tg::dist {

// A collective as one blocking MPI call, run either by the calling thread (the blocking
// collectives) or by the communication thread (the *_async ones); wait() finishes it.
struct Work::State {
  const char* op = "";
  std::function<int()> call;  // the blocking MPI call; its return code
  Tensor result;       // what wait() returns: the tensor written in place, or a new one
  Tensor input;        // the send buffer of all_gather and reduce_scatter, alive until completion
  bool divide = false;  // ReduceOp::Mean: the sum arrives, result is divided by the world size
  std::atomic<bool> done{false};  // the MPI call returned (set by the communication thread)
  std::exception_ptr error;       // its tg::Error, if it failed; read after `done`
  bool finished = false;          // wait() has divided and bumped the version
};

namespace {

// Runs the state's MPI call under the MPI lock; a failure becomes the state's error.
void execute(Work::State& state) {
  try {
    const std::lock_guard lock(detail::mpi_mutex());
    detail::check_mpi(state.call(), state.op);
  } catch (...) {
    state.error = std::current_exception();
  }
  state.call = nullptr;  // the lambda's captures (tensors) go with it
}

// One thread per process that runs the asynchronous collectives' blocking MPI calls in submission
// order, as PyTorch's ProcessGroupGloo runs its work queue. A blocking collective takes the
// shared-memory single-copy paths that Open MPI's non-blocking ones (libnbc) do not, at about
// twice the speed for large messages, and it progresses on its own: no MPI_Test from the caller.
// Collectives must reach MPI in the program's order on every rank, so a collective called on the
// caller's thread first waits until the queue is empty (drain()).
class CommunicationThread {
 public:
  void submit(std::shared_ptr<Work::State> state) {
    {
      const std::lock_guard lock(mutex_);
      if (!thread_.joinable()) {
        stopping_ = false;
        thread_ = std::thread([this] { loop(); });
      }
      queue_.push_back(std::move(state));
      ++in_flight_;
    }
    wake_.notify_one();
  }

  // Returns once every submitted collective has returned from MPI.
  void drain() {
    std::unique_lock lock(mutex_);
    help_until(lock, [&] { return in_flight_ == 0; });
  }

  // Returns once `state` has returned from MPI.
  void wait_for(const Work::State& state) {
    if (state.done.load(std::memory_order_acquire)) return;
    std::unique_lock lock(mutex_);
    help_until(lock, [&] { return state.done.load(std::memory_order_acquire); });
  }

  // Drains the queue and ends the thread (before MPI is finalized).
  void stop() {
    {
      std::unique_lock lock(mutex_);
      help_until(lock, [&] { return in_flight_ == 0; });
      if (!thread_.joinable()) return;
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

 private:
  // A caller that is going to wait anyway runs the queue's next collective itself when the
  // communication thread is not running one: the usual "start it, then wait for it" (the last
  // bucket of a backward, a collective queued just before a blocking one) then costs no thread
  // hand-off, no wake-up of a sleeping thread and of the caller again, which on a loaded machine
  // can cost a scheduler time slice each. One collective runs at a time, in queue order, whichever
  // thread runs it.
  template <typename Done>
  void help_until(std::unique_lock<std::mutex>& lock, Done done) {
    while (!done()) {
      if (!running_ && !queue_.empty()) {
        run_front(lock);
      } else {
        finished_.wait(lock);
      }
    }
  }

  // Pops the queue's front, runs it without the lock, marks it done. Called with the lock held.
  void run_front(std::unique_lock<std::mutex>& lock) {
    std::shared_ptr<Work::State> state = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    execute(*state);
    lock.lock();
    state->done.store(true, std::memory_order_release);
    running_ = false;
    --in_flight_;
    finished_.notify_all();  // waiters, and a helper or the thread waiting to run the next one
    if (!queue_.empty()) wake_.notify_one();
  }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || (!running_ && !queue_.empty()); });
      if (!running_ && !queue_.empty()) {
        run_front(lock);
      } else if (stopping_) {
        return;
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;      // the thread: work arrived, or stop
  std::condition_variable finished_;  // the callers: a collective returned, or the queue's runner is free
  std::deque<std::shared_ptr<Work::State>> queue_;
  int64_t in_flight_ = 0;  // queued or running
  bool running_ = false;   // a thread is inside a queued collective's MPI call
  bool stopping_ = false;
  std::thread thread_;
};

// Never destroyed: a program that calls std::exit with a Context alive must not run the
// destructor of a joinable std::thread (std::terminate).
CommunicationThread& communication_thread() {
  static auto* thread = new CommunicationThread();
  return *thread;
}

}  // namespace

void detail::drain() { communication_thread().drain(); }
void detail::stop_communication_thread() { communication_thread().stop(); }

namespace {

enum class Collective : int64_t { AllReduce, Broadcast, AllGather, ReduceScatter };

const char* name(Collective collective) {
  switch (collective) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

// Why a rank cannot take part although every rank agrees on the call. Shared with the peers, so
// that all of them throw, not only the rank that found the problem.
enum class Problem : int64_t { None, Undefined, Bool, MeanOfIntegers, RootOutOfRange, RequiresGrad, NotOneRowPerRank, TooLarge };

// What each rank is about to do: exchanged before any data moves (one all-gather of a fixed-size
// struct), so that ranks that disagree all throw instead of hanging or mixing up bytes.
constexpr int kMaxDims = 8;
struct Descriptor {
  int64_t collective = 0;
  int64_t op = 0;    // ReduceOp, or 0 where there is none
  int64_t root = 0;  // broadcast's; 0 otherwise
  int64_t dtype = 0;
  int64_t ndim = 0;
  int64_t dims[kMaxDims] = {};  // the first kMaxDims dims; the rest only through shape_hash
  uint64_t shape_hash = 0;      // FNV-1a over every dim: tells apart shapes beyond kMaxDims dims
  int64_t problem = 0;
  bool operator==(const Descriptor&) const = default;
};

bool has_op(Collective collective) {
  return collective == Collective::AllReduce || collective == Collective::ReduceScatter;
}

// "all_reduce (sum) of a float32 tensor of shape [2, 3]"
std::string describe(const Descriptor& d) {
  const auto collective = static_cast<Collective>(d.collective);
  std::string text = name(collective);
  if (has_op(collective)) text += tg::detail::concat(" (", name(static_cast<ReduceOp>(d.op)), ")");
  if (collective == Collective::Broadcast) text += tg::detail::concat(" from root ", d.root);
  if (static_cast<Problem>(d.problem) == Problem::Undefined) return text + " of an undefined tensor";
  Shape shown(d.dims, d.dims + std::min<int64_t>(d.ndim, kMaxDims));
  std::string shape = tg::detail::concat(shown);
  if (d.ndim > kMaxDims) shape.insert(shape.size() - 1, ", ...");
  return text + tg::detail::concat(" of a ", static_cast<DType>(d.dtype), " tensor of shape ", shape);
}

std::string explain(Problem problem, const Descriptor& d, int ranks) {
  switch (problem) {
    case Problem::None: break;
    case Problem::Undefined: return "the tensor is undefined";
    case Problem::Bool: return "expected a float32, float64 or int64 tensor, got bool";
    case Problem::MeanOfIntegers: return "ReduceOp::Mean needs a float32 or float64 tensor, got int64";
    case Problem::RootOutOfRange:
      return tg::detail::concat("root ", d.root, " is not a rank: expected 0 ... ", ranks - 1);
    case Problem::RequiresGrad:
      return "the tensor requires grad and would be modified in place while grad mode is on; use a tg::NoGradGuard";
    case Problem::NotOneRowPerRank:
      return tg::detail::concat("expected an input of shape [world_size = ", ranks, ", ...]");
    case Problem::TooLarge: return "more than INT_MAX elements in one message";
  }
  return "";
}

Descriptor describe_call(Collective collective, const Tensor& tensor, int64_t op, int64_t root, bool in_place) {
  const int ranks = world_size();
  Descriptor d;
  d.collective = static_cast<int64_t>(collective);
  d.op = op;
  d.root = root;
  if (!tensor.defined()) {
    d.problem = static_cast<int64_t>(Problem::Undefined);
    return d;
  }
  d.dtype = static_cast<int64_t>(tensor.dtype());
  d.ndim = tensor.dim();
  d.shape_hash = 14695981039346656037ull;
  for (int64_t i = 0; i < d.ndim; ++i) {
    if (i < kMaxDims) d.dims[i] = tensor.size(i);
    d.shape_hash = (d.shape_hash ^ static_cast<uint64_t>(tensor.size(i))) * 1099511628211ull;
  }
  Problem problem = Problem::None;
  if (tensor.dtype() == kBool) {
    problem = Problem::Bool;
  } else if (has_op(collective) && static_cast<ReduceOp>(op) == ReduceOp::Mean && !is_floating_point(tensor.dtype())) {
    problem = Problem::MeanOfIntegers;
  } else if (collective == Collective::Broadcast && (root < 0 || root >= ranks)) {
    problem = Problem::RootOutOfRange;
  } else if (collective == Collective::ReduceScatter && (tensor.dim() == 0 || tensor.size(0) != ranks)) {
    problem = Problem::NotOneRowPerRank;
  } else if (in_place && tensor.requires_grad() && is_grad_enabled()) {
    problem = Problem::RequiresGrad;
  } else if (tensor.numel() > INT_MAX) {
    problem = Problem::TooLarge;
  }
  d.problem = static_cast<int64_t>(problem);
  return d;
}

void* bytes_of(const Tensor& t) { return tg::detail::impl_of(t)->storage->data; }

// What each rank sends in the agreement check: its descriptor, and the tensor's bytes when they
// fit in kInlineBytes. The message has the same size whatever the tensor, so ranks that disagree
// still meet in one well-formed all-gather; and a small collective (a loss, a metric, a flag) is
// over after it: its data arrived with the descriptors, with no second round trip.
constexpr size_t kInlineBytes = 256;
struct Message {
  Descriptor descriptor;
  std::byte payload[kInlineBytes];
};

// Whether `t`'s bytes travel inside the agreement message: decided from the dtype and shape the
// ranks have just agreed on, so every rank decides the same.
bool fits_inline(const Tensor& t) {
  return t.defined() && t.numel() * static_cast<int64_t>(element_size(t.dtype())) <= static_cast<int64_t>(kInlineBytes);
}

// Every rank learns every rank's descriptor (and inline payload: the returned messages, one per
// rank, valid until the next agree() on this thread); all of them throw the same tg::Error if the
// ranks disagree (naming rank 0's call and the first rank whose call differs) or if one cannot
// take part.
const std::vector<Message>& agree(const Descriptor& mine, const char* op, const Tensor& data) {
  MPI_Comm world = detail::communicator(op);
  detail::drain();  // the collectives queued before this one reach MPI first
  const int ranks = world_size();
  thread_local std::vector<Message> all;
  all.resize(static_cast<size_t>(ranks));
  Message message{};
  message.descriptor = mine;
  if (mine.problem == 0 && fits_inline(data) && data.numel() > 0) {
    std::memcpy(message.payload, bytes_of(data), static_cast<size_t>(data.numel()) * element_size(data.dtype()));
  }
  {
    const std::lock_guard lock(detail::mpi_mutex());
    detail::check_mpi(MPI_Allgather(&message, sizeof(Message), MPI_BYTE, all.data(), sizeof(Message), MPI_BYTE, world), op);
  }
  for (int r = 1; r < ranks; ++r) {
    Descriptor first = all[0].descriptor, other = all[static_cast<size_t>(r)].descriptor;
    first.problem = other.problem = 0;  // a local problem is not a disagreement
    if (!(first == other)) [[unlikely]] {
      tg::detail::fail(op, "the ranks disagree: rank 0 calls ", describe(all[0].descriptor), ", rank ", r, " calls ",
                       describe(all[static_cast<size_t>(r)].descriptor));
    }
  }
  for (int r = 0; r < ranks; ++r) {
    const Descriptor& d = all[static_cast<size_t>(r)].descriptor;
    const auto problem = static_cast<Problem>(d.problem);
    if (problem != Problem::None) [[unlikely]] {
      tg::detail::fail(op, "rank ", r, " cannot take part in ", describe(d), ": ", explain(problem, d, ranks));
    }
  }
  return all;
}

// The element `index` of rank r's inline payload.
template <typename T>
T inline_value(const std::vector<Message>& all, size_t r, int64_t index) {
  T value;
  std::memcpy(&value, all[r].payload + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

// out[i] = op over the ranks, in rank order, of payload[offset + i]: the inline all_reduce and
// reduce_scatter. A fixed order, so the result is the same on every rank and in every run.
void reduce_inline(const std::vector<Message>& all, ReduceOp op, int64_t offset, const Tensor& out, const char* name) {
  tg::detail::dispatch_all(name, out.dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {  // agree() refused bool
      T* to = static_cast<T*>(bytes_of(out));
      for (int64_t i = 0; i < out.numel(); ++i) {
        T acc = inline_value<T>(all, 0, offset + i);
        for (size_t r = 1; r < all.size(); ++r) {
          const T v = inline_value<T>(all, r, offset + i);
          switch (op) {
            case ReduceOp::Sum:
            case ReduceOp::Mean: acc = acc + v; break;
            case ReduceOp::Max: acc = v > acc ? v : acc; break;
            case ReduceOp::Min: acc = v < acc ? v : acc; break;
          }
        }
        to[i] = acc;
      }
    }
  });
}

int count_of(const Tensor& t) { return static_cast<int>(t.numel()); }  // agree() refused > INT_MAX

// The asynchronous collective: queued for the communication thread.
Work submit(const char* op, std::shared_ptr<Work::State> state, std::function<int()> call) {
  state->op = op;
  state->call = std::move(call);
  communication_thread().submit(state);
  return Work(std::move(state));
}

// A collective whose data came with the agreement message: `fill` wrote the result already.
Work completed(const char* op, std::shared_ptr<Work::State> state) {
  state->op = op;
  state->done.store(true, std::memory_order_release);
  return Work(std::move(state));
}

// The blocking collective: the MPI call on this thread (the queue is empty: agree() drained it).
Tensor run_now(const char* op, std::shared_ptr<Work::State> state, std::function<int()> call) {
  state->op = op;
  state->call = std::move(call);
  detail::drain();
  execute(*state);
  state->done.store(true, std::memory_order_release);
  return Work(std::move(state)).wait();
}

// ReduceOp::Mean: the sum that arrived becomes the mean.
void divide_by_world_size(Tensor& result, const char* op) {
  const auto ranks = static_cast<double>(world_size());
  tg::detail::dispatch_floating(op, result.dtype(), [&]<typename T>() {
    T* values = result.mutable_data<T>();
    // mean = sum / world_size, divided (not multiplied by 1/world_size) as torch's AVG does.
    for (int64_t i = 0; i < result.numel(); ++i) values[i] /= static_cast<T>(ranks);
  });
}

}  // namespace

Work::Work(std::shared_ptr<State> state) : state_(std::move(state)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    if (state_) {
      try {
        wait();
      } catch (const Error&) {  // the transfer is over either way; a moved-over Work cannot report
      }
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

Work::~Work() {
  if (!state_ || state_->finished) return;
  try {
    wait();
  } catch (const Error&) {  // a destructor cannot throw; call wait() to see the error
  }
}

Tensor Work::wait() {
  check(state_ != nullptr, "tg::dist::Work::wait", "this Work was moved from");
  State& state = *state_;
  if (!state.finished) {
    communication_thread().wait_for(state);
    state.finished = true;  // even if MPI failed: the collective is over
    state.input = Tensor();
    if (state.error) std::rethrow_exception(state.error);
    if (state.divide) divide_by_world_size(state.result, state.op);
    tg::detail::bump_version(state.result);
  }
  if (state.error) std::rethrow_exception(state.error);
  return state.result;
}

bool Work::is_completed() {
  check(state_ != nullptr, "tg::dist::Work::is_completed", "this Work was moved from");
  return state_->done.load(std::memory_order_acquire);
}

namespace {

// Each collective as a state (what wait() returns) and its blocking MPI call, for submit() or
// run_now(). The lambdas hold the tensors they write, so the buffers live until the call returns.
using Prepared = std::pair<std::shared_ptr<Work::State>, std::function<int()>>;

Prepared prepare_all_reduce(Tensor& tensor, ReduceOp op, const char* name) {
  auto state = std::make_shared<Work::State>();
  state->result = tensor;
  state->divide = op == ReduceOp::Mean;
  const MPI_Datatype type = detail::mpi_datatype(tensor.dtype(), name);
  return {state, [t = tensor, type, op, comm = detail::communicator(name)]() mutable {
            return MPI_Allreduce(MPI_IN_PLACE, bytes_of(t), count_of(t), type, detail::mpi_op(op), comm);
          }};
}

Prepared prepare_broadcast(Tensor& tensor, int root, const char* name) {
  auto state = std::make_shared<Work::State>();
  state->result = tensor;
  const MPI_Datatype type = detail::mpi_datatype(tensor.dtype(), name);
  return {state, [t = tensor, type, root, comm = detail::communicator(name)]() mutable {
            return MPI_Bcast(bytes_of(t), count_of(t), type, root, comm);
          }};
}

Prepared prepare_all_gather(const Tensor& input, const char* name) {
  auto state = std::make_shared<Work::State>();
  state->input = input;
  Shape shape = input.shape();
  shape.insert(shape.begin(), world_size());
  state->result = empty(shape, input.dtype());
  const MPI_Datatype type = detail::mpi_datatype(input.dtype(), name);
  return {state, [in = input, out = state->result, type, comm = detail::communicator(name)]() mutable {
            return MPI_Allgather(bytes_of(in), count_of(in), type, bytes_of(out), count_of(in), type, comm);
          }};
}

Prepared prepare_reduce_scatter(const Tensor& input, ReduceOp op, const char* name) {
  auto state = std::make_shared<Work::State>();
  state->input = input;
  state->result = empty(Shape(input.shape().begin() + 1, input.shape().end()), input.dtype());
  state->divide = op == ReduceOp::Mean;
  const MPI_Datatype type = detail::mpi_datatype(input.dtype(), name);
  return {state, [in = input, out = state->result, type, op, comm = detail::communicator(name)]() mutable {
            return MPI_Reduce_scatter_block(bytes_of(in), bytes_of(out), count_of(out), type, detail::mpi_op(op), comm);
          }};
}

constexpr const char* kAllReduce = "tg::dist::all_reduce";
constexpr const char* kBroadcast = "tg::dist::broadcast";
constexpr const char* kAllGather = "tg::dist::all_gather";
constexpr const char* kReduceScatter = "tg::dist::reduce_scatter";

const std::vector<Message>& agree_all_reduce(const Tensor& tensor, ReduceOp op) {
  return agree(describe_call(Collective::AllReduce, tensor, static_cast<int64_t>(op), 0, /*in_place=*/true), kAllReduce,
               tensor);
}
const std::vector<Message>& agree_broadcast(const Tensor& tensor, int root) {
  return agree(describe_call(Collective::Broadcast, tensor, 0, root, /*in_place=*/true), kBroadcast, tensor);
}
const std::vector<Message>& agree_all_gather(const Tensor& input) {
  return agree(describe_call(Collective::AllGather, input, 0, 0, /*in_place=*/false), kAllGather, input);
}
const std::vector<Message>& agree_reduce_scatter(const Tensor& input, ReduceOp op) {
  return agree(describe_call(Collective::ReduceScatter, input, static_cast<int64_t>(op), 0, /*in_place=*/false),
               kReduceScatter, input);
}

// The collectives whose data fit in the agreement message, finished from it on this rank.
Work all_reduce_inline(Tensor& tensor, ReduceOp op, const std::vector<Message>& all) {
  auto state = prepare_all_reduce(tensor, op, kAllReduce).first;
  reduce_inline(all, op, 0, tensor, kAllReduce);
  return completed(kAllReduce, std::move(state));
}

Work broadcast_inline(Tensor& tensor, int root, const std::vector<Message>& all) {
  auto state = prepare_broadcast(tensor, root, kBroadcast).first;
  std::memcpy(bytes_of(tensor), all[static_cast<size_t>(root)].payload,
              static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype()));
  return completed(kBroadcast, std::move(state));
}

Work all_gather_inline(const Tensor& input, const std::vector<Message>& all) {
  auto state = prepare_all_gather(input, kAllGather).first;
  const size_t bytes = static_cast<size_t>(input.numel()) * element_size(input.dtype());
  auto* to = static_cast<std::byte*>(bytes_of(state->result));
  for (size_t r = 0; r < all.size(); ++r) std::memcpy(to + r * bytes, all[r].payload, bytes);
  return completed(kAllGather, std::move(state));
}

Work reduce_scatter_inline(const Tensor& input, ReduceOp op, const std::vector<Message>& all) {
  auto state = prepare_reduce_scatter(input, op, kReduceScatter).first;
  reduce_inline(all, op, rank() * state->result.numel(), state->result, kReduceScatter);
  return completed(kReduceScatter, std::move(state));
}

}  // namespace

Work all_reduce_async(Tensor& tensor, ReduceOp op) {
  const std::vector<Message>& all = agree_all_reduce(tensor, op);
  if (fits_inline(tensor)) return all_reduce_inline(tensor, op, all);
  return detail::all_reduce_unchecked(tensor, op, kAllReduce);
}

Work detail::all_reduce_unchecked(Tensor& tensor, ReduceOp op, const char* name) {
  auto [state, call] = prepare_all_reduce(tensor, op, name);
  return submit(name, std::move(state), std::move(call));
}

void detail::all_reduce_unchecked_now(Tensor& tensor, ReduceOp op, const char* name) {
  auto [state, call] = prepare_all_reduce(tensor, op, name);
  run_now(name, std::move(state), std::move(call));
}

void detail::broadcast_unchecked_now(Tensor& tensor, int root, const char* name) {
  auto [state, call] = prepare_broadcast(tensor, root, name);
  run_now(name, std::move(state), std::move(call));
}

Work broadcast_async(Tensor& tensor, int root) {
  const std::vector<Message>& all = agree_broadcast(tensor, root);
  if (fits_inline(tensor)) return broadcast_inline(tensor, root, all);
  return detail::broadcast_unchecked(tensor, root, kBroadcast);
}

Work detail::broadcast_unchecked(Tensor& tensor, int root, const char* name) {
  auto [state, call] = prepare_broadcast(tensor, root, name);
  return submit(name, std::move(state), std::move(call));
}

Work all_gather_async(const Tensor& input) {
  const std::vector<Message>& all = agree_all_gather(input);
  if (fits_inline(input)) return all_gather_inline(input, all);
  auto [state, call] = prepare_all_gather(input, kAllGather);
  return submit(kAllGather, std::move(state), std::move(call));
}

Work reduce_scatter_async(const Tensor& input, ReduceOp op) {
  const std::vector<Message>& all = agree_reduce_scatter(input, op);
  if (fits_inline(input)) return reduce_scatter_inline(input, op, all);
  auto [state, call] = prepare_reduce_scatter(input, op, kReduceScatter);
  return submit(kReduceScatter, std::move(state), std::move(call));
}

// The blocking collectives: the agreement check (which carries small tensors), then the blocking
// MPI call on this thread.
void all_reduce(Tensor& tensor, ReduceOp op) {
  const std::vector<Message>& all = agree_all_reduce(tensor, op);
  if (fits_inline(tensor)) {  // a loss, a metric: finished here, with no Work to allocate
    reduce_inline(all, op, 0, tensor, kAllReduce);
    if (op == ReduceOp::Mean) divide_by_world_size(tensor, kAllReduce);
    tg::detail::bump_version(tensor);
    return;
  }
  auto [state, call] = prepare_all_reduce(tensor, op, kAllReduce);
  run_now(kAllReduce, std::move(state), std::move(call));
}

void broadcast(Tensor& tensor, int root) {
  const std::vector<Message>& all = agree_broadcast(tensor, root);
  if (fits_inline(tensor)) {
    broadcast_inline(tensor, root, all).wait();
    return;
  }
  auto [state, call] = prepare_broadcast(tensor, root, kBroadcast);
  run_now(kBroadcast, std::move(state), std::move(call));
}

Tensor all_gather(const Tensor& input) {
  const std::vector<Message>& all = agree_all_gather(input);
  if (fits_inline(input)) return all_gather_inline(input, all).wait();
  auto [state, call] = prepare_all_gather(input, kAllGather);
  return run_now(kAllGather, std::move(state), std::move(call));
}

Tensor reduce_scatter(const Tensor& input, ReduceOp op) {
  const std::vector<Message>& all = agree_reduce_scatter(input, op);
  if (fits_inline(input)) return reduce_scatter_inline(input, op, all).wait();
  auto [state, call] = prepare_reduce_scatter(input, op, kReduceScatter);
  return run_now(kReduceScatter, std::move(state), std::move(call));
}

}  // namespace tg::dist
