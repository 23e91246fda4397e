// What tapegrad::distributed's sources share about MPI: the communicator, the lock that
// serialises MPI calls, and MPI's names for dtypes and reductions. Only the sources include
// <mpi.h>; the public headers do not.
#pragma once

#include <mpi.h>

#include <mutex>

#include "tapegrad/distributed/collectives.hpp"

namespace tg::dist::detail {

// tapegrad's duplicate of MPI_COMM_WORLD (its errors are returned, not fatal); tg::Error naming
// `op` when no Context is alive.
MPI_Comm communicator(const char* op);

// MPI runs at MPI_THREAD_SERIALIZED: every MPI call of tg::dist holds this lock.
std::mutex& mpi_mutex();

// Returns once the communication thread has run every collective queued so far: a collective
// called on another thread must reach MPI after them, in the same order on every rank.
void drain();
// drain(), then ends the communication thread (Context's destructor, before MPI_Finalize).
void stop_communication_thread();

// tg::Error "<op>: MPI error: <MPI's message>" unless code is MPI_SUCCESS.
void check_mpi(int code, const char* op);

// float32, float64 and int64; tg::Error naming `op` for bool.
MPI_Datatype mpi_datatype(DType dtype, const char* op);
// Mean travels as a sum; the caller divides by the world size.
MPI_Op mpi_op(ReduceOp op);

// all_reduce_async without the descriptor check, for buffers whose layout the ranks have agreed
// on once (DataParallel's buckets): no extra round trip per bucket.
Work all_reduce_unchecked(Tensor& tensor, ReduceOp op, const char* name);
// broadcast_async without the descriptor check, likewise (DataParallel's buffers).
Work broadcast_unchecked(Tensor& tensor, int root, const char* name);
// The same two, blocking, on the calling thread (after the queued collectives): for a collective
// the caller would wait for at once, no hand-off to the communication thread and back.
void all_reduce_unchecked_now(Tensor& tensor, ReduceOp op, const char* name);
void broadcast_unchecked_now(Tensor& tensor, int root, const char* name);

}  // namespace tg::dist::detail
