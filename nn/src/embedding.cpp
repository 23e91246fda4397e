// Embedding: a row lookup forward, an index_add backward into the weight's gradient, one tape node.
//
// The indices, of any shape, are read as one list of n rows: out [n, E] = weight[indices, :].
// Backward adds row k of the output gradient into row indices[k] of dweight, skipping padding_idx;
// core's index_add buckets the indices by row first, so rows fill in parallel, each adding its
// contributions in the order of the indices, with no atomics: the same bits at any thread count.
// Two of PyTorch's options: max_norm scales the rows the indices name down to norm max_norm in place
// before the lookup (embedding_renorm_, outside the tape); scale_grad_by_freq multiplies each output
// gradient row by 1 / (its index's count in the batch) before the index_add.
#include "tapegrad/nn/embedding.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/node.hpp"
#include "bfloat16_compute.hpp"
#include "dispatch.hpp"
#include "ops/indexing.hpp"
#include "out_of_memory.hpp"
#include "tensor_impl.hpp"
#include "tapegrad/nn/functional.hpp"
#include "tapegrad/nn/init.hpp"

namespace tg::nn {

namespace {

// padding_idx in [0, num_embeddings), negative counting from the end, or tg::Error naming `op`.
std::optional<int64_t> normalize_padding_idx(std::optional<int64_t> padding_idx, int64_t num_embeddings,
                                             const char* op) {
  if (!padding_idx) return std::nullopt;
  check(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings, op, "padding_idx ", *padding_idx,
        " is out of range for ", num_embeddings, " embeddings");
  return *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
}

// The p-norm of one row of n values, accumulated in double: p = ∞ is the largest |value|.
template <typename T>
double row_norm(const T* row, int64_t n, double p) {
  double norm = 0.0;
  if (std::isinf(p)) {
    for (int64_t e = 0; e < n; ++e) norm = std::max(norm, std::fabs(static_cast<double>(row[e])));
    return norm;
  }
  for (int64_t e = 0; e < n; ++e) {
    const double v = std::fabs(static_cast<double>(row[e]));
    norm += p == 1.0 ? v : p == 2.0 ? v * v : std::pow(v, p);
  }
  return p == 1.0 ? norm : p == 2.0 ? std::sqrt(norm) : std::pow(norm, 1.0 / p);
}

// PyTorch's embedding_renorm_: every distinct row named by `indices` whose p-norm exceeds max_norm
// is scaled in place by max_norm / (norm + 1e-7), the factor rounded to the weight's dtype.
// weight: [num_embeddings, embedding_dim]; indices already checked to be in range.
void renorm_rows(Tensor weight, const Tensor& indices, double max_norm, double norm_type) {
  std::vector<int64_t> rows(indices.data<int64_t>(), indices.data<int64_t>() + indices.numel());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const int64_t embedding_dim = weight.size(1);
  bool changed = false;
  tg::detail::dispatch_floating("embedding", weight.dtype(), [&]<typename T>() {
    T* table = weight.mutable_data<T>();
    for (const int64_t r : rows) {
      T* row = table + r * embedding_dim;
      const double norm = row_norm(row, embedding_dim, norm_type);
      if (!(norm > max_norm)) continue;
      const T scale = static_cast<T>(max_norm / (norm + 1e-7));
      for (int64_t e = 0; e < embedding_dim; ++e) row[e] *= scale;
      changed = true;
    }
  });
  if (changed) tg::detail::bump_version(weight);  // a backward that saved the old rows must refuse them
}

// dout: [n, embedding_dim] -> each row k times 1 / (how many times indices[k] occurs), the factor
// rounded to dout's dtype, as PyTorch's scale_grad_by_freq scales each contribution.
Tensor scale_by_frequency(const Tensor& dout, const Tensor& indices, int64_t num_embeddings) {
  const int64_t n = indices.numel(), embedding_dim = n > 0 ? dout.numel() / n : 0;
  const int64_t* index = indices.data<int64_t>();
  std::vector<int64_t> counts(static_cast<size_t>(num_embeddings), 0);
  for (int64_t k = 0; k < n; ++k) ++counts[static_cast<size_t>(index[k])];
  Tensor scaled = make_tensor(dout.shape(), dout.dtype(), "EmbeddingBackward");
  tg::detail::dispatch_floating("EmbeddingBackward", dout.dtype(), [&]<typename T>() {
    const T* g = dout.data<T>();
    T* out = scaled.mutable_data<T>();
    for (int64_t k = 0; k < n; ++k) {
      const T scale = static_cast<T>(1.0 / static_cast<double>(counts[static_cast<size_t>(index[k])]));
      for (int64_t e = 0; e < embedding_dim; ++e) out[k * embedding_dim + e] = g[k * embedding_dim + e] * scale;
    }
  });
  return scaled;
}

// EmbeddingBackward's dweight in recorded tg ops, for a backward pass that is itself differentiated
// (create_graph): the output gradient's rows, each times a constant factor (0 on padding_idx's
// rows, 1 / its index's count with scale_grad_by_freq), added into rows indices[k] of zeros by
// scatter_add, whose gradient (a gather of the same rows) puts the map on the tape.
// dout: [indices..., embedding_dim] -> dweight: [num_embeddings, embedding_dim].
Tensor embedding_backward_differentiable(const Tensor& dout, const Tensor& indices, const tg::detail::AlongDim& table,
                                         int64_t skip, bool scale_grad_by_freq) {
  const int64_t n = indices.numel(), embedding_dim = table.inner;
  Tensor contributions = dout.reshape({n, embedding_dim});
  if (skip >= 0 || scale_grad_by_freq) {
    const int64_t* index = indices.data<int64_t>();
    std::vector<int64_t> counts(static_cast<size_t>(table.size), 0);
    for (int64_t k = 0; k < n; ++k) ++counts[static_cast<size_t>(index[k])];
    std::vector<double> factors(static_cast<size_t>(n), 1.0);  // [n, 1]
    for (int64_t k = 0; k < n; ++k) {
      const auto row = static_cast<size_t>(index[k]);
      double& factor = factors[static_cast<size_t>(k)];
      if (index[k] == skip) factor = 0.0;
      else if (scale_grad_by_freq) factor = 1.0 / static_cast<double>(counts[row]);
    }
    contributions = contributions * tensor(factors, {n, 1}, dout.dtype());
  }
  // Row k of the contributions goes to row indices[k]: the index repeated along embedding_dim.
  const Tensor rows = indices.reshape({n, 1}).expand({n, embedding_dim});
  return zeros({table.size, embedding_dim}, dout.dtype()).scatter_add(0, rows, contributions);
}

}  // namespace

Tensor functional::embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  return embedding(indices, weight, EmbeddingFuncOptions{.padding_idx = padding_idx});
}

Tensor functional::embedding(const Tensor& indices, const Tensor& weight, const EmbeddingFuncOptions& options) try {
  const char* op = "embedding";
  check(indices.defined() && weight.defined(), op, "undefined indices or weight");
  check(indices.dtype() == kInt64, op, "expected int64 indices, got ", indices.dtype());
  check(weight.dim() == 2, op, "expected a weight of shape [num_embeddings, embedding_dim], got ", weight.shape());
  // A bfloat16 table: the rows gathered exactly, the gradient summed in float32 and rounded once.
  // max_norm renormalises the table in place, which a widened copy cannot do: refused below.
  if (tg::detail::is_bfloat16(weight) && !options.max_norm)
    return tg::detail::in_float32([&](const Tensor& i, const Tensor& w) { return embedding(i, w, options); }, indices,
                                  weight);
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(op, weight.dtype());
  // max_norm >= 0 and norm_type > 0 are false for NaN, so these refuse NaN too.
  check(!options.max_norm || *options.max_norm >= 0, op, "expected max_norm >= 0, got ", options.max_norm.value_or(0));
  check(options.norm_type > 0, op, "expected norm_type > 0 (or infinity), got ", options.norm_type);
  const int64_t num_embeddings = weight.size(0), embedding_dim = weight.size(1), n = indices.numel();
  const std::optional<int64_t> padding_row = normalize_padding_idx(options.padding_idx, num_embeddings, op);
  tg::detail::check_indices(indices.data<int64_t>(), n, num_embeddings, 0, op);
  if (options.max_norm) renorm_rows(weight, indices, *options.max_norm, options.norm_type);
  // weight: [1, num_embeddings, embedding_dim] along dim 1
  const tg::detail::AlongDim table{.outer = 1, .size = num_embeddings, .inner = embedding_dim};
  Shape out_shape = indices.shape();
  out_shape.push_back(embedding_dim);
  Tensor out = make_tensor(out_shape, weight.dtype(), op);
  tg::detail::dispatch_floating(op, weight.dtype(), [&]<typename T>() {
    tg::detail::index_rows<T>(weight.data<T>(), table, indices.data<int64_t>(), n, out.mutable_data<T>());
  });
  if (autograd::needs_grad(weight))
    autograd::record(out, "EmbeddingBackward", {weight},
                     [saved_indices = autograd::SavedTensor(indices), table, skip = padding_row.value_or(-1),
                      scale_grad_by_freq = options.scale_grad_by_freq](const Tensor& dout, autograd::GradInputs& grads) {
                       const Tensor& indices = grads.unpack(saved_indices);
                       if (grads.create_graph())
                         return grads.set(0, embedding_backward_differentiable(dout, indices, table, skip,
                                                                               scale_grad_by_freq));
                       const Tensor contributions =
                           scale_grad_by_freq ? scale_by_frequency(dout, indices, table.size) : dout;
                       Tensor dweight = zeros({table.size, table.inner}, dout.dtype());
                       tg::detail::dispatch_floating("EmbeddingBackward", dout.dtype(), [&]<typename T>() {
                         tg::detail::index_add<T>(dweight.mutable_data<T>(), table, indices.data<int64_t>(),
                                                  indices.numel(), contributions.data<T>(), skip);
                       });
                       grads.set(0, dweight);
                     });
  return out;
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("embedding");
}

namespace {

// PyTorch's Embedding.reset_parameters: normal_(weight), then the padding row set to zeros.
Tensor default_init(int64_t num_embeddings, int64_t embedding_dim, const EmbeddingOptions& options) {
  check(num_embeddings >= 0 && embedding_dim >= 0, "Embedding",
        "expected non-negative sizes, got num_embeddings = ", num_embeddings, ", embedding_dim = ", embedding_dim);
  const std::optional<int64_t> padding_idx = normalize_padding_idx(options.padding_idx, num_embeddings, "Embedding");
  Tensor weight = empty({num_embeddings, embedding_dim});
  init::normal_(weight, 0.0, 1.0, options.generator);
  if (padding_idx) std::fill_n(weight.mutable_data<float>() + *padding_idx * embedding_dim, embedding_dim, 0.0f);
  return weight;
}

}  // namespace

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options)
    : weight("Embedding.weight", default_init(num_embeddings, embedding_dim, options)),
      num_embeddings(num_embeddings),
      embedding_dim(embedding_dim),
      padding_idx(normalize_padding_idx(options.padding_idx, num_embeddings, "Embedding")),
      max_norm(options.max_norm),
      norm_type(options.norm_type),
      scale_grad_by_freq(options.scale_grad_by_freq) {
  // The forward's checks, at construction: a bad option fails here, not at the first batch.
  check(!max_norm || *max_norm >= 0, "Embedding", "expected max_norm >= 0, got ", max_norm.value_or(0));
  check(norm_type > 0, "Embedding", "expected norm_type > 0 (or infinity), got ", norm_type);
}

Tensor Embedding::forward(const Tensor& indices) {
  return functional::embedding(indices, weight,
                               {.padding_idx = padding_idx,
                                .max_norm = max_norm,
                                .norm_type = norm_type,
                                .scale_grad_by_freq = scale_grad_by_freq});
}

void Embedding::members(Members& m) { m.parameter("weight", weight); }

}  // namespace tg::nn
