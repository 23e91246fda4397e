// One recurrent layer in one direction, the op every recurrent module and cell is built from.
//
// The sequences are packed rows (PyTorch's PackedSequence layout): `rows` [total, I] holds step 0
// of the batch_sizes[0] running sequences, then step 1 of the batch_sizes[1] still running, and so
// on; batch_sizes never grows, so the sequences running at a step are always the first rows of
// the state. A padded [L, N, I] input is the case batch_sizes = {N, N, ..., N}.
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/nn/rnn.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::nn::detail {

// A layer's parameters for one direction, with PyTorch's shapes (G gates: 1 for RNN, 4 for LSTM,
// 3 for GRU; H_out = proj_size or H):
// w_ih [G·H, I], w_hh [G·H, H_out], b_ih and b_hh [G·H] or undefined, w_hr [H_out, H] or undefined.
struct LayerWeights {
  Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
};

// The number of gates stacked in the weights' rows.
int64_t gate_count(RecurrentCell cell);

// Runs the layer over the packed rows, from step 0 up, or from the last step down when `reverse`.
// rows: [total, I], h0: [N, H_out], c0: [N, H] (LSTM only, else undefined), N = batch_sizes[0].
// Returns {y [total, H_out], h_n [N, H_out], c_n [N, H] (LSTM) or undefined}: y holds each step's
// h, and h_n/c_n each sequence's state after its own last step. One tape node (when an input needs
// a gradient) with an analytic backward through time; twice differentiable.
// The caller has checked every shape and dtype.
std::vector<Tensor> recurrent_layer(RecurrentCell cell, const Tensor& rows, const std::vector<int64_t>& batch_sizes,
                                    bool reverse, const Tensor& h0, const Tensor& c0, const LayerWeights& weights);

}  // namespace tg::nn::detail
