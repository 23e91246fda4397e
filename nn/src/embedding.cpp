// Embedding: a row lookup forward, an index_add backward into the weight's gradient, one tape node.
//
// The indices, of any shape, are read as one list of n rows: out [n, E] = weight[indices, :].
// Backward adds row k of the output gradient into row indices[k] of dweight, skipping padding_idx;
// core's index_add buckets the indices by row first, so rows fill in parallel, each adding its
// contributions in the order of the indices, with no atomics: the same bits at any thread count.
#include "tapegrad/nn/embedding.hpp"

#include <algorithm>

#include "autograd/node.hpp"
#include "dispatch.hpp"
#include "ops/indexing.hpp"
#include "out_of_memory.hpp"
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

}  // namespace

Tensor functional::embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) try {
  const char* op = "embedding";
  check(indices.defined() && weight.defined(), op, "undefined indices or weight");
  check(indices.dtype() == kInt64, op, "expected int64 indices, got ", indices.dtype());
  check(weight.dim() == 2, op, "expected a weight of shape [num_embeddings, embedding_dim], got ", weight.shape());
  tg::detail::check_dtype<tg::detail::FloatingDTypes>(op, weight.dtype());
  const int64_t num_embeddings = weight.size(0), embedding_dim = weight.size(1), n = indices.numel();
  const std::optional<int64_t> padding_row = normalize_padding_idx(padding_idx, num_embeddings, op);
  tg::detail::check_indices(indices.data<int64_t>(), n, num_embeddings, 0, op);
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
                     [saved_indices = autograd::SavedTensor(indices), table, skip = padding_row.value_or(-1)](
                         const Tensor& dout, autograd::GradInputs& grads) {
                       const Tensor& indices = grads.unpack(saved_indices);
                       Tensor dweight = zeros({table.size, table.inner}, dout.dtype());
                       tg::detail::dispatch_floating("EmbeddingBackward", dout.dtype(), [&]<typename T>() {
                         tg::detail::index_add<T>(dweight.mutable_data<T>(), table, indices.data<int64_t>(),
                                                  indices.numel(), dout.data<T>(), skip);
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
      padding_idx(normalize_padding_idx(options.padding_idx, num_embeddings, "Embedding")) {}

Tensor Embedding::forward(const Tensor& indices) { return functional::embedding(indices, weight, padding_idx); }

void Embedding::members(Members& m) { m.parameter("weight", weight); }

}  // namespace tg::nn
