#include "ops/gemm.hpp"

#include <Eigen/Core>

#include "parallel_for.hpp"

namespace tg::detail {

namespace {
// Below this many multiply-adds a product runs on one thread: splitting costs more than it saves.
constexpr int64_t kParallelFlops = int64_t{1} << 20;
// Fewer rows than this per block and Eigen's packed kernels lose their efficiency.
constexpr int64_t kMinRowsPerBlock = 32;
}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, bool accumulate) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const Matrix>;
  if (M == 0 || N == 0) return;
  Eigen::Map<Matrix> c(C, M, N);
  if (K == 0) {
    if (!accumulate) c.setZero();
    return;
  }
  const ConstMap a(A, trans_a ? K : M, trans_a ? M : K);
  const ConstMap b(B, trans_b ? N : K, trans_b ? K : N);
  const int64_t work = M * N * K;
  const int64_t blocks = work < kParallelFlops ? 1 : std::max<int64_t>(1, std::min(M / kMinRowsPerBlock, work / kParallelFlops));
  const int64_t rows_per_block = ceil_div(M, blocks);
  parallel_for(M, rows_per_block, [&](int64_t m0, int64_t m1) {
    auto c_rows = c.middleRows(m0, m1 - m0);
    auto run = [&](const auto& a_rows) {
      if (trans_b) {
        if (accumulate) c_rows.noalias() += a_rows * b.transpose();
        else c_rows.noalias() = a_rows * b.transpose();
      } else {
        if (accumulate) c_rows.noalias() += a_rows * b;
        else c_rows.noalias() = a_rows * b;
      }
    };
    if (trans_a) run(a.middleCols(m0, m1 - m0).transpose());
    else run(a.middleRows(m0, m1 - m0));
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, const float*, const float*, float*, bool);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, const double*, const double*, double*, bool);

}  // namespace tg::detail
