// matmul: [..., M, K] x [K, N] -> [..., M, N]; the leading dims of the left operand are batch
// dims folded into M (what Linear needs). The backward is two more GEMMs.
#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/gemm.hpp"
#include "out_of_memory.hpp"

namespace tg {

Tensor matmul(const Tensor& a, const Tensor& b) try {
  check(a.defined() && b.defined(), "matmul", "undefined tensor operand");
  check(a.dim() >= 2 && b.dim() == 2, "matmul", "expected a [..., M, K] tensor times a [K, N] matrix, got ",
        a.shape(), " x ", b.shape());
  check(a.dtype() == b.dtype(), "matmul", "dtypes differ: ", a.dtype(), " and ", b.dtype());
  const int64_t K = a.shape().back(), N = b.shape()[1];
  check(b.shape()[0] == K, "matmul", "inner sizes differ: ", a.shape(), " x ", b.shape(), " (", K, " vs ",
        b.shape()[0], ")");
  Shape out_shape = a.shape();
  out_shape.back() = N;
  int64_t rows = 1;  // M: every leading dim of a folded into rows
  for (size_t d = 0; d + 1 < a.shape().size(); ++d) rows *= a.shape()[d];
  Tensor out = make_tensor(out_shape, a.dtype(), "matmul");
  detail::dispatch_floating("matmul", a.dtype(), [&]<typename T>() {
    detail::gemm<T>(false, false, rows, N, K, a.data<T>(), b.data<T>(), out.mutable_data<T>(), false);
  });
  if (autograd::needs_grad(a, b))
    autograd::record(out, "MatmulBackward", {a, b},
                     [saved_a = autograd::SavedTensor(a), saved_b = autograd::SavedTensor(b), rows, N, K](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &a = grads.unpack(saved_a), &b = grads.unpack(saved_b);
                       detail::dispatch_floating("MatmulBackward", a.dtype(), [&]<typename T>() {
                         if (grads.needed(0)) {  // dA[M, K] = G[M, N] · Bᵀ
                           Tensor da = make_tensor(a.shape(), a.dtype());
                           detail::gemm<T>(false, true, rows, K, N, g.data<T>(), b.data<T>(), da.mutable_data<T>(), false);
                           grads.set(0, da);
                         }
                         if (grads.needed(1)) {  // dB[K, N] = Aᵀ · G[M, N]
                           Tensor db = make_tensor(b.shape(), b.dtype());
                           detail::gemm<T>(true, false, K, N, rows, a.data<T>(), g.data<T>(), db.mutable_data<T>(), false);
                           grads.set(1, db);
                         }
                       });
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("matmul");
}

Tensor Tensor::matmul(const Tensor& other) const { return tg::matmul(*this, other); }

}  // namespace tg
