// RNN, LSTM, GRU and their cells: checks at the edge, PyTorch's parameters and initialisation, and
// the stacking of layers and directions over recurrent_layer (one tape node per layer and direction).
//
// Letters: L steps, N sequences, D directions (1 or 2), H hidden, H_out = proj_size or H.
#include "tapegrad/nn/rnn.hpp"

#include <cmath>
#include <numeric>

#include "recurrent/recurrent_layer.hpp"
#include "tapegrad/error.hpp"
#include "tapegrad/nn/functional.hpp"
#include "tapegrad/nn/init.hpp"

namespace tg::nn {

namespace {

// PyTorch's RNNBase/RNNCellBase.reset_parameters: every parameter, in registration order, from
// U(−1/√hidden, 1/√hidden).
Tensor drawn(const Shape& shape, int64_t hidden_size) {
  Tensor values = empty(shape);
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  return init::uniform_(values, -bound, bound);
}

detail::RecurrentCell cell_of(const char* name, const std::string& nonlinearity) {
  check(nonlinearity == "tanh" || nonlinearity == "relu", name, "unknown nonlinearity \"", nonlinearity,
        "\": expected \"tanh\" or \"relu\"");
  return nonlinearity == "tanh" ? detail::RecurrentCell::kTanh : detail::RecurrentCell::kRelu;
}

// The state `state` (h0 or c0) for a run: [layers·D, N, size] as given, zeros when undefined.
Tensor state_or_zeros(const char* name, const char* what, const Tensor& state, const Shape& expected, DType dtype,
                      const Tensor& input) {
  if (!state.defined()) return zeros(expected, dtype);
  check(state.shape() == expected, name, "expected ", what, " of shape ", expected, " for an input of shape ",
        input.shape(), ", got ", state.shape());
  check(state.dtype() == dtype, name, "dtypes differ: input ", dtype, ", ", what, " ", state.dtype(),
        " (convert it with .to(", dtype, "))");
  return state;
}

}  // namespace

// ---- RNNBase -------------------------------------------------------------------------------------

RNNBase::RNNBase(const char* name, detail::RecurrentCell kind, int64_t input_size, int64_t hidden_size,
                 int64_t num_layers, bool bias, bool batch_first, double dropout, bool bidirectional,
                 int64_t proj_size)
    : input_size(input_size),
      hidden_size(hidden_size),
      num_layers(num_layers),
      bias(bias),
      batch_first(batch_first),
      dropout(dropout),
      bidirectional(bidirectional),
      proj_size(proj_size),
      name_(name),
      kind_(kind) {
  check(input_size > 0 && hidden_size > 0, name, "expected positive sizes, got input_size = ", input_size,
        ", hidden_size = ", hidden_size);
  check(num_layers > 0, name, "expected num_layers >= 1, got ", num_layers);
  check(dropout >= 0.0 && dropout <= 1.0, name, "dropout should be a number in range [0, 1], got ", dropout);
  check(proj_size >= 0 && proj_size < hidden_size, name,
        "proj_size has to be a non-negative integer smaller than hidden_size (", hidden_size, "), got ", proj_size);
  const int64_t gates = detail::gate_count(kind) * hidden_size;
  const int64_t out = proj_size > 0 ? proj_size : hidden_size;
  const int64_t directions = bidirectional ? 2 : 1;
  flat_weights.reserve(static_cast<size_t>(num_layers * directions * 5));
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const int64_t layer_input = layer == 0 ? input_size : out * directions;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const std::string suffix = "_l" + std::to_string(layer) + (direction == 1 ? "_reverse" : "");
      auto add = [&](const std::string& what, const Shape& shape) {
        flat_weights_names.push_back(what + suffix);
        flat_weights.emplace_back(std::string(name) + "." + what + suffix, drawn(shape, hidden_size));
      };
      add("weight_ih", {gates, layer_input});
      add("weight_hh", {gates, out});
      if (bias) {
        add("bias_ih", {gates});
        add("bias_hh", {gates});
      }
      if (proj_size > 0) add("weight_hr", {proj_size, hidden_size});
    }
  }
}

void RNNBase::members(Members& m) {
  for (size_t k = 0; k < flat_weights.size(); ++k) m.parameter(flat_weights_names[k], flat_weights[k]);
}

Parameter& RNNBase::weight(const std::string& name) {
  for (size_t k = 0; k < flat_weights.size(); ++k)
    if (flat_weights_names[k] == name) return flat_weights[k];
  std::string names;
  for (const std::string& known : flat_weights_names) names += (names.empty() ? "" : ", ") + known;
  throw Error(std::string(name_) + ": no parameter named \"" + name + "\"; it has " + names);
}

RNNBase::RunResult RNNBase::run_rows(const Tensor& rows, const std::vector<int64_t>& batch_sizes, const Tensor& h0,
                                     const Tensor& c0, int64_t batch) {
  const bool lstm = kind_ == detail::RecurrentCell::kLSTM;
  const int64_t directions = bidirectional ? 2 : 1;
  const int64_t out = proj_size > 0 ? proj_size : hidden_size;
  const size_t per_direction = flat_weights.size() / static_cast<size_t>(num_layers * directions);
  const DType dtype = rows.dtype();
  const Tensor h_start = state_or_zeros(name_, "h0", h0, {num_layers * directions, batch, out}, dtype, rows);
  const Tensor c_start =
      lstm ? state_or_zeros(name_, "c0", c0, {num_layers * directions, batch, hidden_size}, dtype, rows) : Tensor();
  std::vector<Tensor> h_n, c_n;
  Tensor layer_input = rows;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    // PyTorch's dropout between layers: on every layer's output but the last, training only.
    if (layer > 0 && dropout > 0.0 && is_training()) layer_input = functional::dropout(layer_input, dropout, true);
    std::vector<Tensor> outputs;
    for (int64_t direction = 0; direction < directions; ++direction) {
      const size_t first = static_cast<size_t>(layer * directions + direction) * per_direction;
      detail::LayerWeights w{flat_weights[first], flat_weights[first + 1], {}, {}, {}};
      if (bias) {
        w.b_ih = flat_weights[first + 2];
        w.b_hh = flat_weights[first + 3];
      }
      if (proj_size > 0) w.w_hr = flat_weights[first + per_direction - 1];
      const int64_t slot = layer * directions + direction;
      std::vector<Tensor> result =
          detail::recurrent_layer(kind_, layer_input, batch_sizes, direction == 1, h_start.select(0, slot),
                                  lstm ? c_start.select(0, slot) : Tensor(), w);
      outputs.push_back(result[0]);
      h_n.push_back(result[1]);
      if (lstm) c_n.push_back(result[2]);
    }
    layer_input = directions == 1 ? outputs[0] : tg::cat(outputs, 1);  // [total, D·H_out]
  }
  return {layer_input, tg::stack(h_n, 0), lstm ? tg::stack(c_n, 0) : Tensor()};
}

RNNBase::RunResult RNNBase::run_padded(const Tensor& input, const Tensor& h0, const Tensor& c0) {
  check(input.defined(), name_, "undefined input");
  check(input.dim() == 2 || input.dim() == 3, name_, "expected an input of shape [L, N, ", input_size, "]",
        batch_first ? " (batch_first: [N, L, " + std::to_string(input_size) + "])" : std::string(),
        " or unbatched [L, ", input_size, "], got ", input.shape());
  check(input.size(-1) == input_size, name_, "input.size(-1) must be equal to input_size (", input_size,
        "), got an input of shape ", input.shape());
  const DType dtype = flat_weights[0].dtype();
  check(input.dtype() == dtype, name_, "dtypes differ: input ", input.dtype(), ", parameters ", dtype,
        " (convert the input with .to(", dtype, ") or the module with .to(", input.dtype(), "))");
  const bool unbatched = input.dim() == 2;
  // Unbatched input and states are a batch of one.
  auto batched_state = [&](const Tensor& state, const char* what) {
    if (!unbatched || !state.defined()) return state;
    check(state.dim() == 2, name_, "for an unbatched input of shape ", input.shape(), ", expected ", what,
          " of 2 dims, got ", state.shape());
    return state.unsqueeze(1);
  };
  if (!unbatched) {
    for (const Tensor* state : {&h0, &c0})
      if (state->defined())
        check(state->dim() == 3, name_, "for a batched input of shape ", input.shape(), ", expected states of 3 dims, got ",
              state->shape());
  }
  Tensor x = unbatched ? input.unsqueeze(1) : (batch_first ? input.transpose(0, 1) : input);  // [L, N, H_in]
  const int64_t steps = x.size(0), batch = x.size(1);
  check(steps > 0 && batch > 0, name_, "expected at least one step and one sequence, got an input of shape ",
        input.shape());
  RunResult result = run_rows(x.reshape({steps * batch, input_size}), std::vector<int64_t>(steps, batch),
                              batched_state(h0, "h0"), batched_state(c0, "c0"), batch);
  Tensor output = result.output.reshape({steps, batch, -1});
  if (unbatched) {
    result.output = output.squeeze(1);
    result.h_n = result.h_n.squeeze(1);
    if (result.c_n.defined()) result.c_n = result.c_n.squeeze(1);
  } else {
    result.output = batch_first ? output.transpose(0, 1) : output;
  }
  return result;
}

RNNBase::RunResult RNNBase::run_packed(const utils::rnn::PackedSequence& input, const Tensor& h0, const Tensor& c0) {
  check(input.data.defined() && input.batch_sizes.defined(), name_, "undefined data or batch_sizes in a PackedSequence");
  check(input.batch_sizes.dtype() == kInt64 && input.batch_sizes.dim() == 1 && input.batch_sizes.numel() > 0, name_,
        "expected batch_sizes to be a non-empty int64 vector, got ", input.batch_sizes.dtype(), " ",
        input.batch_sizes.shape());
  check(input.data.dim() == 2 && input.data.size(1) == input_size, name_,
        "expected packed data of shape [total steps, ", input_size, "], got ", input.data.shape(),
        " (pack a [L, N, ", input_size, "] input with pack_padded_sequence)");
  const DType dtype = flat_weights[0].dtype();
  check(input.data.dtype() == dtype, name_, "dtypes differ: input ", input.data.dtype(), ", parameters ", dtype,
        " (convert the input with .to(", dtype, ") or the module with .to(", input.data.dtype(), "))");
  const std::vector<int64_t> batch_sizes = input.batch_sizes.to_vector<int64_t>();
  for (size_t t = 0; t < batch_sizes.size(); ++t)
    check(batch_sizes[t] > 0 && (t == 0 || batch_sizes[t] <= batch_sizes[t - 1]), name_,
          "batch_sizes must be positive and non-increasing, got ", input.batch_sizes.shape(), " with ", batch_sizes[t],
          " at step ", t);
  const int64_t total = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t{0});
  check(total == input.data.size(0), name_, "batch_sizes add up to ", total, " but the packed data has shape ",
        input.data.shape());
  const int64_t batch = batch_sizes[0];
  const bool sorted = input.sorted_indices.defined();
  // The states come in the caller's order; the layers run in the sorted order.
  auto to_sorted = [&](const Tensor& state) {
    if (!sorted || !state.defined()) return state;
    check(state.dim() == 3 && state.size(1) == batch, name_, "expected a state of shape [", num_layers * (bidirectional ? 2 : 1),
          ", ", batch, ", *] for a packed batch of ", batch, " sequences, got ", state.shape());
    return state.index_select(1, input.sorted_indices);
  };
  RunResult result = run_rows(input.data, batch_sizes, to_sorted(h0), to_sorted(c0), batch);
  if (input.unsorted_indices.defined()) {
    result.h_n = result.h_n.index_select(1, input.unsorted_indices);
    if (result.c_n.defined()) result.c_n = result.c_n.index_select(1, input.unsorted_indices);
  }
  return result;
}

// ---- the modules -----------------------------------------------------------------------------------

RNN::RNN(int64_t input_size, int64_t hidden_size, RNNOptions options)
    : SingleStateRNNBase("RNN", cell_of("RNN", options.nonlinearity), input_size, hidden_size, options.num_layers,
                         options.bias, options.batch_first, options.dropout, options.bidirectional, 0) {}

LSTM::LSTM(int64_t input_size, int64_t hidden_size, LSTMOptions options)
    : RNNBase("LSTM", detail::RecurrentCell::kLSTM, input_size, hidden_size, options.num_layers, options.bias,
              options.batch_first, options.dropout, options.bidirectional, options.proj_size) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(const Tensor& input,
                                                             const std::optional<std::tuple<Tensor, Tensor>>& state) {
  RunResult result = state ? run_padded(input, std::get<0>(*state), std::get<1>(*state))
                           : run_padded(input, Tensor(), Tensor());
  return {result.output, {result.h_n, result.c_n}};
}

std::tuple<utils::rnn::PackedSequence, std::tuple<Tensor, Tensor>> LSTM::forward(
    const utils::rnn::PackedSequence& input, const std::optional<std::tuple<Tensor, Tensor>>& state) {
  RunResult result = state ? run_packed(input, std::get<0>(*state), std::get<1>(*state))
                           : run_packed(input, Tensor(), Tensor());
  return {{result.output, input.batch_sizes, input.sorted_indices, input.unsorted_indices},
          {result.h_n, result.c_n}};
}

Tensor LSTM::forward(const Tensor& x) { return run_padded(x, Tensor(), Tensor()).output; }

GRU::GRU(int64_t input_size, int64_t hidden_size, GRUOptions options)
    : SingleStateRNNBase("GRU", detail::RecurrentCell::kGRU, input_size, hidden_size, options.num_layers,
                         options.bias, options.batch_first, options.dropout, options.bidirectional, 0) {}

// ---- RNN and GRU: one state --------------------------------------------------------------------

std::tuple<Tensor, Tensor> SingleStateRNNBase::forward(const Tensor& input, const Tensor& h0) {
  RunResult result = run_padded(input, h0, Tensor());
  return {result.output, result.h_n};
}

std::tuple<utils::rnn::PackedSequence, Tensor> SingleStateRNNBase::forward(const utils::rnn::PackedSequence& input,
                                                                           const Tensor& h0) {
  RunResult result = run_packed(input, h0, Tensor());
  return {{result.output, input.batch_sizes, input.sorted_indices, input.unsorted_indices}, result.h_n};
}

Tensor SingleStateRNNBase::forward(const Tensor& x) { return run_padded(x, Tensor(), Tensor()).output; }

// ---- the cells -------------------------------------------------------------------------------------

namespace {

// The cells' G·H rows, after the checks that come before any draw.
int64_t cell_gates(const char* name, detail::RecurrentCell kind, int64_t input_size, int64_t hidden_size) {
  check(input_size > 0 && hidden_size > 0, name, "expected positive sizes, got input_size = ", input_size,
        ", hidden_size = ", hidden_size);
  return detail::gate_count(kind) * hidden_size;
}

}  // namespace

// Member order draws weight_ih, weight_hh, bias_ih, bias_hh, PyTorch's order.
RNNCellBase::RNNCellBase(const char* name, detail::RecurrentCell kind, int64_t input_size, int64_t hidden_size,
                         bool bias)
    : weight_ih(std::string(name) + ".weight_ih",
                drawn({cell_gates(name, kind, input_size, hidden_size), input_size}, hidden_size)),
      weight_hh(std::string(name) + ".weight_hh", drawn({detail::gate_count(kind) * hidden_size, hidden_size}, hidden_size)),
      bias_ih(std::string(name) + ".bias_ih", bias ? drawn({detail::gate_count(kind) * hidden_size}, hidden_size) : Tensor()),
      bias_hh(std::string(name) + ".bias_hh", bias ? drawn({detail::gate_count(kind) * hidden_size}, hidden_size) : Tensor()),
      input_size(input_size),
      hidden_size(hidden_size),
      name_(name),
      kind_(kind) {}

void RNNCellBase::members(Members& m) {
  m.parameter("weight_ih", weight_ih);
  m.parameter("weight_hh", weight_hh);
  m.parameter("bias_ih", bias_ih);
  m.parameter("bias_hh", bias_hh);
}

std::tuple<Tensor, Tensor> RNNCellBase::step(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  check(input.defined(), name_, "undefined input");
  check((input.dim() == 1 || input.dim() == 2) && input.size(-1) == input_size, name_, "expected an input of shape [N, ",
        input_size, "] or [", input_size, "], got ", input.shape());
  const DType dtype = weight_ih.dtype();
  check(input.dtype() == dtype, name_, "dtypes differ: input ", input.dtype(), ", parameters ", dtype,
        " (convert the input with .to(", dtype, ") or the module with .to(", input.dtype(), "))");
  const bool unbatched = input.dim() == 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  const int64_t batch = x.size(0);
  check(batch > 0, name_, "expected at least one row, got an input of shape ", input.shape());
  const Shape expected = unbatched ? Shape{hidden_size} : Shape{batch, hidden_size};
  auto state = [&](const Tensor& given, const char* what) {
    const Tensor s = state_or_zeros(name_, what, given, expected, dtype, input);
    return unbatched ? s.unsqueeze(0) : s;
  };
  const bool lstm = kind_ == detail::RecurrentCell::kLSTM;
  const std::vector<Tensor> result =
      detail::recurrent_layer(kind_, x, {batch}, false, state(hx, "hx"), lstm ? state(cx, "cx") : Tensor(),
                              {weight_ih, weight_hh, bias_ih, bias_hh, Tensor()});
  if (unbatched) return {result[1].squeeze(0), lstm ? result[2].squeeze(0) : Tensor()};
  return {result[1], result[2]};
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, RNNCellOptions options)
    : RNNCellBase("RNNCell", cell_of("RNNCell", options.nonlinearity), input_size, hidden_size, options.bias) {}
Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) { return std::get<0>(step(input, hx, Tensor())); }
Tensor RNNCell::forward(const Tensor& x) { return forward(x, Tensor()); }

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, LSTMCellOptions options)
    : RNNCellBase("LSTMCell", detail::RecurrentCell::kLSTM, input_size, hidden_size, options.bias) {}
std::tuple<Tensor, Tensor> LSTMCell::forward(const Tensor& input,
                                             const std::optional<std::tuple<Tensor, Tensor>>& state) {
  return state ? step(input, std::get<0>(*state), std::get<1>(*state)) : step(input, Tensor(), Tensor());
}
Tensor LSTMCell::forward(const Tensor& x) { return std::get<0>(forward(x, std::nullopt)); }

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, GRUCellOptions options)
    : RNNCellBase("GRUCell", detail::RecurrentCell::kGRU, input_size, hidden_size, options.bias) {}
Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) { return std::get<0>(step(input, hx, Tensor())); }
Tensor GRUCell::forward(const Tensor& x) { return forward(x, Tensor()); }

}  // namespace tg::nn
