// TokenBlocks: blocks of a token sequence and their targets, one position on.
#include "tapegrad/data/token_blocks.hpp"

#include <cstring>
#include <utility>

#include "tapegrad/error.hpp"

namespace tg::data {

TokenBlocks::TokenBlocks(Tensor tokens, int64_t block_size) : tokens_(std::move(tokens)), block_size_(block_size) {
  check(tokens_.defined(), "TokenBlocks", "the tokens must be a defined tensor");
  check(tokens_.dtype() == kInt64 && tokens_.dim() == 1, "TokenBlocks", "expected int64 tokens of shape [N], got ",
        tokens_.dtype(), " ", tokens_.shape());
  check(block_size_ >= 1, "TokenBlocks", "expected block_size >= 1, got ", block_size_);
  check(tokens_.numel() >= block_size_ + 1, "TokenBlocks", "a block of ", block_size_, " needs at least ",
        block_size_ + 1, " tokens (its inputs and the last one's target), got ", tokens_.numel());
}

Example TokenBlocks::get(int64_t index) const {
  const int64_t n = size();
  check(index >= -n && index < n, "TokenBlocks", "index ", index, " is out of range for a dataset of ", n,
        " blocks");
  const Example one = get_batch({index < 0 ? index + n : index});
  return {one.data.reshape({block_size_}), one.target.reshape({block_size_})};
}

Example TokenBlocks::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  std::vector<int64_t> offsets;
  offsets.reserve(indices.size());
  for (const int64_t index : indices) {
    check(index >= 0 && index < n, "TokenBlocks", "index ", index, " is out of range for a dataset of ", n,
          " blocks");
    offsets.push_back(index * block_size_);
  }
  return at_offsets(offsets);
}

Example TokenBlocks::at_offsets(const std::vector<int64_t>& offsets) const {
  const int64_t last = tokens_.numel() - block_size_ - 1;
  const auto rows = static_cast<int64_t>(offsets.size());
  Tensor data = empty({rows, block_size_}, kInt64);
  Tensor target = empty({rows, block_size_}, kInt64);
  const int64_t* tokens = tokens_.data<int64_t>();
  int64_t* x = data.mutable_data<int64_t>();
  int64_t* y = target.mutable_data<int64_t>();
  const auto bytes = static_cast<size_t>(block_size_) * sizeof(int64_t);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t offset = offsets[static_cast<size_t>(row)];
    check(offset >= 0 && offset <= last, "TokenBlocks", "offset ", offset, " is outside [0, ", last,
          "] for ", tokens_.numel(), " tokens in blocks of ", block_size_);
    std::memcpy(x + row * block_size_, tokens + offset, bytes);      // x = tokens[o : o + block]
    std::memcpy(y + row * block_size_, tokens + offset + 1, bytes);  // y = tokens[o + 1 : o + block + 1]
  }
  return {data, target};
}

Example TokenBlocks::sample(int64_t batch_size, Generator& generator) const {
  check(batch_size >= 1, "TokenBlocks::sample", "expected batch_size >= 1, got ", batch_size);
  // torch.randint(len(data) - block_size, (batch_size,)): offsets in [0, N - block_size - 1].
  const Tensor offsets = randint(tokens_.numel() - block_size_, {batch_size}, kInt64, &generator);
  return at_offsets(offsets.to_vector<int64_t>());
}

}  // namespace tg::data
