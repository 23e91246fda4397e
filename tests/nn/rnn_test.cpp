// RNN, LSTM, GRU, their cells and packed sequences: outputs and every gradient against PyTorch's
// fixtures (make_rnn_fixtures.py), PyTorch's initialisation, gradcheck and gradgradcheck in
// float64, a packed batch against its sequences run one by one, dropout between layers against
// the layers run one by one, truncated backpropagation through time, thread-count determinism,
// the packing functions by hand, and the errors.
#include <string>
#include <vector>

#include "nn_test_util.hpp"
#include "support/vector_isa_levels.hpp"

using tg::Shape;
using tg::Tensor;
using namespace tg::nn_test;
namespace rnn_utils = tg::nn::utils::rnn;

namespace {

// The fixtures' configuration vector: kind (0 tanh, 1 relu, 2 LSTM, 3 GRU), input_size,
// hidden_size, num_layers, bias, batch_first, bidirectional, proj_size, h0 given.
struct Config {
  int64_t kind, input, hidden, layers;
  bool bias, batch_first, bidirectional;
  int64_t proj;
  bool has_h0;
  explicit Config(const std::vector<int64_t>& v)
      : kind(v[0]), input(v[1]), hidden(v[2]), layers(v[3]), bias(v[4] != 0), batch_first(v[5] != 0),
        bidirectional(v[6] != 0), proj(v[7]), has_h0(v[8] != 0) {}
};

std::unique_ptr<tg::nn::RNNBase> make_module(const Config& c) {
  if (c.kind == 2)
    return std::make_unique<tg::nn::LSTM>(c.input, c.hidden,
                                          tg::nn::LSTMOptions{.num_layers = c.layers, .bias = c.bias,
                                                              .batch_first = c.batch_first,
                                                              .bidirectional = c.bidirectional, .proj_size = c.proj});
  if (c.kind == 3)
    return std::make_unique<tg::nn::GRU>(c.input, c.hidden,
                                         tg::nn::GRUOptions{.num_layers = c.layers, .bias = c.bias,
                                                            .batch_first = c.batch_first,
                                                            .bidirectional = c.bidirectional});
  return std::make_unique<tg::nn::RNN>(c.input, c.hidden,
                                       tg::nn::RNNOptions{.num_layers = c.layers, .nonlinearity = c.kind == 0 ? "tanh" : "relu",
                                                          .bias = c.bias, .batch_first = c.batch_first,
                                                          .bidirectional = c.bidirectional});
}

// float32: torch's own float32 results differ from float64 by a few 1e-6 after a few layers and
// steps of O(1) values; ours by as much again.
double rnn_atol(const std::string& suffix) { return suffix == "_f32" ? 2e-5 : 1e-10; }

// Runs a module (padded or packed) and returns y, h_n, c_n.
struct Outputs {
  Tensor y, h_n, c_n;
};
Outputs run_module(tg::nn::RNNBase& module, int64_t kind, const Tensor& x, const Tensor& h0, const Tensor& c0,
                   const Tensor& lengths, bool batch_first) {
  Outputs out;
  if (kind == 2) {
    auto& lstm = static_cast<tg::nn::LSTM&>(module);
    const std::optional<std::tuple<Tensor, Tensor>> state =
        h0.defined() ? std::optional(std::tuple{h0, c0}) : std::nullopt;
    if (lengths.defined()) {
      auto [packed, hc] = lstm.forward(rnn_utils::pack_padded_sequence(x, lengths, batch_first, false), state);
      out.y = std::get<0>(rnn_utils::pad_packed_sequence(packed, batch_first));
      std::tie(out.h_n, out.c_n) = hc;
    } else {
      auto [y, hc] = lstm.forward(x, state);
      out.y = y;
      std::tie(out.h_n, out.c_n) = hc;
    }
    return out;
  }
  auto forward = [&](auto& m) {
    if (lengths.defined()) {
      auto [packed, h] = m.forward(rnn_utils::pack_padded_sequence(x, lengths, batch_first, false), h0);
      out.y = std::get<0>(rnn_utils::pad_packed_sequence(packed, batch_first));
      out.h_n = h;
    } else {
      std::tie(out.y, out.h_n) = m.forward(x, h0);
    }
  };
  if (kind == 3)
    forward(static_cast<tg::nn::GRU&>(module));
  else
    forward(static_cast<tg::nn::RNN&>(module));
  return out;
}

void check_module_case(const std::string& name) {
  const std::string suffix = GENERATE("_f32", "_f64");
  CAPTURE(name, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("rnn.txt", name + suffix);
  const Config config(c.ints("config"));
  const double atol = rnn_atol(suffix);
  auto module = make_module(config);
  module->to(fixture_dtype(suffix));
  for (const std::string& param : module->flat_weights_names) module->weight(param) = c.at(param);
  Tensor x = leaf(c.at("x"));
  Tensor h0 = c.has("h0") ? leaf(c.at("h0")) : Tensor();
  Tensor c0 = c.has("c0") ? leaf(c.at("c0")) : Tensor();
  const Tensor lengths = c.has("lengths") ? tg::tensor<int64_t>(c.ints("lengths")) : Tensor();
  const Outputs out = run_module(*module, config.kind, x, h0, c0, lengths, config.batch_first);
  TG_REQUIRE_CLOSE(out.y, c.at("y"), atol);
  TG_REQUIRE_CLOSE(out.h_n, c.at("h_n"), atol);
  Tensor loss = (out.y * c.at("dy")).sum() + (out.h_n * c.at("dh_n")).sum();
  if (config.kind == 2) {
    TG_REQUIRE_CLOSE(out.c_n, c.at("c_n"), atol);
    loss = loss + (out.c_n * c.at("dc_n")).sum();
  }
  loss.backward();
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  if (h0.defined()) TG_REQUIRE_CLOSE(h0.grad(), c.at("dh0"), atol);
  if (c0.defined()) TG_REQUIRE_CLOSE(c0.grad(), c.at("dc0"), atol);
  for (const std::string& param : module->flat_weights_names) {
    CAPTURE(param);
    TG_REQUIRE_CLOSE(module->weight(param).grad(), c.at("d" + param), atol);
  }
}

}  // namespace

TEST_CASE("LSTM matches PyTorch's outputs and gradients", "[rnn][fixture]") {
  check_module_case(GENERATE(as<std::string>(), "lstm_basic", "lstm_2layers_bidirectional_h0",
                             "lstm_3layers_batch_first_h0", "lstm_proj_bidirectional_h0", "lstm_no_bias",
                             "lstm_unbatched_h0", "lstm_packed_h0", "lstm_packed_proj"));
}

TEST_CASE("GRU matches PyTorch's outputs and gradients", "[rnn][fixture]") {
  check_module_case(GENERATE(as<std::string>(), "gru_basic", "gru_2layers_bidirectional_h0", "gru_3layers_batch_first",
                             "gru_no_bias_h0", "gru_packed_h0"));
}

TEST_CASE("RNN (tanh, relu) matches PyTorch's outputs and gradients", "[rnn][fixture]") {
  check_module_case(GENERATE(as<std::string>(), "rnn_tanh_basic", "rnn_relu_2layers_bidirectional_h0",
                             "rnn_tanh_3layers_batch_first_h0", "rnn_tanh_packed"));
}

TEST_CASE("RNNCell, LSTMCell and GRUCell match PyTorch's outputs and gradients", "[rnn][fixture]") {
  const std::string name = GENERATE(as<std::string>(), "lstm_cell", "lstm_cell_zero_state", "lstm_cell_unbatched",
                                    "gru_cell", "gru_cell_no_bias", "rnn_cell_tanh", "rnn_cell_relu");
  const std::string suffix = GENERATE("_f32", "_f64");
  CAPTURE(name, suffix);
  const tg::testing::FixtureCase& c = tg::testing::fixture("rnn.txt", name + suffix);
  const Config config(c.ints("config"));
  const double atol = rnn_atol(suffix);
  std::unique_ptr<tg::nn::RNNCellBase> cell;
  if (config.kind == 2)
    cell = std::make_unique<tg::nn::LSTMCell>(config.input, config.hidden, tg::nn::LSTMCellOptions{.bias = config.bias});
  else if (config.kind == 3)
    cell = std::make_unique<tg::nn::GRUCell>(config.input, config.hidden, tg::nn::GRUCellOptions{.bias = config.bias});
  else
    cell = std::make_unique<tg::nn::RNNCell>(
        config.input, config.hidden,
        tg::nn::RNNCellOptions{.bias = config.bias, .nonlinearity = config.kind == 0 ? "tanh" : "relu"});
  cell->to(fixture_dtype(suffix));
  cell->weight_ih = c.at("weight_ih");
  cell->weight_hh = c.at("weight_hh");
  if (config.bias) {
    cell->bias_ih = c.at("bias_ih");
    cell->bias_hh = c.at("bias_hh");
  }
  Tensor x = leaf(c.at("x"));
  Tensor h0 = c.has("h0") ? leaf(c.at("h0")) : Tensor();
  Tensor c0 = c.has("c0") ? leaf(c.at("c0")) : Tensor();
  Tensor h, cs;
  if (config.kind == 2) {
    const auto state = h0.defined() ? std::optional(std::tuple{h0, c0}) : std::nullopt;
    std::tie(h, cs) = static_cast<tg::nn::LSTMCell&>(*cell).forward(x, state);
  } else if (config.kind == 3) {
    h = static_cast<tg::nn::GRUCell&>(*cell).forward(x, h0);
  } else {
    h = static_cast<tg::nn::RNNCell&>(*cell).forward(x, h0);
  }
  TG_REQUIRE_CLOSE(h, c.at("h_n"), atol);
  Tensor loss = (h * c.at("dh_n")).sum();
  if (cs.defined()) {
    TG_REQUIRE_CLOSE(cs, c.at("c_n"), atol);
    loss = loss + (cs * c.at("dc_n")).sum();
  }
  loss.backward();
  TG_REQUIRE_CLOSE(x.grad(), c.at("dx"), atol);
  if (h0.defined()) TG_REQUIRE_CLOSE(h0.grad(), c.at("dh0"), atol);
  if (c0.defined()) TG_REQUIRE_CLOSE(c0.grad(), c.at("dc0"), atol);
  TG_REQUIRE_CLOSE(cell->weight_ih.grad(), c.at("dweight_ih"), atol);
  TG_REQUIRE_CLOSE(cell->weight_hh.grad(), c.at("dweight_hh"), atol);
  if (config.bias) {
    TG_REQUIRE_CLOSE(cell->bias_ih.grad(), c.at("dbias_ih"), atol);
    TG_REQUIRE_CLOSE(cell->bias_hh.grad(), c.at("dbias_hh"), atol);
  }
}

TEST_CASE("Recurrent modules draw PyTorch's default parameters, by its names, for the same seed", "[rnn][init]") {
  auto check_module = [](const std::string& name, tg::nn::Module& module) {
    CAPTURE(name);
    const tg::testing::FixtureCase& c = tg::testing::fixture("rnn.txt", name);
    const auto params = module.named_parameters();
    REQUIRE(params.size() == c.tensors.size());
    for (const auto& [param, value] : params) {
      CAPTURE(param);
      REQUIRE(c.has(param));
      REQUIRE(bytes(value) == bytes(c.at(param)));
    }
  };
  tg::manual_seed(7);
  tg::nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  check_module("init_lstm", lstm);
  REQUIRE(lstm.named_parameters()[4].first == "weight_hr_l0");
  REQUIRE(lstm.named_parameters()[5].first == "weight_ih_l0_reverse");
  tg::manual_seed(7);
  tg::nn::GRU gru(3, 5, {.bias = false});
  check_module("init_gru", gru);
  tg::manual_seed(7);
  tg::nn::RNN rnn(2, 3, {.num_layers = 2, .nonlinearity = "relu"});
  check_module("init_rnn", rnn);
  tg::manual_seed(7);
  tg::nn::LSTMCell lstm_cell(3, 4);
  check_module("init_lstm_cell", lstm_cell);
  tg::manual_seed(7);
  tg::nn::GRUCell gru_cell(2, 3);
  check_module("init_gru_cell", gru_cell);
  tg::manual_seed(7);
  tg::nn::RNNCell rnn_cell(2, 3, {.bias = false});
  check_module("init_rnn_cell", rnn_cell);
}

TEST_CASE("Recurrent layers pass gradcheck and gradgradcheck in float64", "[rnn][gradcheck]") {
  tg::manual_seed(3);
  // Every input, state and parameter is an input of fn; the module reads its parameters, which
  // are the very tensors gradcheck perturbs.
  auto check = [](tg::nn::RNNBase& module, int64_t kind, const Tensor& x, const Tensor& h0, const Tensor& c0,
                  const Tensor& lengths) {
    std::vector<Tensor> inputs{x, h0};
    if (c0.defined()) inputs.push_back(c0);
    for (const Tensor& p : module.flat_weights) inputs.push_back(p);
    const auto fn = [&](const std::vector<Tensor>& t) {
      const Outputs out = run_module(module, kind, t[0], t[1], c0.defined() ? t[2] : Tensor(), lengths, false);
      std::vector<Tensor> parts{out.y.flatten(), out.h_n.flatten()};
      if (out.c_n.defined()) parts.push_back(out.c_n.flatten());
      return tg::cat(parts, 0);
    };
    TG_REQUIRE_GRADCHECK(fn, inputs);
    const tg::GradcheckResult second = tg::gradgradcheck(fn, inputs);
    INFO(second.message);
    REQUIRE(second.passed);
  };
  const Tensor lengths = tg::tensor<int64_t>({2, 3, 1});
  SECTION("LSTM: two layers, bidirectional, proj_size, packed") {
    tg::nn::LSTM lstm(2, 3, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
    lstm.to(tg::kFloat64);
    check(lstm, 2, randn_leaf({3, 3, 2}, tg::kFloat64), randn_leaf({4, 3, 2}, tg::kFloat64),
          randn_leaf({4, 3, 3}, tg::kFloat64), lengths);
  }
  SECTION("GRU: two layers, padded") {
    tg::nn::GRU gru(2, 3, {.num_layers = 2});
    gru.to(tg::kFloat64);
    check(gru, 3, randn_leaf({3, 2, 2}, tg::kFloat64), randn_leaf({2, 2, 3}, tg::kFloat64), Tensor(), Tensor());
  }
  SECTION("RNN tanh: bidirectional, packed") {
    tg::nn::RNN rnn(2, 3, {.bidirectional = true});
    rnn.to(tg::kFloat64);
    check(rnn, 0, randn_leaf({3, 3, 2}, tg::kFloat64), randn_leaf({2, 3, 3}, tg::kFloat64), Tensor(), lengths);
  }
}

TEST_CASE("A packed batch gives each sequence what it gives alone", "[rnn][packed]") {
  tg::manual_seed(5);
  tg::nn::LSTM lstm(3, 4, {.num_layers = 2, .bidirectional = true});
  lstm.to(tg::kFloat64);
  const std::vector<int64_t> lengths{2, 5, 3};
  std::vector<Tensor> sequences;
  for (int64_t length : lengths) sequences.push_back(tg::randn({length, 3}, tg::kFloat64));
  const auto packed = rnn_utils::pack_sequence(sequences, /*enforce_sorted=*/false);
  auto [out, state] = lstm.forward(packed, std::nullopt);
  auto [padded, out_lengths] = rnn_utils::pad_packed_sequence(out, true);  // [N, L, 8]
  REQUIRE(out_lengths.to_vector<int64_t>() == lengths);
  for (size_t b = 0; b < lengths.size(); ++b) {
    CAPTURE(b);
    auto [y, hc] = lstm.forward(sequences[b], std::nullopt);  // unbatched
    TG_REQUIRE_CLOSE(padded.select(0, static_cast<int64_t>(b)).narrow(0, 0, lengths[b]), y, 1e-12);
    TG_REQUIRE_CLOSE(std::get<0>(state).select(1, static_cast<int64_t>(b)), std::get<0>(hc), 1e-12);
    TG_REQUIRE_CLOSE(std::get<1>(state).select(1, static_cast<int64_t>(b)), std::get<1>(hc), 1e-12);
  }
}

TEST_CASE("Dropout between layers is nn.Dropout on every layer's output but the last, in training only",
          "[rnn][dropout]") {
  tg::manual_seed(9);
  tg::nn::GRU stacked(3, 4, {.num_layers = 3, .dropout = 0.4});
  tg::nn::GRU first(3, 4), second(4, 4), third(4, 4);
  for (const auto& [layer, index] : std::initializer_list<std::pair<tg::nn::GRU*, int>>{{&first, 0}, {&second, 1}, {&third, 2}})
    for (const std::string& name : layer->flat_weights_names) {
      const std::string stacked_name = name.substr(0, name.size() - 1) + std::to_string(index);
      layer->weight(name) = stacked.weight(stacked_name);
    }
  const Tensor x = tg::randn({5, 2, 3});
  tg::manual_seed(21);
  const Tensor y = std::get<0>(stacked.forward(x, {}));
  tg::manual_seed(21);
  Tensor expected = first(x);
  expected = second(tg::nn::functional::dropout(expected, 0.4));
  expected = third(tg::nn::functional::dropout(expected, 0.4));
  REQUIRE(bytes(y) == bytes(expected));
  stacked.eval();
  REQUIRE(bytes(std::get<0>(stacked.forward(x, {}))) == bytes(third(second(first(x)))));
}

TEST_CASE("Truncated backpropagation through time: h.detach() between chunks", "[rnn][tbptt]") {
  tg::manual_seed(13);
  tg::nn::LSTM lstm(3, 4, {.num_layers = 2});
  lstm.to(tg::kFloat64);
  Tensor first_chunk = tg::randn({4, 2, 3}, tg::kFloat64).requires_grad_();
  const Tensor second_chunk = tg::randn({3, 2, 3}, tg::kFloat64), dy = tg::randn({3, 2, 4}, tg::kFloat64);
  auto [y1, state1] = lstm.forward(first_chunk, std::nullopt);
  const Tensor h = std::get<0>(state1).detach(), c = std::get<1>(state1).detach();
  auto [y2, state2] = lstm.forward(second_chunk, std::tuple{h, c});
  (y2 * dy).sum().backward();
  // Nothing reaches the first chunk, and the parameters' gradients are those of the second chunk
  // alone from the same (constant) states.
  REQUIRE_FALSE(first_chunk.grad().defined());
  std::vector<Tensor> grads;
  for (const Tensor& p : lstm.parameters()) grads.push_back(p.grad().clone());
  lstm.zero_grad();
  auto [y2_alone, unused] = lstm.forward(second_chunk, std::tuple{h.clone(), c.clone()});
  (y2_alone * dy).sum().backward();
  const std::vector<Tensor> params = lstm.parameters();
  for (size_t k = 0; k < params.size(); ++k) REQUIRE(bytes(params[k].grad()) == bytes(grads[k]));
}

TEST_CASE("LSTM forward and backward are bitwise identical for 1, 2, 3 and 8 threads", "[rnn][threads]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  tg::manual_seed(17);
  tg::nn::LSTM lstm(16, 48, {.num_layers = 2, .bidirectional = true, .proj_size = 24});
  lstm.to(dtype);
  const Tensor x0 = tg::randn({9, 40, 16}, dtype), dy = tg::randn({9, 40, 48}, dtype);
  auto run = [&] {
    Tensor x = x0.clone().requires_grad_();
    lstm.zero_grad();
    auto [y, state] = lstm.forward(x, std::nullopt);
    ((y * dy).sum() + std::get<1>(state).sum()).backward();
    std::vector<std::pair<std::string, std::vector<unsigned char>>> results{{"y", bytes(y)}, {"dx", bytes(x.grad())}};
    for (const auto& [name, p] : lstm.named_parameters()) results.emplace_back(name, bytes(p.grad()));
    return results;
  };
  require_bitwise_identical_across_threads(run);
}

TEST_CASE("GRU forward and backward are bitwise identical for 1, 2, 3 and 8 threads", "[rnn][threads]") {
  tg::manual_seed(19);
  tg::nn::GRU gru(16, 40, {.num_layers = 2, .batch_first = true});
  const Tensor x0 = tg::randn({64, 6, 16}), dy = tg::randn({64, 6, 40});
  auto run = [&] {
    Tensor x = x0.clone().requires_grad_();
    gru.zero_grad();
    auto [y, h] = gru.forward(x, {});
    ((y * dy).sum() + h.sum()).backward();
    std::vector<std::pair<std::string, std::vector<unsigned char>>> results{{"y", bytes(y)}, {"dx", bytes(x.grad())}};
    for (const auto& [name, p] : gru.named_parameters()) results.emplace_back(name, bytes(p.grad()));
    return results;
  };
  require_bitwise_identical_across_threads(run);
}

TEST_CASE("float32 LSTM and GRU (core's vectorised exp in the gates) are bitwise the same at v3, avx512 and any threads",
          "[rnn][vector_isa]") {
  tg::manual_seed(29);
  tg::nn::LSTM lstm(5, 19, {.bidirectional = true, .proj_size = 7});
  tg::nn::GRU gru(5, 19);
  const Tensor x0 = tg::randn({6, 13, 5}) * 3.0f;  // gates well into their saturated ends too
  const auto run = [&] {
    std::vector<std::vector<unsigned char>> results;
    for (tg::nn::Module* module : {static_cast<tg::nn::Module*>(&lstm), static_cast<tg::nn::Module*>(&gru)}) {
      Tensor x = x0.clone().requires_grad_();
      module->zero_grad();
      Tensor y = (*module)(x);
      (y * y).sum().backward();
      results.push_back(bytes(y));
      results.push_back(bytes(x.grad()));
      for (const Tensor& p : module->parameters()) results.push_back(bytes(p.grad()));
    }
    return results;
  };
  // The gates' exponentials are the same bits at every level; the products are too, but for the
  // small ones at v2, whose kernel has no FMA (docs/performance.md), so v2 is left out here.
  const auto reference = run();
  for (const auto& [level, result] : tg::testing::at_every_supported_level(run)) {
    CAPTURE(level);
    if (level != "v2") REQUIRE(result == reference);
  }
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    REQUIRE(with_threads(threads, run) == reference);
  }
}

TEST_CASE("pack_padded_sequence, pad_packed_sequence, pad_sequence and pack_sequence by hand", "[rnn][packed]") {
  // Sequences [1, 2, 3], [4], [5, 6] of one feature each.
  const std::vector<Tensor> sequences{tg::tensor({1.0, 2.0, 3.0}, {3, 1}), tg::tensor({4.0}, {1, 1}),
                                      tg::tensor({5.0, 6.0}, {2, 1})};
  const Tensor padded = rnn_utils::pad_sequence(sequences, /*batch_first=*/true, -1.0);  // [3, 3, 1]
  REQUIRE(padded.shape() == Shape{3, 3, 1});
  REQUIRE(padded.to_vector<float>() == std::vector<float>{1, 2, 3, 4, -1, -1, 5, 6, -1});
  REQUIRE(rnn_utils::pad_sequence(sequences).shape() == Shape{3, 3, 1});
  const auto packed = rnn_utils::pack_sequence(sequences, /*enforce_sorted=*/false);
  // Sorted longest first: [1, 2, 3], [5, 6], [4]; step 0 of all three, step 1 of two, step 2 of one.
  REQUIRE(packed.data.to_vector<float>() == std::vector<float>{1, 5, 4, 2, 6, 3});
  REQUIRE(packed.batch_sizes.to_vector<int64_t>() == std::vector<int64_t>{3, 2, 1});
  REQUIRE(packed.sorted_indices.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 1});
  REQUIRE(packed.unsorted_indices.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 1});
  auto [unpacked, lengths] = rnn_utils::pad_packed_sequence(packed, true, -1.0, 4);
  REQUIRE(unpacked.shape() == Shape{3, 4, 1});
  REQUIRE(unpacked.to_vector<float>() == std::vector<float>{1, 2, 3, -1, 4, -1, -1, -1, 5, 6, -1, -1});
  REQUIRE(lengths.to_vector<int64_t>() == std::vector<int64_t>{3, 1, 2});
  // Sorted input with enforce_sorted: no indices.
  const auto sorted = rnn_utils::pack_padded_sequence(padded.index_select(0, tg::tensor<int64_t>({0, 2, 1})),
                                                      tg::tensor<int64_t>({3, 2, 1}), true);
  REQUIRE_FALSE(sorted.sorted_indices.defined());
  REQUIRE(sorted.data.to_vector<float>() == std::vector<float>{1, 5, 4, 2, 6, 3});
  // The gradient flows back through packing to the padded input, and not into the padding.
  Tensor source = padded.clone().requires_grad_();
  rnn_utils::pack_padded_sequence(source, tg::tensor<int64_t>({3, 1, 2}), true, false).data.sum().backward();
  REQUIRE(source.grad().to_vector<float>() == std::vector<float>{1, 1, 1, 1, 0, 0, 1, 1, 0});
}

TEST_CASE("Recurrent modules refuse bad input with tg::Error naming the shapes", "[rnn][errors]") {
  using Catch::Matchers::Contains;
  tg::nn::LSTM lstm(3, 4, {.num_layers = 2});
  tg::nn::GRU gru(3, 4);
  REQUIRE_TG_ERROR(lstm.forward(tg::randn({5, 2, 6}), std::nullopt),
                   Contains("LSTM") && Contains("input_size (3)") && Contains("[5, 2, 6]"));
  REQUIRE_TG_ERROR(lstm.forward(tg::randn({5, 2, 3, 1}), std::nullopt), Contains("LSTM") && Contains("[5, 2, 3, 1]"));
  REQUIRE_TG_ERROR(lstm.forward(tg::randn({5, 2, 3}), std::tuple{tg::zeros({1, 2, 4}), tg::zeros({2, 2, 4})}),
                   Contains("h0") && Contains("[2, 2, 4]") && Contains("[1, 2, 4]"));
  REQUIRE_TG_ERROR(lstm.forward(tg::randn({5, 2, 3}), std::tuple{tg::zeros({2, 2, 4}), tg::zeros({2, 3, 4})}),
                   Contains("c0") && Contains("[2, 3, 4]"));
  REQUIRE_TG_ERROR(gru.forward(tg::randn({5, 2, 3}), tg::zeros({1, 2, 5})), Contains("GRU") && Contains("[1, 2, 5]"));
  REQUIRE_TG_ERROR(gru.forward(tg::randn({5, 2, 3}, tg::kFloat64), {}),
                   Contains("GRU") && Contains("float64") && Contains(".to("));
  REQUIRE_TG_ERROR(gru.forward(tg::randn({5, 2, 3}), tg::zeros({1, 2, 4}, tg::kFloat64)), Contains("float64"));
  // Lengths longer than the sequence, unsorted lengths with enforce_sorted, wrong dtype.
  REQUIRE_TG_ERROR(rnn_utils::pack_padded_sequence(tg::randn({4, 2, 3}), tg::tensor<int64_t>({5, 2})),
                   Contains("pack_padded_sequence") && Contains("length 5") && Contains("[4, 2, 3]"));
  REQUIRE_TG_ERROR(rnn_utils::pack_padded_sequence(tg::randn({4, 2, 3}), tg::tensor<int64_t>({2, 4})),
                   Contains("enforce_sorted") && Contains("2 then 4"));
  REQUIRE_TG_ERROR(rnn_utils::pack_padded_sequence(tg::randn({4, 2, 3}), tg::tensor({4.0, 2.0})),
                   Contains("int64") && Contains("float32"));
  REQUIRE_TG_ERROR(rnn_utils::pack_padded_sequence(tg::randn({4, 2, 3}), tg::tensor<int64_t>({4, 2, 1})),
                   Contains("expected 2 lengths") && Contains("[3]"));
  // A packed sequence fed with the wrong layout: data of a padded batch, or of another size.
  auto packed = rnn_utils::pack_padded_sequence(tg::randn({4, 2, 3}), tg::tensor<int64_t>({4, 2}));
  rnn_utils::PackedSequence wrong = packed;
  wrong.data = tg::randn({4, 2, 3});
  REQUIRE_TG_ERROR(gru.forward(wrong), Contains("GRU") && Contains("[4, 2, 3]") && Contains("pack_padded_sequence"));
  wrong.data = tg::randn({7, 3});
  REQUIRE_TG_ERROR(gru.forward(wrong), Contains("add up to 6") && Contains("[7, 3]"));
  REQUIRE_TG_ERROR(tg::nn::LSTM(3, 4, {.proj_size = 4}), Contains("proj_size") && Contains("4"));
  REQUIRE_TG_ERROR(tg::nn::RNN(3, 4, {.nonlinearity = "sigmoid"}), Contains("sigmoid"));
  REQUIRE_TG_ERROR(tg::nn::GRU(3, 4, {.dropout = 1.5}), Contains("dropout") && Contains("1.5"));
  REQUIRE_TG_ERROR(lstm.weight("weight_ih_l2"), Contains("weight_ih_l2") && Contains("weight_hh_l1"));
  tg::nn::LSTMCell cell(3, 4);
  REQUIRE_TG_ERROR(cell.forward(tg::randn({2, 5}), std::nullopt), Contains("LSTMCell") && Contains("[2, 5]"));
  REQUIRE_TG_ERROR(cell.forward(tg::randn({2, 3}), std::tuple{tg::zeros({2, 4}), tg::zeros({3, 4})}),
                   Contains("cx") && Contains("[3, 4]"));
}
