// Matrix products with PyTorch's rules: matmul (1-D operands, broadcast batch dims), bmm and
// baddbmm. Every product is C_i = A_i · B_i over a batch of row-major matrices, on the GEMM kernel
// (ops/gemm.hpp); every backward is two more such products with transposed operands:
//
//   C_i[M, N] = A_i[M, K] · B_i[K, N]   ⇒   dA_i = dC_i · B_iᵀ,   dB_i = A_iᵀ · dC_i
//
// An operand repeated over a batch (broadcast) receives the sum of its dA_i over the repetitions.
//
// Shapes, as torch.matmul reads them: a 1-D left operand [K] is the row [1, K] (M dropped from the
// result), a 1-D right operand [K] the column [K, 1] (N dropped); the dims before the last two are
// batch dims, broadcast against each other. When the right operand holds one matrix ([K, N], or
// batch dims of size 1), the left operand's batch folds into its rows: one GEMM of
// [batch·M, K] · [K, N], the path Linear-style products take.
#include <algorithm>

#include "autograd/node.hpp"
#include "autocast_policy.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "ops/broadcast.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"
#include "ops/reduction.hpp"
#include "out_of_memory.hpp"

namespace tg {
namespace {

int64_t product_of(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

// How an operand's matrices are read for the batch of products.
enum class Layout {
  Strided,   // one matrix per batch element, in order: the operand's batch dims are the result's
  Shared,    // one matrix for the whole batch (stride 0)
  Expanded,  // batch dims broadcast in part: a copy repeated to the result's batch dims is read
};

// One product, planned from the two shapes.
struct Plan {
  Shape a_matrix_shape, b_matrix_shape;  // the operands with a 1-D one as [1, K] or [K, 1]
  Shape batch_shape;                     // the batch dims of the result (broadcast)
  Shape out_shape;
  int64_t batch = 1, M = 1, K = 1, N = 1;
  bool fold = false;  // b holds one matrix: a's batch folds into rows, one GEMM
  Layout a_layout = Layout::Strided, b_layout = Layout::Strided;
};

Layout layout_of(const Shape& matrix_shape, int64_t batch) {
  const int64_t own = product_of(matrix_shape, 0, matrix_shape.size() - 2);
  // An operand whose batch dims have as many elements as the result's has each of them equal to
  // the result's (broadcasting only repeats dims of size 1), so its matrices are in order.
  if (own == batch) return Layout::Strided;
  return own == 1 ? Layout::Shared : Layout::Expanded;
}

Plan plan_product(const Tensor& a, const Tensor& b, const char* op) {
  check(a.defined() && b.defined(), op, "undefined tensor operand");
  check(a.dim() >= 1 && b.dim() >= 1, op, "both arguments need at least 1 dim, got ", a.shape(), " and ", b.shape());
  check(a.dtype() == b.dtype(), op, "dtypes differ: ", a.dtype(), " and ", b.dtype(), " (shapes ", a.shape(), " and ",
        b.shape(), ")");
  check(is_floating_point(a.dtype()), op, "not implemented for ", a.dtype(), " tensors (shapes ", a.shape(), " and ",
        b.shape(), "); float32 and float64 only", detail::cast_advice<detail::FloatingDTypes>(a.dtype()));
  Plan plan;
  plan.a_matrix_shape = a.dim() == 1 ? Shape{1, a.shape()[0]} : a.shape();
  plan.b_matrix_shape = b.dim() == 1 ? Shape{b.shape()[0], 1} : b.shape();
  const Shape &as = plan.a_matrix_shape, &bs = plan.b_matrix_shape;
  plan.M = as[as.size() - 2];
  plan.K = as.back();
  plan.N = bs.back();
  check(bs[bs.size() - 2] == plan.K, op, "shapes cannot be multiplied: ", a.shape(), " x ", b.shape(), " (inner sizes ",
        plan.K, " and ", bs[bs.size() - 2], ")");
  // Batch dims, aligned at the right; each pair equal, or one of them 1.
  const size_t a_batch = as.size() - 2, b_batch = bs.size() - 2, dims = std::max(a_batch, b_batch);
  plan.batch_shape.assign(dims, 1);
  for (size_t k = 0; k < dims; ++k) {
    const int64_t x = k < a_batch ? as[a_batch - 1 - k] : 1, y = k < b_batch ? bs[b_batch - 1 - k] : 1;
    check(x == y || x == 1 || y == 1, op, "batch dims do not broadcast: ", a.shape(), " x ", b.shape(), " (", x,
          " vs ", y, " in batch dim ", dims - 1 - k, ")");
    plan.batch_shape[dims - 1 - k] = x == 1 ? y : x;
  }
  plan.batch = product_of(plan.batch_shape, 0, dims);
  plan.out_shape = plan.batch_shape;
  if (a.dim() > 1) plan.out_shape.push_back(plan.M);
  if (b.dim() > 1) plan.out_shape.push_back(plan.N);
  plan.fold = product_of(bs, 0, b_batch) == 1;
  plan.a_layout = layout_of(as, plan.batch);
  plan.b_layout = layout_of(bs, plan.batch);
  return plan;
}

Shape with_matrix(const Shape& batch_shape, int64_t rows, int64_t cols) {
  Shape shape = batch_shape;
  shape.push_back(rows);
  shape.push_back(cols);
  return shape;
}

// The operand's matrices as the batch reads them: itself, or (Expanded) a copy repeated to the
// result's batch dims. Returns the tensor and its stride between matrices.
std::pair<Tensor, int64_t> batch_operand(const Tensor& x, const Shape& matrix_shape, Layout layout,
                                         const Shape& batch_shape) {
  const int64_t rows = matrix_shape[matrix_shape.size() - 2], cols = matrix_shape.back();
  switch (layout) {
    case Layout::Strided: return {x, rows * cols};
    case Layout::Shared: return {x, 0};
    case Layout::Expanded:
      return {detail::broadcast_to(make_view(x, matrix_shape), with_matrix(batch_shape, rows, cols)),
              rows * cols};
  }
  return {x, 0};
}

// out = a · b as planned (no autograd).
template <typename T>
void product_forward(const Plan& p, const Tensor& a, const Tensor& b, Tensor& out) {
  if (p.fold) {  // [rows, K] · [K, N] with rows = a's batch · M
    const int64_t rows = product_of(p.a_matrix_shape, 0, p.a_matrix_shape.size() - 1);
    detail::gemm<T>(false, false, rows, p.N, p.K, a.data<T>(), b.data<T>(), out.mutable_data<T>(), false);
    return;
  }
  const auto [a_batch, stride_a] = batch_operand(a, p.a_matrix_shape, p.a_layout, p.batch_shape);
  const auto [b_batch, stride_b] = batch_operand(b, p.b_matrix_shape, p.b_layout, p.batch_shape);
  detail::batched_gemm<T>(false, false, p.batch, p.M, p.N, p.K, a_batch.template data<T>(), stride_a,
                          b_batch.template data<T>(), stride_b, out.mutable_data<T>(), p.M * p.N, false);
}

// dA (want_a) and dB (want_b) of out = a · b from g = dout, each of its operand's shape.
template <typename T>
std::pair<Tensor, Tensor> product_backward(const Plan& p, const Tensor& a, const Tensor& b, const Tensor& g,
                                           bool want_a, bool want_b) {
  Tensor da, db;
  const T* dout = g.data<T>();
  if (p.fold) {
    const int64_t rows = product_of(p.a_matrix_shape, 0, p.a_matrix_shape.size() - 1);
    if (want_a) {  // dA[rows, K] = G[rows, N] · Bᵀ
      da = make_tensor(a.shape(), a.dtype());
      detail::gemm<T>(false, true, rows, p.K, p.N, dout, b.data<T>(), da.mutable_data<T>(), false);
    }
    if (want_b) {  // dB[K, N] = Aᵀ · G[rows, N]
      db = make_tensor(b.shape(), b.dtype());
      detail::gemm<T>(true, false, p.K, p.N, rows, a.data<T>(), dout, db.mutable_data<T>(), false);
    }
    return {da, db};
  }
  const int64_t out_stride = p.M * p.N;
  if (want_a) {  // dA_i[M, K] = G_i[M, N] · B_iᵀ, summed over the repetitions of a broadcast A
    const auto [b_batch, stride_b] = batch_operand(b, p.b_matrix_shape, p.b_layout, p.batch_shape);
    const bool own = p.a_layout == Layout::Strided;
    Tensor per_element = make_tensor(own ? a.shape() : with_matrix(p.batch_shape, p.M, p.K), a.dtype());
    detail::batched_gemm<T>(false, true, p.batch, p.M, p.K, p.N, dout, out_stride, b_batch.template data<T>(),
                            stride_b, per_element.mutable_data<T>(), p.M * p.K, false);
    da = own ? per_element : make_view(detail::sum_to(per_element, p.a_matrix_shape), a.shape());
  }
  if (want_b) {  // dB_i[K, N] = A_iᵀ · G_i[M, N], summed over the repetitions of a broadcast B
    const auto [a_batch, stride_a] = batch_operand(a, p.a_matrix_shape, p.a_layout, p.batch_shape);
    const bool own = p.b_layout == Layout::Strided;
    Tensor per_element = make_tensor(own ? b.shape() : with_matrix(p.batch_shape, p.K, p.N), b.dtype());
    detail::batched_gemm<T>(true, false, p.batch, p.K, p.N, p.M, a_batch.template data<T>(), stride_a, dout,
                            out_stride, per_element.mutable_data<T>(), p.K * p.N, false);
    db = own ? per_element : make_view(detail::sum_to(per_element, p.b_matrix_shape), b.shape());
  }
  return {da, db};
}

// The same gradients in recorded ops, for a recorded backward (create_graph): dA = G · Bᵀ and
// dB = Aᵀ · G by matmul on the operands read as matrices (its batch dims broadcast), each summed
// back to its operand's shape. Products of g with a and b, so differentiable again.
std::pair<Tensor, Tensor> product_backward_graph(const Plan& p, const Tensor& a, const Tensor& b, const Tensor& g,
                                                 bool want_a, bool want_b) {
  Tensor da, db;
  const Tensor g_matrices = g.reshape(with_matrix(p.batch_shape, p.M, p.N));
  if (want_a)
    da = detail::sum_to(matmul(g_matrices, b.reshape(p.b_matrix_shape).transpose(-2, -1)), p.a_matrix_shape)
             .reshape(a.shape());
  if (want_b)
    db = detail::sum_to(matmul(a.reshape(p.a_matrix_shape).transpose(-2, -1), g_matrices), p.b_matrix_shape)
             .reshape(b.shape());
  return {da, db};
}

// a · b as planned, recorded as one node named `node`.
Tensor planned_product(const Plan& plan, const Tensor& a, const Tensor& b, const char* op, const char* node) {
  Tensor out = make_tensor(plan.out_shape, a.dtype(), op);
  detail::dispatch_floating(op, a.dtype(), [&]<typename T>() { product_forward<T>(plan, a, b, out); });
  if (autograd::needs_grad(a, b))
    autograd::record(out, node, {a, b},
                     [saved_a = autograd::SavedTensor(a), saved_b = autograd::SavedTensor(b), plan](
                         const Tensor& g, autograd::GradInputs& grads) {
                       const Tensor &a = grads.unpack(saved_a), &b = grads.unpack(saved_b);
                       if (grads.create_graph()) {
                         auto [da, db] = product_backward_graph(plan, a, b, g, grads.needed(0), grads.needed(1));
                         if (da.defined()) grads.set(0, std::move(da));
                         if (db.defined()) grads.set(1, std::move(db));
                         return;
                       }
                       detail::dispatch_floating("MatmulBackward", a.dtype(), [&]<typename T>() {
                         auto [da, db] = product_backward<T>(plan, a, b, g, grads.needed(0), grads.needed(1));
                         if (da.defined()) grads.set(0, std::move(da));
                         if (db.defined()) grads.set(1, std::move(db));
                       });
                     });
  return out;
}

// bmm's and baddbmm's operands: [B, M, K] and [B, K, N] of one floating dtype.
Plan plan_bmm(const Tensor& batch1, const Tensor& batch2, const char* op) {
  check(batch1.defined() && batch2.defined(), op, "undefined tensor operand");
  check(batch1.dim() == 3 && batch2.dim() == 3, op, "expected 3-D tensors [B, M, K] and [B, K, N], got ",
        batch1.shape(), " and ", batch2.shape());
  check(batch1.shape()[0] == batch2.shape()[0], op, "batch sizes differ: ", batch1.shape(), " and ", batch2.shape());
  return plan_product(batch1, batch2, op);  // inner sizes and dtypes
}

}  // namespace

// bfloat16 products: the operands widened to float32 (exact), float32 accumulation, the product
// rounded once, as PyTorch's CPU kernels. This is the bfloat16 entry point of all three products;
// a bfloat16 GEMM that gives the same bits replaces the float32 route here.
Tensor matmul(const Tensor& a, const Tensor& b) try {
  if (detail::autocast_enabled())
    return detail::autocast_to_lower([](const Tensor& x, const Tensor& y) { return matmul(x, y); }, a, b);
  if (detail::all_bfloat16(a, b))
    return detail::in_float32_on_bf16_products(detail::Bf16Products::factors_exact,
                                               [](const Tensor& x, const Tensor& y) { return matmul(x, y); }, a, b);
  const Plan plan = plan_product(a, b, "matmul");
  return planned_product(plan, a, b, "matmul", "MatmulBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("matmul");
}

Tensor bmm(const Tensor& a, const Tensor& b) try {
  if (detail::autocast_enabled())
    return detail::autocast_to_lower([](const Tensor& x, const Tensor& y) { return bmm(x, y); }, a, b);
  if (detail::all_bfloat16(a, b))
    return detail::in_float32_on_bf16_products(detail::Bf16Products::factors_exact,
                                               [](const Tensor& x, const Tensor& y) { return bmm(x, y); }, a, b);
  const Plan plan = plan_bmm(a, b, "bmm");
  return planned_product(plan, a, b, "bmm", "BmmBackward");
} catch (...) {
  detail::rethrow_out_of_memory_as("bmm");
}

// out = β·input + α·(batch1 · batch2), input broadcast to [B, M, N]. With β = 0 input is not read
// (its NaNs do not reach out), as in PyTorch; its gradient is then 0.
//   d input = β · sum_to(G),  d batch1_i = α · G_i · batch2_iᵀ,  d batch2_i = α · batch1_iᵀ · G_i
Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, double beta, double alpha) try {
  if (detail::autocast_enabled())
    return detail::autocast_to_lower([beta, alpha](const Tensor& x, const Tensor& b1, const Tensor& b2) {
      return baddbmm(x, b1, b2, beta, alpha);
    }, input, batch1, batch2);
  if (detail::all_bfloat16(input, batch1, batch2))
    // α and β scale the gradients that baddbmm's backward multiplies: those factors are rounded.
    return detail::in_float32_on_bf16_products(detail::Bf16Products::round_factors, [beta, alpha](const Tensor& x, const Tensor& b1, const Tensor& b2) {
      return baddbmm(x, b1, b2, beta, alpha);
    }, input, batch1, batch2);
  const Plan plan = plan_bmm(batch1, batch2, "baddbmm");
  check(input.defined(), "baddbmm", "undefined input");
  check(input.dtype() == batch1.dtype(), "baddbmm", "dtypes differ: input ", input.dtype(), ", batches ",
        batch1.dtype());
  bool broadcasts = input.dim() <= 3;
  for (size_t k = 0; broadcasts && k < input.shape().size(); ++k) {
    const int64_t size = input.shape()[input.shape().size() - 1 - k];
    broadcasts = size == 1 || size == plan.out_shape[2 - k];
  }
  check(broadcasts, "baddbmm", "input of shape ", input.shape(), " does not broadcast to the product's shape ",
        plan.out_shape, " (batch1 ", batch1.shape(), ", batch2 ", batch2.shape(), ")");
  Tensor out = make_tensor(plan.out_shape, batch1.dtype(), "baddbmm");
  detail::dispatch_floating("baddbmm", out.dtype(), [&]<typename T>() {
    product_forward<T>(plan, batch1, batch2, out);
    if (out.numel() == 0 || (beta == 0.0 && alpha == 1.0)) return;
    T* result = out.mutable_data<T>();
    const T a = static_cast<T>(alpha), c = static_cast<T>(beta);
    if (beta == 0.0) {
      const auto plan1 = detail::make_plan<1>({out.shape()}, out.shape());
      detail::broadcast_kernel(result, plan1, [a](T p) { return a * p; }, result);
    } else {
      // Elementwise in place: each element reads only its own product, so writing it is safe.
      const auto plan2 = detail::make_plan<2>({out.shape(), input.shape()}, out.shape());
      detail::broadcast_kernel(result, plan2, [a, c](T p, T x) { return a * p + c * x; }, result, input.data<T>());
    }
  });
  if (autograd::needs_grad(input, batch1, batch2))
    autograd::record(out, "BaddbmmBackward", {input, batch1, batch2},
                     [saved_1 = autograd::SavedTensor(batch1), saved_2 = autograd::SavedTensor(batch2),
                      input_shape = input.shape(), plan, beta, alpha](const Tensor& g, autograd::GradInputs& grads) {
                       if (grads.needed(0))
                         grads.set(0, beta == 0.0 ? zeros(input_shape, g.dtype())
                                                  : detail::sum_to(g, input_shape) * beta);
                       if (!grads.needed(1) && !grads.needed(2)) return;
                       const Tensor &b1 = grads.unpack(saved_1), &b2 = grads.unpack(saved_2);
                       if (grads.create_graph()) {
                         auto [d1, d2] = product_backward_graph(plan, b1, b2, g, grads.needed(1), grads.needed(2));
                         if (d1.defined()) grads.set(1, alpha == 1.0 ? d1 : d1 * alpha);
                         if (d2.defined()) grads.set(2, alpha == 1.0 ? d2 : d2 * alpha);
                         return;
                       }
                       detail::dispatch_floating("BaddbmmBackward", g.dtype(), [&]<typename T>() {
                         auto [d1, d2] = product_backward<T>(plan, b1, b2, g, grads.needed(1), grads.needed(2));
                         if (d1.defined()) grads.set(1, alpha == 1.0 ? d1 : d1 * alpha);
                         if (d2.defined()) grads.set(2, alpha == 1.0 ? d2 : d2 * alpha);
                       });
                     });
  return out;
} catch (...) {
  detail::rethrow_out_of_memory_as("baddbmm");
}

Tensor Tensor::matmul(const Tensor& other) const { return tg::matmul(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return tg::bmm(*this, other); }
Tensor Tensor::baddbmm(const Tensor& batch1, const Tensor& batch2, double beta, double alpha) const {
  return tg::baddbmm(*this, batch1, batch2, beta, alpha);
}

}  // namespace tg
