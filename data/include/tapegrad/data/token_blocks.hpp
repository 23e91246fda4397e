/// @file
/// tg::data::TokenBlocks — a language model's training data: one long sequence of token ids cut
/// into blocks of `block_size` inputs, each with its targets shifted by one position.
///
/// @code
///   tg::data::TokenBlocks train(tokens, 64);               // tokens: int64 [N]
///   tg::Generator generator(0);
///   tg::data::Example batch = train.sample(12, generator);  // data, target: int64 [12, 64]
///   // target[b][t] == data[b][t + 1] (and the token after the block for t = 63)
/// @endcode
///
/// sample() is nanoGPT's get_batch: `batch_size` offsets drawn as torch.randint(N − block_size,
/// (batch_size,), generator=generator), so the offsets are PyTorch's for the same seed, and
/// blocks may overlap. As a Dataset (size(), get(i)), the sequence is cut into non-overlapping
/// blocks instead — block i starts at token i·block_size — which a DataLoader can shuffle and
/// batch for a pass over every token once.
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/data/dataset.hpp"
#include "tapegrad/generator.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::data {

/// Blocks of a token sequence: inputs tokens[o : o + block_size], targets tokens[o + 1 : o + block_size + 1].
class TokenBlocks {
 public:
  /// `tokens`: int64 [N], shared, not copied. tg::Error unless tokens is int64 and 1-D,
  /// block_size >= 1, and N >= block_size + 1 (one block and its last target).
  TokenBlocks(Tensor tokens, int64_t block_size);

  /// Non-overlapping blocks: (N − 1) / block_size (each needs its block and one more token).
  int64_t size() const { return (tokens_.numel() - 1) / block_size_; }
  /// Block `index` (negative counts from the end): {tokens[o : o + block_size], tokens[o + 1 : o + block_size + 1]},
  /// o = index · block_size, each int64 [block_size].
  Example get(int64_t index) const;
  /// Blocks `indices` of get(), stacked: int64 [indices.size(), block_size] each.
  Example get_batch(const std::vector<int64_t>& indices) const;

  /// The blocks that start at `offsets` (0 <= offset <= N − block_size − 1), stacked: int64
  /// [offsets.size(), block_size] each.
  Example at_offsets(const std::vector<int64_t>& offsets) const;
  /// nanoGPT's get_batch: `batch_size` (>= 1) offsets uniform in [0, N − block_size − 1] from
  /// `generator` (torch.randint's draws), then at_offsets.
  Example sample(int64_t batch_size, Generator& generator) const;

  const Tensor& tokens() const { return tokens_; }  ///< the whole sequence, int64 [N]
  int64_t block_size() const { return block_size_; }  ///< inputs (and targets) per block

 private:
  Tensor tokens_;  // int64 [N]
  int64_t block_size_;
};

}  // namespace tg::data
