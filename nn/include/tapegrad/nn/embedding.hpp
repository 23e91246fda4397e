/// @file
/// tg::nn::Embedding — a lookup table of num_embeddings rows of embedding_dim values.
///
/// @code
///   tg::nn::Embedding embed(1000, 64);                    // nn.Embedding(1000, 64)
///   tg::nn::Embedding padded(1000, 64, {.padding_idx = 0});  // nn.Embedding(1000, 64, padding_idx=0)
///   tg::nn::Embedding bounded(1000, 64, {.max_norm = 1.0});  // rows renormalised to norm <= 1 when looked up
///   tg::Tensor vectors = embed(tokens);                   // int64 [B, S] -> [B, S, 64]
/// @endcode
#pragma once

#include <cstdint>
#include <optional>

#include "tapegrad/nn/module.hpp"

namespace tg::nn {

/// The optional arguments, by libtorch's names (torch::nn::EmbeddingOptions).
struct EmbeddingOptions {
  /// A row whose gradient is always zero and whose initial values are zeros ("padding" tokens);
  /// negative counts from the end, as in PyTorch.
  std::optional<int64_t> padding_idx = std::nullopt;
  /// Where the initial N(0, 1) values come from; the default generator (tg::manual_seed) when null.
  Generator* generator = nullptr;
  /// Each forward first scales the rows it looks up whose norm exceeds max_norm down to it, in
  /// place (see functional::EmbeddingFuncOptions::max_norm).
  std::optional<double> max_norm = std::nullopt;
  double norm_type = 2.0;  ///< the p of the p-norm that max_norm bounds (> 0 or infinity)
  /// Divides each row's gradient by how often its index occurs in the mini-batch.
  bool scale_grad_by_freq = false;
};

/// A lookup table: row i of weight is the vector of index i (nn.Embedding).
class Embedding : public Module {
 public:
  /// weight [num_embeddings, embedding_dim] from N(0, 1) (PyTorch's normal_, the same values for
  /// the same seed), then the padding row, if any, zeroed.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});

  Tensor forward(const Tensor& indices) override;  ///< int64 indices of any shape [...] -> [..., embedding_dim]
  void members(Members& m) override;

  Parameter weight;  ///< [num_embeddings, embedding_dim]
  int64_t num_embeddings;  ///< rows of the table
  int64_t embedding_dim;   ///< values per row
  std::optional<int64_t> padding_idx;  ///< in [0, num_embeddings) once constructed
  std::optional<double> max_norm;      ///< as EmbeddingOptions::max_norm
  double norm_type;                    ///< as EmbeddingOptions::norm_type
  bool scale_grad_by_freq;             ///< as EmbeddingOptions::scale_grad_by_freq
};

}  // namespace tg::nn
