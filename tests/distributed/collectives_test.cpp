// all_reduce, broadcast, all_gather and reduce_scatter against values computed by hand from the
// rank numbers; the descriptor check: ranks that disagree all get tg::Error.
#include "distributed_test_util.hpp"

#include <cstdlib>

using namespace tg;

namespace {

// rank r holds [r + 1, 10 (r + 1), -r] in `dtype`.
Tensor rank_values(DType dtype) {
  const double r = dist::rank();
  return tensor({r + 1, 10 * (r + 1), -r}, {3}, dtype);
}

}  // namespace

TEST_CASE("rank, world_size and local_rank describe the job", "[dist]") {
  const int ranks = dist::world_size();
  REQUIRE(ranks >= 1);
  REQUIRE(dist::rank() >= 0);
  REQUIRE(dist::rank() < ranks);
  // ctest starts the ranks on one machine, or spread evenly over TG_DIST_HOSTS "hosts" (network
  // namespaces, run_two_hosts.sh), rank after rank.
  const char* hosts_variable = std::getenv("TG_DIST_HOSTS");
  const int hosts = hosts_variable != nullptr ? std::atoi(hosts_variable) : 1;
  REQUIRE(ranks % hosts == 0);
  CHECK(dist::local_world_size() == ranks / hosts);
  CHECK(dist::local_rank() == dist::rank() % (ranks / hosts));
  dist::barrier();
  // Every rank sees every rank exactly once.
  const std::vector<int64_t> seen = dist::all_gather(scalar_tensor(dist::rank(), kInt64)).to_vector<int64_t>();
  std::vector<int64_t> expected(static_cast<size_t>(ranks));
  std::iota(expected.begin(), expected.end(), int64_t{0});
  CHECK(seen == expected);
}

TEST_CASE("all_reduce sums, averages, and takes the max and the min over the ranks", "[dist][collectives]") {
  const DType dtype = GENERATE(kFloat32, kFloat64, kInt64);
  INFO("dtype " << dtype);
  const double n = dist::world_size();
  // Σ_{r<n} (r + 1) = n(n + 1)/2; Σ_{r<n} r = n(n − 1)/2.
  const double sum_r1 = n * (n + 1) / 2, sum_r = n * (n - 1) / 2;
  Tensor sum = rank_values(dtype);
  dist::all_reduce(sum, dist::ReduceOp::Sum);
  CHECK(sum.dtype() == dtype);
  CHECK(testing::values(sum) == std::vector<double>{sum_r1, 10 * sum_r1, -sum_r});
  Tensor max = rank_values(dtype);
  dist::all_reduce(max, dist::ReduceOp::Max);
  CHECK(testing::values(max) == std::vector<double>{n, 10 * n, 0});
  Tensor min = rank_values(dtype);
  dist::all_reduce(min, dist::ReduceOp::Min);
  CHECK(testing::values(min) == std::vector<double>{1, 10, -(n - 1)});
  if (is_floating_point(dtype)) {
    Tensor mean = rank_values(dtype);
    dist::all_reduce(mean, dist::ReduceOp::Mean);
    const std::vector<double> expected{sum_r1 / n, 10 * sum_r1 / n, -sum_r / n};
    const std::vector<double> got = testing::values(mean);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).epsilon(1e-7));
  }
}

TEST_CASE("all_reduce of a 0-d and of an empty tensor", "[dist][collectives]") {
  Tensor one = scalar_tensor(2.0, kFloat64);
  dist::all_reduce(one);
  CHECK(one.item() == 2.0 * dist::world_size());
  Tensor none = zeros({0, 3});
  dist::all_reduce(none);
  CHECK(none.shape() == Shape{0, 3});
}

TEST_CASE("broadcast copies the root's tensor to every rank", "[dist][collectives]") {
  const DType dtype = GENERATE(kFloat32, kFloat64, kInt64);
  const int root = dist::world_size() - 1;
  Tensor t = rank_values(dtype).reshape({3, 1});
  dist::broadcast(t, root);
  const double r = root;
  CHECK(t.shape() == Shape{3, 1});
  CHECK(testing::values(t) == std::vector<double>{r + 1, 10 * (r + 1), -r});
}

TEST_CASE("all_gather stacks every rank's tensor, rank by rank", "[dist][collectives]") {
  const DType dtype = GENERATE(kFloat32, kFloat64, kInt64);
  const Tensor gathered = dist::all_gather(rank_values(dtype).reshape({1, 3}));
  const int n = dist::world_size();
  REQUIRE(gathered.shape() == Shape{n, 1, 3});
  std::vector<double> expected;
  for (int r = 0; r < n; ++r) expected.insert(expected.end(), {r + 1.0, 10.0 * (r + 1), -1.0 * r});
  CHECK(testing::values(gathered) == expected);
}

TEST_CASE("reduce_scatter gives rank r the reduction of every rank's row r", "[dist][collectives]") {
  const DType dtype = GENERATE(kFloat32, kFloat64, kInt64);
  const int n = dist::world_size();
  const int me = dist::rank();
  // On rank q, row r is [100 q + r, r − q].
  std::vector<double> rows;
  for (int r = 0; r < n; ++r) rows.insert(rows.end(), {100.0 * me + r, 1.0 * r - me});
  const Tensor input = tensor(rows, {n, 2}, dtype);
  const Tensor sum = dist::reduce_scatter(input, dist::ReduceOp::Sum);
  // Σ_q (100 q + me) = 100 n(n − 1)/2 + n·me; Σ_q (me − q) = n·me − n(n − 1)/2.
  const double q_sum = n * (n - 1) / 2.0;
  CHECK(sum.shape() == Shape{2});
  CHECK(testing::values(sum) == std::vector<double>{100 * q_sum + n * me, n * me - q_sum});
  const Tensor max = dist::reduce_scatter(input, dist::ReduceOp::Max);
  CHECK(testing::values(max) == std::vector<double>{100.0 * (n - 1) + me, 1.0 * me});
}

TEST_CASE("the non-blocking collectives return a Work whose wait() gives the result", "[dist][collectives]") {
  const int n = dist::world_size();
  Tensor a = full({4}, 1.0, kFloat64);
  Tensor b = full({2, 2}, dist::rank(), kFloat64);
  dist::Work reduce_a = dist::all_reduce_async(a, dist::ReduceOp::Sum);
  dist::Work gather_b = dist::all_gather_async(b);
  dist::Work bcast_b = dist::broadcast_async(b, 0);
  const Tensor reduced = reduce_a.wait();
  CHECK(reduced.is_same(a));
  CHECK(testing::values(a) == std::vector<double>(4, n));
  const Tensor gathered = gather_b.wait();
  CHECK(gathered.shape() == Shape{n, 2, 2});
  for (int r = 0; r < n; ++r) CHECK(gathered.index_select(0, tensor({double(r)}, {1}, kInt64)).sum().item() == 4.0 * r);
  bcast_b.wait();
  CHECK(testing::values(b) == std::vector<double>(4, 0.0));
  CHECK(reduce_a.is_completed());
  CHECK(reduce_a.wait().is_same(a));  // a second wait returns the same result
}

TEST_CASE("ranks that disagree about a collective all get tg::Error naming both tensors", "[dist][errors]") {
  if (dist::world_size() < 2) return;  // needs a peer to disagree with
  const bool last = dist::rank() == dist::world_size() - 1;
  const int last_rank = dist::world_size() - 1;
  SECTION("shapes") {
    Tensor t = last ? zeros({3}) : zeros({2, 2});
    REQUIRE_TG_ERROR(dist::all_reduce(t), Catch::Contains("tg::dist::all_reduce") &&
                                              Catch::Contains("rank 0 calls all_reduce (sum) of a float32 tensor of shape [2, 2]") &&
                                              Catch::Contains(tg::detail::concat("rank ", last_rank, " calls all_reduce (sum) of a float32 tensor of shape [3]")));
  }
  SECTION("dtypes") {
    const Tensor t = zeros({2}, last ? kFloat64 : kFloat32);
    REQUIRE_TG_ERROR(dist::all_gather(t), Catch::Contains("float32 tensor of shape [2]") && Catch::Contains("float64 tensor of shape [2]"));
  }
  SECTION("ops and roots") {
    Tensor t = zeros({2});
    REQUIRE_TG_ERROR(dist::all_reduce(t, last ? dist::ReduceOp::Max : dist::ReduceOp::Sum),
                     Catch::Contains("all_reduce (sum)") && Catch::Contains("all_reduce (max)"));
    REQUIRE_TG_ERROR(dist::broadcast(t, last ? 1 : 0), Catch::Contains("from root 0") && Catch::Contains("from root 1"));
  }
  SECTION("collectives") {
    Tensor t = zeros({2});
    if (last) {
      REQUIRE_TG_ERROR(dist::broadcast(t), Catch::Contains("rank 0 calls all_reduce") && Catch::Contains("calls broadcast"));
    } else {
      REQUIRE_TG_ERROR(dist::all_reduce(t), Catch::Contains("rank 0 calls all_reduce") && Catch::Contains("calls broadcast"));
    }
  }
  // After an error the ranks are still in step.
  Tensor t = ones({2});
  dist::all_reduce(t);
  CHECK(testing::values(t) == std::vector<double>(2, dist::world_size()));
}

TEST_CASE("a problem on one rank is reported by every rank", "[dist][errors]") {
  const bool last = dist::rank() == dist::world_size() - 1;
  const int last_rank = dist::world_size() - 1;
  Tensor weight = ones({2});
  if (last) weight.requires_grad_();
  REQUIRE_TG_ERROR(dist::all_reduce(weight), Catch::Contains(tg::detail::concat("rank ", last_rank, " cannot take part")) &&
                                                 Catch::Contains("requires grad") && Catch::Contains("NoGradGuard"));
  {
    NoGradGuard no_grad;
    dist::all_reduce(weight);
  }
  CHECK(testing::values(weight) == std::vector<double>(2, dist::world_size()));
}

TEST_CASE("collectives refuse bool tensors, integer means, bad roots and misshapen reduce_scatter inputs",
          "[dist][errors]") {
  Tensor mask = zeros({2}, kBool);
  REQUIRE_TG_ERROR(dist::all_reduce(mask), Catch::Contains("all_reduce") && Catch::Contains("got bool"));
  Tensor counts = zeros({2}, kInt64);
  REQUIRE_TG_ERROR(dist::all_reduce(counts, dist::ReduceOp::Mean), Catch::Contains("Mean") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(dist::broadcast(counts, dist::world_size()),
                   Catch::Contains(tg::detail::concat("root ", dist::world_size(), " is not a rank")));
  REQUIRE_TG_ERROR(dist::reduce_scatter(zeros({dist::world_size() + 1, 2})),
                   Catch::Contains("reduce_scatter") && Catch::Contains("[world_size = "));
  Tensor undefined;
  REQUIRE_TG_ERROR(dist::all_reduce(undefined), Catch::Contains("undefined"));
}

// Up to 256 bytes travel inside the agreement message and are reduced there in rank order; larger
// tensors take a second, MPI collective. Both sides of that limit, for every collective: rank q
// holds element i = 1000 q + i (exact in float32 for these sizes).
TEST_CASE("collectives give the same results on both sides of the inline size", "[dist][collectives]") {
  const DType dtype = GENERATE(kFloat32, kFloat64, kInt64);
  const int64_t inline_elements = 256 / static_cast<int64_t>(element_size(dtype));
  const int size = GENERATE(0, 1, 2);  // at the limit, one element over it, far over it
  const int64_t numel = size == 0 ? inline_elements : size == 1 ? inline_elements + 1 : 1000;
  INFO("dtype " << dtype << ", " << numel << " elements");
  const int n = dist::world_size();
  const int me = dist::rank();
  const auto mine = [&](int64_t count) {
    std::vector<double> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = 1000.0 * me + static_cast<double>(i);
    return tensor(v, {count}, dtype);
  };
  const double q_sum = n * (n - 1) / 2.0;  // Σ_q q
  Tensor sum = mine(numel);
  dist::all_reduce(sum, dist::ReduceOp::Sum);
  Tensor max = mine(numel);
  dist::Work max_work = dist::all_reduce_async(max, dist::ReduceOp::Max);
  Tensor min = mine(numel);
  dist::all_reduce(min, dist::ReduceOp::Min);  // after the queued max, in the same order on every rank
  max_work.wait();
  const std::vector<double> s = testing::values(sum), hi = testing::values(max), lo = testing::values(min);
  for (int64_t i = 0; i < numel; ++i) {
    const auto k = static_cast<size_t>(i);
    INFO("element " << i);
    CHECK(s[k] == 1000.0 * q_sum + n * static_cast<double>(i));
    CHECK(hi[k] == 1000.0 * (n - 1) + static_cast<double>(i));
    CHECK(lo[k] == static_cast<double>(i));
  }
  Tensor root_values = mine(numel);
  dist::broadcast(root_values, n - 1);
  CHECK(testing::values(root_values)[static_cast<size_t>(numel - 1)] == 1000.0 * (n - 1) + static_cast<double>(numel - 1));
  const Tensor gathered = dist::all_gather_async(mine(numel)).wait();
  REQUIRE(gathered.shape() == Shape{n, numel});
  const std::vector<double> g = testing::values(gathered);
  for (int r = 0; r < n; ++r) CHECK(g[static_cast<size_t>(r * numel + numel - 1)] == 1000.0 * r + static_cast<double>(numel - 1));
  // reduce_scatter: the input is [n, numel / n] (numel rounded down to a multiple of n).
  const int64_t row = numel / n;
  const Tensor scattered = dist::reduce_scatter(mine(row * n).reshape({n, row}), dist::ReduceOp::Sum);
  REQUIRE(scattered.shape() == Shape{row});
  // Σ_q (1000 q + me·row + j)
  CHECK(testing::values(scattered)[0] == 1000.0 * q_sum + n * static_cast<double>(me * row));
}

TEST_CASE("asynchronous collectives queued in a row complete in order, before a blocking one", "[dist][collectives]") {
  const int n = dist::world_size();
  std::vector<Tensor> tensors;
  std::vector<dist::Work> works;
  for (int k = 0; k < 4; ++k) {
    tensors.push_back(full({1000 + k}, k + 1.0, kFloat64));
    works.push_back(dist::all_reduce_async(tensors.back(), dist::ReduceOp::Mean));
  }
  Tensor last = full({500}, dist::rank(), kFloat64);
  dist::broadcast(last, n - 1);  // waits for the queue: the ranks reach MPI in the same order
  CHECK(testing::values(last) == std::vector<double>(500, n - 1.0));
  for (int k = 0; k < 4; ++k) {
    CHECK(works[static_cast<size_t>(k)].is_completed());
    CHECK(testing::values(works[static_cast<size_t>(k)].wait()) == std::vector<double>(static_cast<size_t>(1000 + k), k + 1.0));
  }
}
