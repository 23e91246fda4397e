#include "tapegrad/distributed/collectives.hpp"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "dispatch.hpp"
#include "mpi.hpp"
#include "tapegrad/autograd.hpp"
#include "tapegrad/distributed/process_group.hpp"
#include "tensor_impl.hpp"

namespace tg::dist {

struct Work::State {
  const char* op = "";
  MPI_Request request = MPI_REQUEST_NULL;
  Tensor result;       // what wait() returns: the tensor written in place, or a new one
  Tensor input;        // the send buffer of all_gather and reduce_scatter, alive until completion
  bool divide = false;  // ReduceOp::Mean: the sum arrives, result is divided by the world size
  bool completed = false;
};

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

// Every rank learns every rank's descriptor; all of them throw the same tg::Error if the ranks
// disagree (naming rank 0's call and the first rank whose call differs) or if one cannot take part.
void agree(const Descriptor& mine, const char* op) {
  MPI_Comm world = detail::communicator(op);
  const int ranks = world_size();
  std::vector<Descriptor> all(static_cast<size_t>(ranks));
  {
    const std::lock_guard lock(detail::mpi_mutex());
    detail::check_mpi(MPI_Allgather(&mine, sizeof(Descriptor), MPI_BYTE, all.data(), sizeof(Descriptor), MPI_BYTE, world), op);
  }
  for (int r = 1; r < ranks; ++r) {
    Descriptor first = all[0], other = all[static_cast<size_t>(r)];
    first.problem = other.problem = 0;  // a local problem is not a disagreement
    check(first == other, op, "the ranks disagree: rank 0 calls ", describe(all[0]), ", rank ", r, " calls ",
          describe(all[static_cast<size_t>(r)]));
  }
  for (int r = 0; r < ranks; ++r) {
    const auto problem = static_cast<Problem>(all[static_cast<size_t>(r)].problem);
    check(problem == Problem::None, op, "rank ", r, " cannot take part in ", describe(all[static_cast<size_t>(r)]), ": ",
          explain(problem, all[static_cast<size_t>(r)], ranks));
  }
}

int count_of(const Tensor& t) { return static_cast<int>(t.numel()); }  // agree() refused > INT_MAX

void* bytes_of(Tensor& t) { return tg::detail::impl_of(t)->storage->data; }

// Starts `launch` (an MPI_I* call) under the MPI lock and wraps its request.
template <typename Launch>
Work start(const char* op, std::shared_ptr<Work::State> state, Launch&& launch) {
  state->op = op;
  {
    const std::lock_guard lock(detail::mpi_mutex());
    detail::check_mpi(launch(&state->request), op);
  }
  return Work(std::move(state));
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
  if (!state_ || state_->completed) return;
  try {
    wait();
  } catch (const Error&) {  // a destructor cannot throw; call wait() to see the error
  }
}

Tensor Work::wait() {
  check(state_ != nullptr, "tg::dist::Work::wait", "this Work was moved from");
  State& state = *state_;
  if (!state.completed) {
    {
      const std::lock_guard lock(detail::mpi_mutex());
      state.completed = true;  // even if MPI failed: the request is gone
      detail::check_mpi(MPI_Wait(&state.request, MPI_STATUS_IGNORE), state.op);
    }
    if (state.divide) {
      const auto ranks = static_cast<double>(world_size());
      tg::detail::dispatch_floating(state.op, state.result.dtype(), [&]<typename T>() {
        T* values = state.result.mutable_data<T>();
        // mean = sum / world_size, divided (not multiplied by 1/world_size) as torch's AVG does.
        for (int64_t i = 0; i < state.result.numel(); ++i) values[i] /= static_cast<T>(ranks);
      });
    }
    tg::detail::bump_version(state.result);
    state.input = Tensor();
  }
  return state.result;
}

bool Work::is_completed() {
  check(state_ != nullptr, "tg::dist::Work::is_completed", "this Work was moved from");
  if (state_->completed || state_->request == MPI_REQUEST_NULL) return true;
  int done = 0;
  const std::lock_guard lock(detail::mpi_mutex());
  detail::check_mpi(MPI_Test(&state_->request, &done, MPI_STATUS_IGNORE), state_->op);
  if (done) state_->request = MPI_REQUEST_NULL;  // wait() then finds nothing left to wait for
  return done != 0;
}

Work all_reduce_async(Tensor& tensor, ReduceOp op) {
  const char* name = "tg::dist::all_reduce";
  agree(describe_call(Collective::AllReduce, tensor, static_cast<int64_t>(op), 0, /*in_place=*/true), name);
  return detail::all_reduce_unchecked(tensor, op, name);
}

Work detail::all_reduce_unchecked(Tensor& tensor, ReduceOp op, const char* name) {
  auto state = std::make_shared<Work::State>();
  state->result = tensor;
  state->divide = op == ReduceOp::Mean;
  return start(name, state, [&](MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, bytes_of(tensor), count_of(tensor), detail::mpi_datatype(tensor.dtype(), name),
                          detail::mpi_op(op), detail::communicator(name), request);
  });
}

Work broadcast_async(Tensor& tensor, int root) {
  const char* name = "tg::dist::broadcast";
  agree(describe_call(Collective::Broadcast, tensor, 0, root, /*in_place=*/true), name);
  return detail::broadcast_unchecked(tensor, root, name);
}

Work detail::broadcast_unchecked(Tensor& tensor, int root, const char* name) {
  auto state = std::make_shared<Work::State>();
  state->result = tensor;
  return start(name, state, [&](MPI_Request* request) {
    return MPI_Ibcast(bytes_of(tensor), count_of(tensor), detail::mpi_datatype(tensor.dtype(), name), root,
                      detail::communicator(name), request);
  });
}

Work all_gather_async(const Tensor& input) {
  const char* name = "tg::dist::all_gather";
  agree(describe_call(Collective::AllGather, input, 0, 0, /*in_place=*/false), name);
  auto state = std::make_shared<Work::State>();
  state->input = input;
  Shape shape = input.shape();
  shape.insert(shape.begin(), world_size());
  state->result = empty(shape, input.dtype());
  const MPI_Datatype type = detail::mpi_datatype(input.dtype(), name);
  return start(name, state, [&](MPI_Request* request) {
    return MPI_Iallgather(bytes_of(state->input), count_of(input), type, bytes_of(state->result), count_of(input), type,
                          detail::communicator(name), request);
  });
}

Work reduce_scatter_async(const Tensor& input, ReduceOp op) {
  const char* name = "tg::dist::reduce_scatter";
  agree(describe_call(Collective::ReduceScatter, input, static_cast<int64_t>(op), 0, /*in_place=*/false), name);
  auto state = std::make_shared<Work::State>();
  state->input = input;
  state->result = empty(Shape(input.shape().begin() + 1, input.shape().end()), input.dtype());
  state->divide = op == ReduceOp::Mean;
  return start(name, state, [&](MPI_Request* request) {
    return MPI_Ireduce_scatter_block(bytes_of(state->input), bytes_of(state->result), count_of(state->result),
                                     detail::mpi_datatype(input.dtype(), name), detail::mpi_op(op),
                                     detail::communicator(name), request);
  });
}

void all_reduce(Tensor& tensor, ReduceOp op) { all_reduce_async(tensor, op).wait(); }
void broadcast(Tensor& tensor, int root) { broadcast_async(tensor, root).wait(); }
Tensor all_gather(const Tensor& input) { return all_gather_async(input).wait(); }
Tensor reduce_scatter(const Tensor& input, ReduceOp op) { return reduce_scatter_async(input, op).wait(); }

}  // namespace tg::dist
