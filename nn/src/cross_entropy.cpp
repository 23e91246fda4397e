// cross_entropy (class-index and probability targets, class weights, ignore_index, label
// smoothing, spatial dims) and nll_loss: one fused pass per row for log_softmax + nll (+ the
// smoothing term) forward, and an analytic backward (softmax − target distribution, scaled),
// parallel over rows and deterministic at any thread count.
//
// Shapes: input [N, C, d1, ...] (or [C]) is M = N·S rows of C classes, S = d1·... ; the classes of
// one row lie S apart. Mean reductions follow PyTorch 1.13 (aten/src/ATen/native/LossNLL.cpp).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "autograd/node.hpp"
#include "autocast_policy.hpp"
#include "bfloat16_compute.hpp"
#include "ops/exp_row_kernels.hpp"
#include "loss_reduction.hpp"
#include "out_of_memory.hpp"

namespace tg::nn {

namespace {

using detail::for_each_chunk;
using detail::row_chunks;
using detail::RowChunks;
using tg::detail::lane_sum;

// input [N, C, d1, ...] or [C] as rows; row r's class c sits at offset(r) + c · inner.
struct ClassRows {
  int64_t rows = 0;
  int64_t classes = 0;
  int64_t inner = 1;  // S = d1 · ... ; 1 without spatial dims
  int64_t offset(int64_t row) const { return (row / inner) * classes * inner + row % inner; }
};

ClassRows class_rows(const Shape& input_shape) {
  ClassRows rows;
  if (input_shape.size() == 1) {
    rows.rows = 1;
    rows.classes = input_shape[0];
    return rows;
  }
  rows.classes = input_shape[1];
  for (size_t d = 2; d < input_shape.size(); ++d) rows.inner *= input_shape[d];
  rows.rows = input_shape[0] * rows.inner;
  return rows;
}

// The shape of one loss per row: [N, C, d1, ...] -> [N, d1, ...]; [C] -> [].
Shape row_shape(const Shape& input_shape) {
  Shape shape = input_shape;
  shape.erase(shape.begin() + (input_shape.size() == 1 ? 0 : 1));
  return shape;
}

// For a backward pass that is itself differentiated (create_graph): the class dim of input (0 for a
// [C] input, 1 otherwise); a [C] weight shaped to broadcast along it ([C, 1, ...] with spatial
// dims); and the upstream gradient G as a recorded tensor that broadcasts against input, one per
// row under None (grad_output with a size-1 class dim), grad_output / divisor (0-d) otherwise.
int64_t class_dim(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

Tensor along_classes(const Tensor& weight, const Tensor& input) {
  Shape shape(static_cast<size_t>(input.dim() - class_dim(input)), 1);
  shape[0] = weight.numel();
  return weight.reshape(shape);
}

Tensor recorded_upstream(const Tensor& grad_output, const Tensor& input, Reduction reduction, double divisor) {
  if (reduction == Reduction::None) return grad_output.unsqueeze(class_dim(input));
  // A mean over no weight (every target ignored) sends every row 0, as the fused backward does.
  if (divisor == 0.0) return grad_output * 0.0;
  return divisor == 1.0 ? grad_output : grad_output * (1.0 / divisor);
}

// The validated arguments of a class loss.
struct ClassLossArgs {
  ClassRows rows;
  Tensor classes;  // a copy of the int64 targets, so that backward uses the classes checked here
};

void check_input_and_weight(const char* op, const Tensor& input, const Tensor& weight) {
  detail::check_floating(op, "input", input);
  check(input.dim() >= 1, op, "expected input of shape [N, C], [C] or [N, C, d1, ...], got ", input.shape());
  if (!weight.defined()) return;
  detail::check_floating(op, "weight", weight);
  detail::check_same_dtype(op, "weight", input, weight);
  detail::check_constant(op, "weight", weight);
  const int64_t C = class_rows(input.shape()).classes;
  check(weight.shape() == Shape{C}, op, "expected a weight per class, of shape [", C, "] for input of shape ",
        input.shape(), ", got ", weight.shape());
}

ClassLossArgs check_class_targets(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight,
                                  int64_t ignore_index) {
  check_input_and_weight(op, input, weight);
  check(target.defined(), op, "undefined target");
  check(target.dtype() == kInt64, op, "expected int64 class targets of shape ", row_shape(input.shape()),
        " for input of shape ", input.shape(), ", got ", target.dtype(), " of shape ", target.shape(),
        " (convert class indices with .to(tg::kInt64))");
  check(target.shape() == row_shape(input.shape()), op, "expected target of shape ", row_shape(input.shape()),
        " for input of shape ", input.shape(), " ([N, C] takes [N], [C] takes [], [N, C, d1, ...] takes [N, d1, ...]), got ",
        target.shape());
  ClassLossArgs args{class_rows(input.shape()), target.clone()};
  const int64_t* classes = args.classes.data<int64_t>();
  const int64_t C = args.rows.classes;
  for (int64_t i = 0; i < args.rows.rows; ++i)
    check(classes[i] == ignore_index || (classes[i] >= 0 && classes[i] < C), op, "target ", classes[i], " at index ",
          i, " is out of range for ", C, " classes (expected a class in [0, ", C, ") or ignore_index ", ignore_index,
          ")");
  return args;
}

void check_label_smoothing(double label_smoothing) {
  check(label_smoothing >= 0.0 && label_smoothing <= 1.0, "cross_entropy",
        "label_smoothing must be in [0, 1], got ", label_smoothing);
}

// One row of C classes, `stride` apart, read as doubles.
template <typename T>
struct ClassRow {
  const T* first;
  int64_t stride;
  double operator[](int64_t c) const { return static_cast<double>(first[c * stride]); }
};

// Contiguous float32 rows (no spatial dims) take the per-level row kernels, whose exp vectorises
// (core's ops/exp_row_kernels.hpp: e^(x − shift) in float lanes within 0.78 ulp); the others
// std::exp.
template <typename T>
bool on_row_kernels(const ClassRow<T>& row) {
  return std::is_same_v<T, float> && row.stride == 1;
}

// log Σ_c exp(row[c]) with the row max subtracted first: exp never overflows and the largest term
// is exactly 1, so large logits (1e3) stay exact. A contiguous float32 row may also keep what
// backward needs: e[c] = exp(row[c] − max) (within 0.78 ulp) and *sum = Σe (both or neither).
template <typename T>
double log_sum_exp(const ClassRow<T>& row, int64_t C, float* e = nullptr, double* sum = nullptr) {
  if constexpr (std::is_same_v<T, float>) {
    if (on_row_kernels(row)) {
      const tg::detail::ExpRowKernels& kernels = tg::detail::exp_row_kernels_for_cpu();
      const double row_max = kernels.max(row.first, C);  // NaN skipped here, but it makes the sum NaN
      const double row_sum = kernels.sum_exp(row.first, row_max, e, C);
      if (sum) *sum = row_sum;
      return row_max + std::log(row_sum);
    }
  }
  double row_max = C > 0 ? row[0] : 0.0;
  for (int64_t c = 1; c < C; ++c)
    if (row[c] > row_max) row_max = row[c];  // a NaN first element stays: the result is NaN, as in PyTorch
  return row_max + std::log(lane_sum(C, [&](int64_t c) { return std::exp(row[c] - row_max); }));
}

// The softmax of one row of C classes at a time, as doubles: p_c = exp(row[c] − lse). Contiguous
// float32 rows take the level's float-lane exp (within 0.78 ulp of the exact value), through a
// float buffer; the others std::exp.
template <typename T>
class RowSoftmax {
 public:
  explicit RowSoftmax(int64_t C) : p_(static_cast<size_t>(C)), e_(std::is_same_v<T, float> ? p_.size() : 0) {}

  const double* operator()(const ClassRow<T>& row, double lse) {
    const auto C = static_cast<int64_t>(p_.size());
    if constexpr (std::is_same_v<T, float>) {
      if (on_row_kernels(row)) {
        tg::detail::exp_row_kernels_for_cpu().scaled_exp(row.first, lse, 1.0, e_.data(), C);
        std::copy(e_.begin(), e_.end(), p_.begin());
        return p_.data();
      }
    }
    for (int64_t c = 0; c < C; ++c) p_[c] = std::exp(row[c] - lse);
    return p_.data();
  }

 private:
  std::vector<double> p_;
  std::vector<float> e_;
};

// --- class-index targets: cross_entropy and nll_loss --------------------------------------------

// Per-row terms over the non-ignored rows: Σ w[y]·(−log p_y), Σ_c w_c·(−log p_c) (the smoothing
// term) and Σ w[y] (the mean's divisor).
struct ClassSums {
  double nll = 0.0;
  double smooth = 0.0;
  double weight = 0.0;
};

// input: [M rows of C] (ClassRows); target: [M]; weight: [C] or null. With `normalize` the rows
// are logits and p = softmax(row) (cross_entropy); without, they already are log-probabilities
// (nll_loss): lse = 0 and no softmax term in backward.
template <typename T>
struct ClassIndexLoss {
  const T* input;
  const int64_t* target;
  const T* weight;
  ClassRows rows;
  int64_t ignore_index;
  double smoothing;  // ε; 0 for nll_loss
  bool normalize;

  ClassRow<T> row(int64_t r) const { return {input + rows.offset(r), rows.inner}; }
  double class_weight(int64_t c) const { return weight ? static_cast<double>(weight[c]) : 1.0; }

  // Fills lse: [M] (saved for backward) and, unless null, per_row: [M] with each row's loss;
  // returns the sums. With row_exp (contiguous float32 logits, no smoothing) also keeps each row's
  // e_c = exp(x_c − max) in row_exp: [M rows of C] and Σe in exp_sum: [M], for backward.
  ClassSums forward(double* lse, T* per_row, float* row_exp, double* exp_sum) const {
    const int64_t C = rows.classes;
    const RowChunks chunks = row_chunks(rows.rows, C);
    std::vector<double> slots(static_cast<size_t>(3 * chunks.count), 0.0);
    for_each_chunk(chunks, rows.rows, [&](int64_t chunk, int64_t r0, int64_t r1) {
      double nll = 0.0, smooth = 0.0, weight_sum = 0.0;
      double* slot = slots.data() + 3 * chunk;
      if constexpr (std::is_same_v<T, float>) {
        if (row_exp) {
          forward_kept_exp(r0, r1, per_row, row_exp, exp_sum, lse, slot);
          return;
        }
      }
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t y = target[r];
        lse[r] = 0.0;
        if (y == ignore_index) {
          if (per_row) per_row[r] = T(0);
          continue;
        }
        const ClassRow<T> x = row(r);
        if (normalize)
          lse[r] = row_exp ? log_sum_exp(x, C, row_exp + rows.offset(r), exp_sum + r) : log_sum_exp(x, C);
        // −log p_c = lse − x_c
        const double row_nll = class_weight(y) * (lse[r] - x[y]);
        const double row_smooth =
            smoothing > 0.0 ? lane_sum(C, [&](int64_t c) { return class_weight(c) * (lse[r] - x[c]); }) : 0.0;
        if (per_row)
          per_row[r] = static_cast<T>(smoothing > 0.0 ? (1.0 - smoothing) * row_nll + smoothing / C * row_smooth
                                                      : row_nll);
        nll += row_nll;
        smooth += row_smooth;
        weight_sum += class_weight(y);
      }
      slot[0] = nll;
      slot[1] = smooth;
      slot[2] = weight_sum;
    });
    const std::vector<double> sums = detail::sum_slots(slots, chunks.count, 3);
    return {sums[0], sums[1], sums[2]};
  }

  // forward's rows r0 … r1 for contiguous float32 logits that keep their exponentials (no
  // smoothing): the chunk's max and Σe per row in one call of the level's kernel, e into row_exp.
  // lse = max + log Σe. Without weights and per-row losses only the
  // sum of the lse is needed: Σ_r log Σe_r is taken as log Π_r Σe_r over kRowsPerLog rows at a
  // time, one log for many rows (each Σe_r is in [1, C], its largest term being e^0 = 1, so the
  // product of kRowsPerLog stays finite for any C below 2^63, rounded 16 times at 2^-53).
  static constexpr int64_t kRowsPerLog = 16;
  void forward_kept_exp(int64_t r0, int64_t r1, T* per_row, float* row_exp, double* exp_sum, double* lse,
                        double* slot) const {
    const int64_t C = rows.classes;
    tg::detail::exp_row_kernels_for_cpu().max_sum_exp(input + r0 * C, r1 - r0, C, row_exp + r0 * C, lse + r0,
                                                      exp_sum + r0);
    const bool fold_logs = !weight && !per_row;
    double nll = 0.0, weight_sum = 0.0, product = 1.0;
    int64_t factors = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t y = target[r];
      if (y == ignore_index) {
        lse[r] = 0.0;
        if (per_row) per_row[r] = T(0);
        continue;
      }
      const double x_y = static_cast<double>(input[r * C + y]);
      if (fold_logs) {
        // lse[r] keeps the max only: backward does not read it here
        nll += lse[r] - x_y;
        product *= exp_sum[r];
        if (++factors == kRowsPerLog) nll += std::log(product), product = 1.0, factors = 0;
      } else {
        lse[r] += std::log(exp_sum[r]);
        const double row_nll = class_weight(y) * (lse[r] - x_y);
        if (per_row) per_row[r] = static_cast<T>(row_nll);
        nll += row_nll;
      }
      weight_sum += class_weight(y);
    }
    if (factors > 0) nll += std::log(product);
    slot[0] = nll;
    slot[1] = 0.0;
    slot[2] = weight_sum;
  }

  // dinput = a · (p − one_hot(y)) + b · (p · Σ_c w_c − w), per non-ignored row, where a and b are
  // the gradients reaching the row's nll and smoothing terms; ignored rows get 0. row_exp and
  // exp_sum: what forward kept, or null.
  template <typename Upstream>
  void backward(const double* lse, const float* row_exp, const double* exp_sum, const Upstream& grad,
                T* dinput) const {
    const int64_t C = rows.classes;
    const double weight_total = lane_sum(C, [&](int64_t c) { return class_weight(c); });
    for_each_chunk(row_chunks(rows.rows, C), rows.rows, [&](int64_t, int64_t r0, int64_t r1) {
      RowSoftmax<T> softmax(normalize ? C : 0);
      for (int64_t r = r0; r < r1; ++r) {
        T* dx = dinput + rows.offset(r);
        const int64_t y = target[r];
        if (y == ignore_index) {
          for (int64_t c = 0; c < C; ++c) dx[c * rows.inner] = T(0);
          continue;
        }
        const ClassRow<T> x = row(r);
        const double a = (1.0 - smoothing) * class_weight(y) * grad(r);
        const double b = smoothing > 0.0 ? smoothing / C * grad(r) : 0.0;
        if constexpr (std::is_same_v<T, float>) {
          if (row_exp) {
            // The common case, from forward's e_c, with no exp: dx_c = a · p_c = (a / Σe) · e_c, the
            // factor rounded to float and the product in float, in the level's vectors (within 1.5 ulp
            // of the exact product); then dx_y = a · (p_y − 1).
            const float* e = row_exp + rows.offset(r);
            tg::detail::exp_row_kernels_for_cpu().scale(e, a / exp_sum[r], dx, C);
            dx[y] = static_cast<T>(a * (static_cast<double>(e[y]) / exp_sum[r] - 1.0));
            continue;
          }
        }
        const double* p = normalize ? softmax(x, lse[r]) : nullptr;
        for (int64_t c = 0; c < C; ++c) {
          const double p_c = normalize ? p[c] : 0.0;
          const double d = a * (p_c - (c == y ? 1.0 : 0.0));
          dx[c * rows.inner] = static_cast<T>(smoothing > 0.0 ? d + b * (p_c * weight_total - class_weight(c)) : d);
        }
      }
    });
  }
};

// ClassIndexLoss::backward in recorded tg ops, for a backward pass that is itself differentiated
// (create_graph). Its two terms gathered per row r of logits x (target y, weights w, ε smoothing):
//   dx_c = G_r · (p_c · a_r − b_rc),  a_r = (1 − ε)·w_y + ε/C · Σ_k w_k,
//   b_rc = (1 − ε)·w_y·[c = y] + ε/C · w_c,
// with a = b = 0 on ignored rows and no p term for nll_loss (whose rows are log-probabilities).
// a and b are constants; p = softmax(x) is recomputed from the connected input.
Tensor class_index_backward_differentiable(const Tensor& grad_output, const Tensor& input, const Tensor& classes,
                                           const Tensor& weight, const ClassRows& rows, int64_t ignore_index,
                                           Reduction reduction, double smoothing, bool normalize, double divisor) {
  const int64_t C = rows.classes;
  std::vector<double> w(static_cast<size_t>(C), 1.0);
  if (weight.defined()) w = weight.to(kFloat64).to_vector<double>();
  double weight_total = 0.0;
  for (const double w_c : w) weight_total += w_c;
  const int64_t* target = classes.data<int64_t>();
  std::vector<double> a(static_cast<size_t>(rows.rows), 0.0);      // one per row
  std::vector<double> b(static_cast<size_t>(input.numel()), 0.0);  // input's layout
  for (int64_t r = 0; r < rows.rows; ++r) {
    const int64_t y = target[r];
    if (y == ignore_index) continue;
    const double w_y = w[static_cast<size_t>(y)];
    a[static_cast<size_t>(r)] = normalize ? (1.0 - smoothing) * w_y + smoothing / C * weight_total : 0.0;
    for (int64_t c = 0; c < C; ++c)
      b[static_cast<size_t>(rows.offset(r) + c * rows.inner)] =
          (c == y ? (1.0 - smoothing) * w_y : 0.0) + (smoothing > 0.0 ? smoothing / C * w[static_cast<size_t>(c)] : 0.0);
  }
  Shape per_row = row_shape(input.shape());  // a as [N, 1, d1, ...] ([1] for a [C] input)
  per_row.insert(per_row.begin() + class_dim(input), 1);
  const Tensor upstream = recorded_upstream(grad_output, input, reduction, divisor);
  const Tensor target_terms = tensor(b, input.shape(), input.dtype());
  if (!normalize) return -(upstream * target_terms);
  return upstream * (input.softmax(class_dim(input)) * tensor(a, per_row, input.dtype()) - target_terms);
}

// The class-index loss, reduced as PyTorch 1.13 does (cross_entropy_loss_label_smoothing):
//   mean: ((1 − ε)·Σ nll + ε/C · Σ smooth) / Σ w[y] over the non-ignored rows (w = 1 unweighted);
//   sum: the same without the divisor; none: each row's (1 − ε)·nll + ε/C · smooth.
Tensor class_index_loss(const char* op, const char* node, const Tensor& input, const ClassLossArgs& args,
                        const Tensor& weight, int64_t ignore_index, Reduction reduction, double smoothing,
                        bool normalize) {
  const ClassRows rows = args.rows;
  Tensor lse = make_tensor({rows.rows}, kFloat64);
  // Contiguous float32 logits without smoothing keep each row's exponentials for backward, which
  // then multiplies instead of exponentiating again (PyTorch keeps its log_softmax output, the same
  // memory). The other cases recompute the softmax in backward.
  Tensor row_exp, exp_sum;
  if (autograd::needs_grad(input) && normalize && smoothing == 0.0 && input.dtype() == kFloat32 && rows.inner == 1) {
    row_exp = make_tensor(input.shape(), kFloat32);
    exp_sum = make_tensor({rows.rows}, kFloat64);
  }
  Tensor out;
  ClassSums sums;
  tg::detail::dispatch_floating(op, input.dtype(), [&]<typename T>() {
    const ClassIndexLoss<T> loss{input.data<T>(), args.classes.data<int64_t>(),
                                 weight.defined() ? weight.data<T>() : nullptr, rows, ignore_index, smoothing, normalize};
    if (reduction == Reduction::None) out = make_tensor(row_shape(input.shape()), input.dtype());
    sums = loss.forward(lse.mutable_data<double>(), out.defined() ? out.mutable_data<T>() : nullptr,
                        row_exp.defined() ? row_exp.mutable_data<float>() : nullptr,
                        exp_sum.defined() ? exp_sum.mutable_data<double>() : nullptr);
  });
  // The mean's divisor (1 for sum and none).
  const double divisor = reduction == Reduction::Mean ? sums.weight : 1.0;
  if (reduction != Reduction::None) {
    const double nll = sums.nll / divisor;
    out = scalar_tensor(
        smoothing > 0.0 ? (1.0 - smoothing) * nll + smoothing / rows.classes * (sums.smooth / divisor) : nll,
        input.dtype());
  }
  if (autograd::needs_grad(input))
    autograd::record(out, node, {input},
                     [node, saved_input = autograd::SavedTensor(input), saved_weight = detail::save_if_defined(weight), classes = args.classes, lse, row_exp, exp_sum, rows,
                      ignore_index, reduction, smoothing, normalize, divisor](const Tensor& grad_output,
                                                                        autograd::GradInputs& grads) {
                       const Tensor& input = grads.unpack(saved_input);
                       const Tensor weight = detail::unpack_if_saved(grads, saved_weight);
                       if (grads.create_graph())
                         return grads.set(0, class_index_backward_differentiable(grad_output, input, classes, weight,
                                                                                 rows, ignore_index, reduction,
                                                                                 smoothing, normalize, divisor));
                       Tensor dinput = make_tensor(input.shape(), input.dtype());
                       tg::detail::dispatch_floating(node, input.dtype(), [&]<typename T>() {
                         const ClassIndexLoss<T> loss{input.data<T>(), classes.data<int64_t>(),
                                                      weight.defined() ? weight.data<T>() : nullptr, rows, ignore_index,
                                                      smoothing, normalize};
                         loss.backward(lse.data<double>(), row_exp.defined() ? row_exp.data<float>() : nullptr,
                                       exp_sum.defined() ? exp_sum.data<double>() : nullptr,
                                       detail::upstream<T>(grad_output, reduction, 1.0 / divisor),
                                       dinput.mutable_data<T>());
                       });
                       grads.set(0, dinput);
                     });
  return out;
}

// --- probability targets ----------------------------------------------------------------------

// input, target: [M rows of C] (ClassRows); weight: [C] or null. The target distribution is
// t' = (1 − ε)·t + ε/C; a row's loss is Σ_c w_c·t'_c·(lse − x_c).
template <typename T>
struct ClassProbabilityLoss {
  const T* input;
  const T* target;
  const T* weight;
  ClassRows rows;
  double smoothing;

  ClassRow<T> row(int64_t r) const { return {input + rows.offset(r), rows.inner}; }
  // w_c · t'_c of row r
  double weighted_target(int64_t r, int64_t c) const {
    const double t = static_cast<double>(target[rows.offset(r) + c * rows.inner]);
    const double smoothed = smoothing > 0.0 ? (1.0 - smoothing) * t + smoothing / rows.classes : t;
    return weight ? static_cast<double>(weight[c]) * smoothed : smoothed;
  }

  // Fills lse: [M] and, unless null, per_row: [M]; returns Σ of the row losses.
  double forward(double* lse, T* per_row) const {
    const int64_t C = rows.classes;
    const RowChunks chunks = row_chunks(rows.rows, C);
    std::vector<double> slots(static_cast<size_t>(chunks.count), 0.0);
    for_each_chunk(chunks, rows.rows, [&](int64_t chunk, int64_t r0, int64_t r1) {
      double total = 0.0;
      for (int64_t r = r0; r < r1; ++r) {
        const ClassRow<T> x = row(r);
        lse[r] = log_sum_exp(x, C);
        const double loss = lane_sum(C, [&](int64_t c) { return weighted_target(r, c) * (lse[r] - x[c]); });
        if (per_row) per_row[r] = static_cast<T>(loss);
        total += loss;
      }
      slots[static_cast<size_t>(chunk)] = total;
    });
    return detail::sum_slots(slots, chunks.count, 1)[0];
  }

  // dinput_c = g_r · (p_c · Σ_k w_k t'_k − w_c t'_c); dtarget_c = g_r · (1 − ε) · w_c · (lse − x_c).
  // Either output may be null.
  template <typename Upstream>
  void backward(const double* lse, const Upstream& grad, T* dinput, T* dtarget) const {
    const int64_t C = rows.classes;
    for_each_chunk(row_chunks(rows.rows, C), rows.rows, [&](int64_t, int64_t r0, int64_t r1) {
      RowSoftmax<T> softmax(dinput ? C : 0);
      for (int64_t r = r0; r < r1; ++r) {
        const ClassRow<T> x = row(r);
        const int64_t offset = rows.offset(r);
        const double g = grad(r);
        if (dinput) {
          const double target_mass = lane_sum(C, [&](int64_t c) { return weighted_target(r, c); });
          const double* p = softmax(x, lse[r]);
          for (int64_t c = 0; c < C; ++c)
            dinput[offset + c * rows.inner] = static_cast<T>(g * (p[c] * target_mass - weighted_target(r, c)));
        }
        if (dtarget)
          for (int64_t c = 0; c < C; ++c)
            dtarget[offset + c * rows.inner] = static_cast<T>(g * (1.0 - smoothing) * (weight ? static_cast<double>(weight[c]) : 1.0) * (lse[r] - x[c]));
      }
    });
  }
};

// ClassProbabilityLoss::backward in recorded tg ops, for a backward pass that is itself
// differentiated (create_graph), from the connected input x and target t:
//   t' = (1 − ε)·t + ε/C,  dx = G · (softmax(x) · Σ_c w_c t'_c − w t'),
//   dt = G · (1 − ε) · w · (−log_softmax(x)),
// into the slots the node needs (0: input, 1: target).
void class_probability_backward_differentiable(const Tensor& grad_output, const Tensor& input, const Tensor& target,
                                               const Tensor& weight, const ClassRows& rows, Reduction reduction,
                                               double smoothing, double divisor, autograd::GradInputs& grads) {
  const int64_t dim = class_dim(input);
  const Tensor upstream = recorded_upstream(grad_output, input, reduction, divisor);
  const Tensor w = weight.defined() ? along_classes(weight, input) : Tensor();
  if (grads.needed(0)) {
    const Tensor smoothed = smoothing > 0.0 ? target * (1.0 - smoothing) + smoothing / rows.classes : target;
    const Tensor weighted = w.defined() ? smoothed * w : smoothed;  // w_c t'_c
    grads.set(0, upstream * (input.softmax(dim) * weighted.sum({dim}, true) - weighted));
  }
  if (grads.needed(1)) {
    const Tensor nll = -input.log_softmax(dim);  // lse − x_c
    grads.set(1, upstream * (1.0 - smoothing) * (w.defined() ? w * nll : nll));
  }
}

// Probability targets: mean divides by the number of rows M (NaN for M = 0), whatever the weights.
Tensor class_probability_loss(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction,
                              double smoothing) {
  const ClassRows rows = class_rows(input.shape());
  Tensor lse = make_tensor({rows.rows}, kFloat64);
  Tensor out;
  double sum = 0.0;
  tg::detail::dispatch_floating("cross_entropy", input.dtype(), [&]<typename T>() {
    const ClassProbabilityLoss<T> loss{input.data<T>(), target.data<T>(),
                                       weight.defined() ? weight.data<T>() : nullptr, rows, smoothing};
    if (reduction == Reduction::None) out = make_tensor(row_shape(input.shape()), input.dtype());
    sum = loss.forward(lse.mutable_data<double>(), out.defined() ? out.mutable_data<T>() : nullptr);
  });
  const double divisor = reduction == Reduction::Mean ? static_cast<double>(rows.rows) : 1.0;
  if (reduction != Reduction::None) out = scalar_tensor(sum / divisor, input.dtype());
  if (autograd::needs_grad(input, target))
    autograd::record(out, "CrossEntropyProbBackward", {input, target},
                     [saved_input = autograd::SavedTensor(input), saved_target = autograd::SavedTensor(target),
                      saved_weight = detail::save_if_defined(weight), lse, rows, reduction, smoothing,
                      divisor](const Tensor& grad_output, autograd::GradInputs& grads) {
                       const Tensor &input = grads.unpack(saved_input), &target = grads.unpack(saved_target);
                       const Tensor weight = detail::unpack_if_saved(grads, saved_weight);
                       if (grads.create_graph())
                         return class_probability_backward_differentiable(grad_output, input, target, weight, rows,
                                                                          reduction, smoothing, divisor, grads);
                       Tensor dinput, dtarget;
                       if (grads.needed(0)) dinput = make_tensor(input.shape(), input.dtype());
                       if (grads.needed(1)) dtarget = make_tensor(target.shape(), target.dtype());
                       tg::detail::dispatch_floating("CrossEntropyProbBackward", input.dtype(), [&]<typename T>() {
                         const ClassProbabilityLoss<T> loss{input.data<T>(), target.data<T>(),
                                                            weight.defined() ? weight.data<T>() : nullptr, rows,
                                                            smoothing};
                         loss.backward(lse.data<double>(), detail::upstream<T>(grad_output, reduction, 1.0 / divisor),
                                       dinput.defined() ? dinput.mutable_data<T>() : nullptr,
                                       dtarget.defined() ? dtarget.mutable_data<T>() : nullptr);
                       });
                       if (dinput.defined()) grads.set(0, dinput);
                       if (dtarget.defined()) grads.set(1, dtarget);
                     });
  return out;
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options) try {
  check_label_smoothing(options.label_smoothing);
  if (tg::detail::autocast_enabled()) {  // autocast's float32 list
    CrossEntropyOptions wide = options;
    wide.weight = tg::detail::widened(options.weight);
    return tg::detail::autocast_to_float32([&](const Tensor& x, const Tensor& t) { return cross_entropy(x, t, wide); },
                                           input, target);
  }
  // bfloat16 logits (with int64 classes, or bfloat16 probabilities, and a bfloat16 weight if any):
  // the float32 loss and gradient, each rounded once.
  if (tg::detail::is_bfloat16(input) && (!target.defined() || !is_floating_point(target.dtype()) ||
                                         tg::detail::is_bfloat16(target)) &&
      tg::detail::all_bfloat16_or_absent(options.weight)) {
    CrossEntropyOptions wide = options;
    wide.weight = tg::detail::widened(options.weight);
    return tg::detail::in_float32([&](const Tensor& x, const Tensor& t) { return cross_entropy(x, t, wide); }, input,
                                  target);
  }
  // As PyTorch: a target of input's shape holds class probabilities, any other one class indices.
  if (input.defined() && target.defined() && input.dim() >= 1 && target.shape() == input.shape()) {
    check_input_and_weight("cross_entropy", input, options.weight);
    check(target.dtype() == input.dtype(), "cross_entropy", "expected probability targets of input's dtype ",
          input.dtype(), ", got ", target.dtype(), " (a target of input's shape ", input.shape(),
          " holds class probabilities)");
    check(options.ignore_index < 0, "cross_entropy", "ignore_index (", options.ignore_index,
          ") is not supported with probability targets");
    return class_probability_loss(input, target, options.weight, options.reduction, options.label_smoothing);
  }
  // A float target is meant as probabilities (the other form takes int64 classes): name the shapes.
  if (input.defined() && target.defined() && input.dim() >= 1 && is_floating_point(target.dtype())) {
    check_input_and_weight("cross_entropy", input, options.weight);
    throw Error(tg::detail::concat(
        "cross_entropy: a ", target.dtype(), " target holds class probabilities and must have input's shape ",
        input.shape(), ", got target of shape ", target.shape(), " (class indices are an int64 target of shape ",
        row_shape(input.shape()), ")"));
  }
  const ClassLossArgs args = check_class_targets("cross_entropy", input, target, options.weight, options.ignore_index);
  return class_index_loss("cross_entropy", "CrossEntropyBackward", input, args, options.weight, options.ignore_index,
                          options.reduction, options.label_smoothing, true);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("cross_entropy");
}

Tensor cross_entropy(const Tensor& input, const std::vector<int64_t>& target, const CrossEntropyOptions& options) try {
  Tensor classes = make_tensor({static_cast<int64_t>(target.size())}, kInt64, "cross_entropy");
  std::copy(target.begin(), target.end(), classes.mutable_data<int64_t>());
  return cross_entropy(input, classes, options);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("cross_entropy");
}

Tensor cross_entropy(const Tensor& input, std::initializer_list<int64_t> target, const CrossEntropyOptions& options) try {
  return cross_entropy(input, std::vector<int64_t>(target), options);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("cross_entropy");
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options) try {
  if (tg::detail::autocast_enabled()) {  // autocast's float32 list
    NllLossOptions wide = options;
    wide.weight = tg::detail::widened(options.weight);
    return tg::detail::autocast_to_float32([&](const Tensor& x, const Tensor& t) { return nll_loss(x, t, wide); }, input,
                                           target);
  }
  if (tg::detail::is_bfloat16(input) && tg::detail::all_bfloat16_or_absent(options.weight)) {  // as cross_entropy
    NllLossOptions wide = options;
    wide.weight = tg::detail::widened(options.weight);
    return tg::detail::in_float32([&](const Tensor& x, const Tensor& t) { return nll_loss(x, t, wide); }, input, target);
  }
  const ClassLossArgs args = check_class_targets("nll_loss", input, target, options.weight, options.ignore_index);
  return class_index_loss("nll_loss", "NllLossBackward", input, args, options.weight, options.ignore_index,
                          options.reduction, 0.0, false);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("nll_loss");
}

}  // namespace tg::nn
