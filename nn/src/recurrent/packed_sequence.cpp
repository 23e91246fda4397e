// torch.nn.utils.rnn: packing a padded batch of sequences of different lengths time step by time
// step, and back. Built from differentiable shape ops (narrow, cat, stack, index_select), so the
// gradient flows through packing and unpacking to the padded input.
#include "tapegrad/nn/utils/rnn.hpp"

#include <algorithm>
#include <numeric>

#include "tapegrad/error.hpp"

namespace tg::nn::utils::rnn {

namespace {

// The lengths as a vector, checked: int64 [N], each in [1, steps].
std::vector<int64_t> checked_lengths(const char* op, const Tensor& lengths, int64_t batch, int64_t steps,
                                     const Tensor& input) {
  check(lengths.defined() && lengths.dtype() == kInt64 && lengths.dim() == 1, op,
        "expected lengths as an int64 vector, got ", lengths.defined() ? lengths.shape() : Shape{}, " of ",
        lengths.defined() ? lengths.dtype() : kInt64, " (convert it with .to(tg::kInt64))");
  check(lengths.size(0) == batch, op, "expected ", batch, " lengths for an input of shape ", input.shape(), ", got ",
        lengths.shape());
  const std::vector<int64_t> values = lengths.to_vector<int64_t>();
  for (size_t b = 0; b < values.size(); ++b)
    check(values[b] >= 1 && values[b] <= steps, op, "length ", values[b], " of sequence ", b,
          " is outside [1, ", steps, "] for an input of shape ", input.shape());
  return values;
}

// [rows, *] grown to `count` rows with `value`.
Tensor padded_rows(const Tensor& rows, int64_t count, double value) {
  if (rows.size(0) == count) return rows;
  Shape fill_shape = rows.shape();
  fill_shape[0] = count - rows.size(0);
  return tg::cat({rows, tg::full(fill_shape, value, rows.dtype())}, 0);
}

}  // namespace

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  const char* op = "pack_padded_sequence";
  check(input.defined() && input.dim() >= 2, op, "expected an input of shape ", batch_first ? "[N, L, *]" : "[L, N, *]",
        ", got ", input.defined() ? input.shape() : Shape{});
  Tensor x = batch_first ? input.transpose(0, 1) : input;  // [L, N, *]
  const int64_t steps = x.size(0), batch = x.size(1);
  std::vector<int64_t> values = checked_lengths(op, lengths, batch, steps, input);
  PackedSequence packed;
  if (enforce_sorted) {
    for (size_t b = 1; b < values.size(); ++b)
      check(values[b] <= values[b - 1], op, "lengths must be sorted in decreasing order when enforce_sorted is true, ",
            "got ", values[b - 1], " then ", values[b], " at sequences ", b - 1, " and ", b,
            "; sort the batch, or pass enforce_sorted = false");
  } else {
    // Longest first; equal lengths keep their order.
    std::vector<int64_t> order(values.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return values[a] > values[b]; });
    std::vector<int64_t> inverse(order.size());
    for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
    packed.sorted_indices = tg::tensor<int64_t>(order, {batch});
    packed.unsorted_indices = tg::tensor<int64_t>(inverse, {batch});
    x = x.index_select(1, packed.sorted_indices);
    std::vector<int64_t> sorted(values.size());
    for (size_t k = 0; k < order.size(); ++k) sorted[k] = values[order[k]];
    values = std::move(sorted);
  }
  // batch_sizes[t]: the sequences longer than t (the first ones, once sorted).
  std::vector<int64_t> batch_sizes;
  std::vector<Tensor> steps_rows;
  for (int64_t t = 0; t < values[0]; ++t) {
    int64_t running = 0;
    while (running < batch && values[running] > t) ++running;
    batch_sizes.push_back(running);
    steps_rows.push_back(x.select(0, t).narrow(0, 0, running));
  }
  packed.data = tg::cat(steps_rows, 0);
  packed.batch_sizes = tg::tensor<int64_t>(batch_sizes, {static_cast<int64_t>(batch_sizes.size())});
  return packed;
}

std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                               std::optional<int64_t> total_length) {
  const char* op = "pad_packed_sequence";
  check(sequence.data.defined() && sequence.batch_sizes.defined() && sequence.batch_sizes.dtype() == kInt64 &&
            sequence.batch_sizes.dim() == 1 && sequence.batch_sizes.numel() > 0,
        op, "expected a PackedSequence with data and non-empty int64 batch_sizes");
  const std::vector<int64_t> batch_sizes = sequence.batch_sizes.to_vector<int64_t>();
  const int64_t total = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t{0});
  check(sequence.data.dim() >= 1 && sequence.data.size(0) == total, op, "batch_sizes add up to ", total,
        " but the packed data has shape ", sequence.data.shape());
  const int64_t steps = static_cast<int64_t>(batch_sizes.size()), batch = batch_sizes[0];
  const int64_t length = total_length.value_or(steps);
  check(length >= steps, op, "expected total_length to be at least the length of the longest sequence (", steps,
        "), got ", length);
  std::vector<Tensor> rows;  // per step [N, *]
  int64_t offset = 0;
  for (int64_t t = 0; t < steps; ++t) {
    rows.push_back(padded_rows(sequence.data.narrow(0, offset, batch_sizes[t]), batch, padding_value));
    offset += batch_sizes[t];
  }
  Tensor padded = tg::stack(rows, 0);  // [L, N, *]
  if (length > steps) {
    Shape tail = padded.shape();
    tail[0] = length - steps;
    padded = tg::cat({padded, tg::full(tail, padding_value, padded.dtype())}, 0);
  }
  std::vector<int64_t> lengths(batch, 0);  // sequence b runs while batch_sizes[t] > b
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t b = 0; b < batch_sizes[t]; ++b) ++lengths[b];
  Tensor lengths_tensor = tg::tensor<int64_t>(lengths, {batch});
  if (sequence.unsorted_indices.defined()) {
    padded = padded.index_select(1, sequence.unsorted_indices);
    lengths_tensor = lengths_tensor.index_select(0, sequence.unsorted_indices);
  }
  return {batch_first ? padded.transpose(0, 1) : padded, lengths_tensor};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  const char* op = "pad_sequence";
  check(!sequences.empty(), op, "expected at least one sequence");
  int64_t longest = 0;
  for (size_t k = 0; k < sequences.size(); ++k) {
    const Tensor& s = sequences[k];
    check(s.defined() && s.dim() >= 1, op, "sequence ", k, " is undefined or 0-dimensional");
    Shape trailing(s.shape().begin() + 1, s.shape().end()), first(sequences[0].shape().begin() + 1,
                                                                   sequences[0].shape().end());
    check(trailing == first && s.dtype() == sequences[0].dtype(), op, "sequence ", k, " has shape ", s.shape(), " and ",
          s.dtype(), ", sequence 0 has shape ", sequences[0].shape(), " and ", sequences[0].dtype(),
          ": all must share the trailing dims and the dtype");
    longest = std::max(longest, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) padded.push_back(padded_rows(s, longest, padding_value));
  return tg::stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  const Tensor padded = pad_sequence(sequences);
  return pack_padded_sequence(padded, tg::tensor<int64_t>(lengths, {static_cast<int64_t>(lengths.size())}), false,
                              enforce_sorted);
}

}  // namespace tg::nn::utils::rnn
