/// @file
/// The processes of an MPI job, seen from one of them: who am I, how many are we, wait for all.
///
/// @code
///   int main(int argc, char** argv) {
///     tg::dist::Context context = tg::dist::init(argc, argv);  // MPI_Init_thread ... MPI_Finalize
///     std::cout << "rank " << tg::dist::rank() << " of " << tg::dist::world_size() << "\n";
///   }
/// @endcode
///
/// Launch with `mpirun -np 4 ./program` (docs/guide/distributed.md). Run without mpirun, a
/// program is a job of one process (Open MPI's singleton mode): rank 0 of 1.
#pragma once

namespace tg::dist {

/// The job's MPI state for the lifetime of the object: init() starts MPI (unless the program has
/// already done so itself, in which case it is left to the program to finish), the destructor
/// finalizes it. While a Context lives, an exception that escapes main on any rank makes that
/// rank print it and abort the whole job (MPI_Abort), so that its peers do not wait forever in a
/// collective it will never join.
class [[nodiscard]] Context {
 public:
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

 private:
  friend Context init(int& argc, char**& argv);
  friend Context init();
  explicit Context(bool owns_mpi) : owns_mpi_(owns_mpi) {}
  static Context start(int* argc, char*** argv);
  bool owns_mpi_;  // false when MPI was initialised before init(): the program finalizes it
};

/// Starts MPI with MPI_THREAD_SERIALIZED (tg::dist serialises its own calls, so any thread may call
/// it) and duplicates MPI_COMM_WORLD for tapegrad's collectives, with MPI errors returned as
/// tg::Error. tg::Error if MPI is already running under another Context, or cannot start.
Context init(int& argc, char**& argv);
Context init();  ///< without the program's arguments (MPI allows it)

bool is_initialized();  ///< a Context is alive
int rank();             ///< 0 ... world_size() − 1
int world_size();       ///< the number of ranks in the job
/// This process's rank among those on the same machine (MPI_Comm_split_type shared memory): which
/// of the machine's GPUs or NUMA nodes to use, for instance.
int local_rank();
int local_world_size();  ///< the number of ranks on this machine
void barrier();  ///< returns once every rank has called it

}  // namespace tg::dist
