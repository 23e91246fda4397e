/// @file
/// tg::nn::utils::rnn — batches of sequences of different lengths for the recurrent modules, as
/// torch.nn.utils.rnn: PackedSequence and the functions that pack, pad and unpack.
///
/// @code
///   // three sequences of lengths 5, 2 and 3, padded to [L = 5, N = 3, H_in = 8]
///   tg::Tensor lengths = tg::tensor<int64_t>({5, 2, 3});
///   auto packed = tg::nn::utils::rnn::pack_padded_sequence(x, lengths, false, /*enforce_sorted=*/false);
///   auto [out, state] = lstm.forward(packed);                 // out is packed too
///   auto [y, out_lengths] = tg::nn::utils::rnn::pad_packed_sequence(out);  // y: [5, 3, H_out]
/// @endcode
///
/// A PackedSequence holds the sequences sorted by decreasing length and interleaved by time step:
/// `data` holds step 0 of every sequence, then step 1 of those at least 2 long, and so on, and
/// `batch_sizes[t]` counts the sequences still running at step t (PyTorch's layout exactly).
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::nn::utils::rnn {

/// torch.nn.utils.rnn.PackedSequence: sequences of different lengths, packed time step by time step.
struct PackedSequence {
  Tensor data;         ///< [Σ lengths, *]: the steps of all sequences, time-major, longest first
  Tensor batch_sizes;  ///< int64 [max length]: how many sequences run at each step (non-increasing)
  Tensor sorted_indices;    ///< int64 [N]: sorted position → caller's index; undefined when the input was sorted
  Tensor unsorted_indices;  ///< int64 [N]: caller's index → sorted position; undefined when the input was sorted
};

/// torch.nn.utils.rnn.pack_padded_sequence: packs `input` ([L, N, *], or [N, L, *] with
/// batch_first) whose sequence b is `lengths[b]` long (int64 [N], each in [1, L]). With
/// `enforce_sorted` the lengths must be non-increasing (else tg::Error); without it the sequences
/// are sorted here and the indices to restore the caller's order are kept. Differentiable in input.
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);

/// torch.nn.utils.rnn.pad_packed_sequence: the inverse of pack_padded_sequence. Returns the padded
/// batch ([L, N, *], [N, L, *] with batch_first, in the caller's original order) with
/// `padding_value` past each sequence's end, and the lengths (int64 [N]). `total_length` pads to
/// that many steps (it must be at least the longest sequence). Differentiable in sequence.data.
std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                               double padding_value = 0.0,
                                               std::optional<int64_t> total_length = std::nullopt);

/// torch.nn.utils.rnn.pad_sequence: stacks sequences [L_i, *] (same trailing shape and dtype) into
/// [max L_i, N, *] ([N, max L_i, *] with batch_first), `padding_value` past each end. Differentiable.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);

/// torch.nn.utils.rnn.pack_sequence: pad_sequence then pack_padded_sequence with the sequences'
/// lengths; with `enforce_sorted` they must come longest first.
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace tg::nn::utils::rnn
