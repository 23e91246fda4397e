/// @file
/// tg::nn::RNN, LSTM, GRU and their cells RNNCell, LSTMCell, GRUCell — PyTorch's recurrent
/// modules, with their options, parameter names, initialisation and outputs.
///
/// @code
///   tg::nn::LSTM lstm(128, 256, {.num_layers = 2});            // nn.LSTM(128, 256, num_layers=2)
///   auto [y, state] = lstm.forward(x, std::nullopt);           // x [L, N, 128] -> y [L, N, 256]
///   auto [h_n, c_n] = state;                                   // [2, N, 256] each
///   auto [y2, state2] = lstm.forward(x2, std::tuple{h_n.detach(), c_n.detach()});  // truncated BPTT
///   tg::nn::GRU gru(16, 32, {.batch_first = true, .bidirectional = true});
///   auto [z, h] = gru.forward(x_nld, {});                      // {}: zero initial state
/// @endcode
///
/// Each layer and direction is one tape node: the input-to-hidden products of every time step are
/// one GEMM, each step's recurrent product runs on the same GEMM kernels, and one fused kernel per
/// step applies the gates and the cell update; the backward through time is analytic. Batches of
/// sequences of different lengths go in as a utils::rnn::PackedSequence (see
/// tapegrad/nn/utils/rnn.hpp). The parameters are named and laid out as PyTorch's
/// (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, `weight_hr_l0` with proj_size, and
/// `..._reverse` for the second direction; gates stacked i, f, g, o for the LSTM and r, z, n for the
/// GRU), so a PyTorch state_dict loads as it is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tapegrad/nn/module.hpp"
#include "tapegrad/nn/utils/rnn.hpp"

namespace tg::nn {

namespace detail {
/// The cell a recurrent layer runs at every step (nn/src/recurrent/): RNN's tanh or relu, LSTM, GRU.
enum class RecurrentCell { kTanh, kRelu, kLSTM, kGRU };
}  // namespace detail

/// nn.RNN's optional arguments, by PyTorch's names and defaults.
struct RNNOptions {
  int64_t num_layers = 1;            ///< stacked layers, each fed the previous one's output
  std::string nonlinearity = "tanh";  ///< "tanh" or "relu"
  bool bias = true;                  ///< false: no bias_ih/bias_hh parameters
  bool batch_first = false;          ///< input and output [N, L, H] instead of [L, N, H] (not the states)
  double dropout = 0.0;              ///< dropout on every layer's output but the last, in training mode
  bool bidirectional = false;        ///< a second direction per layer, run from the end
};

/// nn.LSTM's optional arguments, by PyTorch's names and defaults.
struct LSTMOptions {
  int64_t num_layers = 1;      ///< stacked layers, each fed the previous one's output
  bool bias = true;            ///< false: no bias_ih/bias_hh parameters
  bool batch_first = false;    ///< input and output [N, L, H] instead of [L, N, H] (not the states)
  double dropout = 0.0;        ///< dropout on every layer's output but the last, in training mode
  bool bidirectional = false;  ///< a second direction per layer, run from the end
  int64_t proj_size = 0;       ///< > 0: h is projected to proj_size by weight_hr (< hidden_size)
};

/// nn.GRU's optional arguments, by PyTorch's names and defaults.
struct GRUOptions {
  int64_t num_layers = 1;      ///< stacked layers, each fed the previous one's output
  bool bias = true;            ///< false: no bias_ih/bias_hh parameters
  bool batch_first = false;    ///< input and output [N, L, H] instead of [L, N, H] (not the states)
  double dropout = 0.0;        ///< dropout on every layer's output but the last, in training mode
  bool bidirectional = false;  ///< a second direction per layer, run from the end
};

/// What RNN, LSTM and GRU share (PyTorch's RNNBase): the sizes, the options and the parameters in
/// PyTorch's order, every one drawn from U(−1/√hidden_size, 1/√hidden_size) at construction.
class RNNBase : public Module {
 public:
  /// Declares flat_weights under flat_weights_names, PyTorch's order: per layer, per direction,
  /// weight_ih, weight_hh, bias_ih, bias_hh, weight_hr.
  void members(Members& m) override;
  /// The parameter named `name` ("weight_hh_l1_reverse"); tg::Error listing the names if absent.
  Parameter& weight(const std::string& name);

  int64_t input_size;     ///< H_in, the size of the input's last dim
  int64_t hidden_size;    ///< H_cell: the size of the hidden state (of the cell state for the LSTM)
  int64_t num_layers;     ///< stacked layers
  bool bias;              ///< whether the bias parameters exist
  bool batch_first;       ///< input and output [N, L, H]
  double dropout;         ///< between layers, in training mode
  bool bidirectional;     ///< two directions per layer
  int64_t proj_size;      ///< the LSTM's projection size; 0: none
  std::vector<std::string> flat_weights_names;  ///< PyTorch's _flat_weights_names
  std::vector<Parameter> flat_weights;          ///< the parameters, in flat_weights_names' order

 protected:
  /// Makes and initialises the parameters; `name` ("LSTM") heads error messages.
  RNNBase(const char* name, detail::RecurrentCell kind, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
          bool batch_first, double dropout, bool bidirectional, int64_t proj_size);

  /// The result of a run: the output (padded or packed layout as the input), h_n and, for the LSTM, c_n.
  struct RunResult {
    Tensor output;  ///< the last layer's h at every step
    Tensor h_n;     ///< [D·num_layers, N, H_out]
    Tensor c_n;     ///< [D·num_layers, N, H_cell] (LSTM), else undefined
  };
  /// Runs every layer on a padded input (any layout forward accepts) from the given states
  /// (undefined: zeros).
  RunResult run_padded(const Tensor& input, const Tensor& h0, const Tensor& c0);
  /// Runs every layer on a packed input; the states and h_n/c_n are in the caller's batch order.
  RunResult run_packed(const utils::rnn::PackedSequence& input, const Tensor& h0, const Tensor& c0);

  const char* name_;  ///< "RNN", "LSTM", "GRU"
  detail::RecurrentCell kind_;     ///< the cell

 private:
  RunResult run_rows(const Tensor& rows, const std::vector<int64_t>& batch_sizes, const Tensor& h0, const Tensor& c0,
                     int64_t batch);
};

/// What RNN and GRU share: a single state h (the LSTM carries (h, c)).
class SingleStateRNNBase : public RNNBase {
 public:
  /// input [L, N, H_in] ([N, L, H_in] with batch_first) or unbatched [L, H_in]; h0
  /// [D·num_layers, N, H] ([D·num_layers, H] unbatched), undefined ({}) for zeros. Returns the
  /// output [L, N, D·H] and h_n [D·num_layers, N, H].
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0);
  /// A packed batch; h0 and h_n in the caller's order, the output packed as the input.
  std::tuple<utils::rnn::PackedSequence, Tensor> forward(const utils::rnn::PackedSequence& input,
                                                         const Tensor& h0 = {});
  Tensor forward(const Tensor& x) override;  ///< the output alone, from zero states (Sequential)

 protected:
  using RNNBase::RNNBase;
};

/// nn.RNN: h_t = tanh(x_t·W_ihᵀ + b_ih + h_{t−1}·W_hhᵀ + b_hh) (or relu), layer after layer.
class RNN : public SingleStateRNNBase {
 public:
  /// nn.RNN(input_size, hidden_size, ...); tg::Error for a non-positive size or layer count, a
  /// nonlinearity other than "tanh"/"relu" or a dropout outside [0, 1].
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
};

/// nn.LSTM: gates i, f, g, o from x_t and h_{t−1}; c_t = f ⊙ c_{t−1} + i ⊙ g, h_t = o ⊙ tanh(c_t)
/// (projected by W_hr when proj_size > 0).
class LSTM : public RNNBase {
 public:
  /// nn.LSTM(input_size, hidden_size, ...); tg::Error for a non-positive size or layer count, a
  /// proj_size not in [0, hidden_size) or a dropout outside [0, 1].
  LSTM(int64_t input_size, int64_t hidden_size, LSTMOptions options = {});
  /// input [L, N, H_in] ([N, L, H_in] with batch_first) or unbatched [L, H_in]; state (h0, c0):
  /// [D·num_layers, N, H_out], [D·num_layers, N, H_cell] (H_out = proj_size or hidden_size), or
  /// std::nullopt for zeros. Returns the output [L, N, D·H_out] and (h_n, c_n).
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input,
                                                         const std::optional<std::tuple<Tensor, Tensor>>& state);
  /// A packed batch; the states in the caller's order, the output packed as the input.
  std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> forward(
      const utils::rnn::PackedSequence& input, const std::optional<std::tuple<Tensor, Tensor>>& state = std::nullopt);
  Tensor forward(const Tensor& x) override;  ///< the output alone, from zero states (Sequential)
};

/// nn.GRU: r, z from x_t and h_{t−1}; n = tanh(W_in·x_t + b_in + r ⊙ (W_hn·h_{t−1} + b_hn));
/// h_t = (1 − z) ⊙ n + z ⊙ h_{t−1}.
class GRU : public SingleStateRNNBase {
 public:
  /// nn.GRU(input_size, hidden_size, ...); tg::Error for a non-positive size or layer count or a
  /// dropout outside [0, 1].
  GRU(int64_t input_size, int64_t hidden_size, GRUOptions options = {});
};

/// nn.RNNCell's optional arguments.
struct RNNCellOptions {
  bool bias = true;                   ///< false: no bias_ih/bias_hh
  std::string nonlinearity = "tanh";  ///< "tanh" or "relu"
};
/// nn.LSTMCell's optional arguments.
struct LSTMCellOptions {
  bool bias = true;  ///< false: no bias_ih/bias_hh
};
/// nn.GRUCell's optional arguments.
struct GRUCellOptions {
  bool bias = true;  ///< false: no bias_ih/bias_hh
};

/// What the cells share (PyTorch's RNNCellBase): one step of the layer's cell, the same fused kernels.
class RNNCellBase : public Module {
 public:
  void members(Members& m) override;  ///< weight_ih, weight_hh, bias_ih, bias_hh

  Parameter weight_ih;  ///< [G·hidden, input] (G = 1, 4 or 3 gates)
  Parameter weight_hh;  ///< [G·hidden, hidden]
  Parameter bias_ih;    ///< [G·hidden], or absent
  Parameter bias_hh;    ///< [G·hidden], or absent
  int64_t input_size;   ///< the input's last dim
  int64_t hidden_size;  ///< the state's last dim

 protected:
  /// Makes the parameters, drawn from U(−1/√hidden, 1/√hidden) in PyTorch's order.
  RNNCellBase(const char* name, detail::RecurrentCell kind, int64_t input_size, int64_t hidden_size, bool bias);
  /// One step: input [N, input] or [input]; hx/cx [N, hidden] or [hidden], undefined for zeros.
  /// Returns h' and (LSTM) c'.
  std::tuple<Tensor, Tensor> step(const Tensor& input, const Tensor& hx, const Tensor& cx);

  const char* name_;  ///< "LSTMCell"...
  detail::RecurrentCell kind_;     ///< the cell
};

/// nn.RNNCell: h' = tanh(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh) (or relu).
class RNNCell : public RNNCellBase {
 public:
  /// nn.RNNCell(input_size, hidden_size, bias, nonlinearity).
  RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options = {});
  /// input [N, input] or [input]; hx [N, hidden] or [hidden], undefined ({}) for zeros → h'.
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor forward(const Tensor& x) override;  ///< from a zero state
};

/// nn.LSTMCell: one LSTM step.
class LSTMCell : public RNNCellBase {
 public:
  /// nn.LSTMCell(input_size, hidden_size, bias).
  LSTMCell(int64_t input_size, int64_t hidden_size, LSTMCellOptions options = {});
  /// input [N, input] or [input]; state (h, c) [N, hidden] each, or std::nullopt for zeros → (h', c').
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const std::optional<std::tuple<Tensor, Tensor>>& state);
  Tensor forward(const Tensor& x) override;  ///< h' from a zero state
};

/// nn.GRUCell: one GRU step.
class GRUCell : public RNNCellBase {
 public:
  /// nn.GRUCell(input_size, hidden_size, bias).
  GRUCell(int64_t input_size, int64_t hidden_size, GRUCellOptions options = {});
  /// input [N, input] or [input]; hx [N, hidden] or [hidden], undefined ({}) for zeros → h'.
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor forward(const Tensor& x) override;  ///< from a zero state
};

}  // namespace tg::nn
