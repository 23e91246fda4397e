// A global operator new for this test executable that counts allocations and can make one of
// them fail (throw std::bad_alloc), like a malloc that runs out of memory at that moment, or
// every one above a size.
// Every allocation through operator new counts, in the library as in the test: tensor storage,
// tape nodes, strings, containers, JSON.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tg::fault {

// From now on, count allocations; the `k`-th (1-based) fails. k = 0 counts without failing.
void fail_allocation(int64_t k);
// Stops counting and failing.
void stop();
// Allocations counted since the last fail_allocation(), and whether the chosen one has failed.
int64_t allocations();
bool failed();
// From now on, every allocation of more than `bytes` fails, as on a machine with that little
// memory (0: no limit): a test can ask for huge tensors and get a quick tg::Error.
void refuse_allocations_over(size_t bytes);

}  // namespace tg::fault
