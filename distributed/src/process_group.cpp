#include "tapegrad/distributed/process_group.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "mpi.hpp"
#include "tapegrad/error.hpp"

namespace tg::dist {

namespace {

// The job as tg::dist sees it while a Context is alive.
struct Job {
  bool alive = false;
  MPI_Comm world = MPI_COMM_NULL;  // a duplicate of MPI_COMM_WORLD: our messages never meet the program's
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::terminate_handler previous_terminate = nullptr;
};

Job& job() {
  static Job state;
  return state;
}

// An exception that escapes on one rank would leave the others blocked in the next collective
// forever: say what happened, then take the whole job down.
[[noreturn]] void abort_job() {
  const char* what = "unknown exception";
  std::string message;
  if (const std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      message = error.what();
      what = message.c_str();
    } catch (...) {
    }
  } else {
    what = "std::terminate called without an exception";
  }
  std::fprintf(stderr, "tapegrad::distributed: rank %d of %d: uncaught: %s\n"
               "tapegrad::distributed: aborting the job (MPI_Abort) so that the other ranks stop\n",
               job().rank, job().world_size, what);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest if it ever did
}

}  // namespace

Context Context::start(int* argc, char*** argv) {
  Job& state = job();
  check(!state.alive, "tg::dist::init", "a tg::dist::Context is already alive; create one per process");
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) == MPI_SUCCESS, "tg::dist::init",
          "MPI_Init_thread failed");
    check(provided >= MPI_THREAD_SERIALIZED, "tg::dist::init",
          "MPI provides thread level ", provided, ", tapegrad needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED, ")");
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &state.world);
  MPI_Comm_set_errhandler(state.world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(state.world, &state.rank);
  MPI_Comm_size(state.world, &state.world_size);
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(state.world, MPI_COMM_TYPE_SHARED, state.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &state.local_rank);
  MPI_Comm_size(local, &state.local_world_size);
  MPI_Comm_free(&local);
  state.previous_terminate = std::set_terminate(abort_job);
  state.alive = true;
  return Context(/*owns_mpi=*/!already);
}

Context init(int& argc, char**& argv) { return Context::start(&argc, &argv); }
Context init() { return Context::start(nullptr, nullptr); }

Context::~Context() {
  Job& state = job();
  detail::stop_communication_thread();  // its queued collectives run first
  std::set_terminate(state.previous_terminate);
  MPI_Comm_free(&state.world);
  state = Job{};
  if (owns_mpi_) MPI_Finalize();
}

bool is_initialized() { return job().alive; }

int rank() {
  check(job().alive, "tg::dist::rank", "no tg::dist::Context is alive: call tg::dist::init first");
  return job().rank;
}

int world_size() {
  check(job().alive, "tg::dist::world_size", "no tg::dist::Context is alive: call tg::dist::init first");
  return job().world_size;
}

int local_rank() {
  check(job().alive, "tg::dist::local_rank", "no tg::dist::Context is alive: call tg::dist::init first");
  return job().local_rank;
}

int local_world_size() {
  check(job().alive, "tg::dist::local_world_size", "no tg::dist::Context is alive: call tg::dist::init first");
  return job().local_world_size;
}

void barrier() {
  MPI_Comm world = detail::communicator("tg::dist::barrier");
  detail::drain();  // the collectives queued before the barrier reach MPI first
  const std::lock_guard lock(detail::mpi_mutex());
  detail::check_mpi(MPI_Barrier(world), "tg::dist::barrier");
}

namespace detail {

MPI_Comm communicator(const char* op) {
  check(job().alive, op, "no tg::dist::Context is alive: call tg::dist::init first");
  return job().world;
}

std::mutex& mpi_mutex() {
  static std::mutex mutex;
  return mutex;
}

void check_mpi(int code, const char* op) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  throw Error(tg::detail::concat(op, ": MPI error: ", std::string(message, static_cast<size_t>(length))));
}

MPI_Datatype mpi_datatype(DType dtype, const char* op) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int64: return MPI_INT64_T;
    case DType::Bool:
    case DType::BFloat16: break;
  }
  throw Error(tg::detail::concat(op, ": expected a float32, float64 or int64 tensor, got ", dtype));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

}  // namespace detail

}  // namespace tg::dist
