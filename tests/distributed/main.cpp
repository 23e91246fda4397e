// The distributed suite's main: MPI starts once for all test cases (ctest runs this program under
// mpirun -np 1, 2 and 3). Every rank runs every test case; the collectives inside keep them in step.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <tapegrad/distributed.hpp>

int main(int argc, char** argv) {
  tg::dist::Context context = tg::dist::init(argc, argv);
  return Catch::Session().run(argc, argv);
}
