// One recurrent layer in one direction: the fused forward, the analytic backward through time, and
// the same maths in differentiable ops for a backward that is itself differentiated.
//
// Forward, once for the whole sequence (G gates, H hidden, H_out = proj_size or H):
//   GX = X·W_ihᵀ + b_ih (+ b_hh, but for the GRU)     one GEMM over every step's rows   [total, G·H]
// then per step t over its bs = batch_sizes[t] running rows (the first bs rows of the state):
//   GH = h·W_hhᵀ (+ b_hh for the GRU)                  one GEMM [bs, H_out]·[H_out, G·H]
//   gates, c and h from GX[t], GH and the state         one fused kernel over the rows
//   h = hh·W_hrᵀ with a projection                      one GEMM [bs, H]·[H, H_out]
// Backward, per step from the last one processed back to the first:
//   dh = dh_state + dy[t]; dhh = dh·W_hr with a projection
//   dGX[t], dGH[t], dc_state                            one fused kernel over the rows
//   dh_state = dGH[t]·W_hh (+ dh ⊙ z for the GRU)       one GEMM
// then one GEMM each over all steps: dX = dGX·W_ih, dW_ih = dGXᵀ·X, dW_hh = dGHᵀ·H_prev,
// dW_hr = dHᵀ·HH, and db = Σ_rows dG. dGH is dGX but for the GRU, whose n gate multiplies its
// recurrent part by r.
//
// Every kernel works row by row (a row never reads another), so the row chunks of the parallel
// loops change nothing in the bits; the GEMMs are core's, deterministic by their sizes.
#include "recurrent/recurrent_layer.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "dispatch.hpp"
#include "ops/exp_row_kernels.hpp"
#include "ops/gemm.hpp"
#include "ops/reduction.hpp"
#include "parallel_for.hpp"
#include "tapegrad/autograd.hpp"
#include "tapegrad/autograd/function.hpp"
#include "tapegrad/autograd/grad.hpp"
#include "tensor_impl.hpp"

namespace tg::nn::detail {

int64_t gate_count(RecurrentCell cell) {
  switch (cell) {
    case RecurrentCell::kLSTM: return 4;
    case RecurrentCell::kGRU: return 3;
    default: return 1;
  }
}

namespace {

// The gate kernels evaluate several exp/tanh per element: a few thousand elements a chunk already
// pay for the scheduling.
int64_t row_grain(int64_t row_width) { return std::max<int64_t>(1, 4096 / std::max<int64_t>(row_width, 1)); }

// The gate nonlinearities over a row, in place. float64: σ(x) = 1 / (1 + e^−x) (core's
// Tensor::sigmoid formula) and std::tanh. float32: the row's exponentials in one call of core's
// vectorised exp (ops/exp_row_kernels.hpp: within 0.78 ulp, the same bits at every vector level),
// then σ(x) = 1 / (1 + e^−x) and tanh(x) = 2σ(2x) − 1 elementwise — the scalar expm1-based tanhf
// was a fifth of an LSTM step's time.
void exponentials(float* v, int64_t n) { tg::detail::exp_row_kernels_for_cpu().scaled_exp(v, 0.0, 1.0, v, n); }

void sigmoid_row(float* v, int64_t n) {
  for (int64_t k = 0; k < n; ++k) v[k] = -v[k];
  exponentials(v, n);  // e^−x
  for (int64_t k = 0; k < n; ++k) v[k] = 1.0f / (1.0f + v[k]);
}

void tanh_row(float* v, int64_t n) {
  for (int64_t k = 0; k < n; ++k) v[k] = -2.0f * v[k];
  exponentials(v, n);  // e^−2x: ±∞ and 0 at the ends give tanh = ∓1 exactly
  for (int64_t k = 0; k < n; ++k) v[k] = 2.0f / (1.0f + v[k]) - 1.0f;
}

void sigmoid_row(double* v, int64_t n) {
  for (int64_t k = 0; k < n; ++k) v[k] = 1.0 / (1.0 + std::exp(-v[k]));
}

void tanh_row(double* v, int64_t n) {
  for (int64_t k = 0; k < n; ++k) v[k] = std::tanh(v[k]);
}

// ---- the fused step kernels, each forward above its backward ----------------------------------

// LSTM, one step. gx, gh: [bs, 4H] the input's and the state's parts of the pre-activations
// (i, f, g, o); c_prev: [bs, H] -> gates: [bs, 4H] activated; c: [bs, H]; hh: [bs, H] = o ⊙ tanh(c).
template <typename T>
void lstm_step_forward(const T* gx, const T* gh, const T* c_prev, T* gates, T* c, T* hh, int64_t bs, int64_t H) {
  tg::detail::parallel_for(bs, row_grain(4 * H), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T* gate = gates + b * 4 * H;  // i, f, g, o
      for (int64_t j = 0; j < 4 * H; ++j) gate[j] = gx[b * 4 * H + j] + gh[b * 4 * H + j];
      sigmoid_row(gate, 2 * H);
      tanh_row(gate + 2 * H, H);
      sigmoid_row(gate + 3 * H, H);
      T* c_row = c + b * H;
      T* hh_row = hh + b * H;
      for (int64_t j = 0; j < H; ++j) {
        c_row[j] = gate[H + j] * c_prev[b * H + j] + gate[j] * gate[2 * H + j];  // c = f ⊙ c_prev + i ⊙ g
        hh_row[j] = c_row[j];
      }
      tanh_row(hh_row, H);
      for (int64_t j = 0; j < H; ++j) hh_row[j] *= gate[3 * H + j];  // h = o ⊙ tanh(c)
    }
  });
}

// dhh: [bs, H] the gradient of o ⊙ tanh(c); gates, c, c_prev as saved by the forward;
// dc: [bs, H] the gradient of c from the later steps, replaced by that of c_prev
// -> dgates: [bs, 4H] the gradient of the pre-activations.
template <typename T>
void lstm_step_backward(const T* dhh, const T* gates, const T* c, const T* c_prev, T* dc, T* dgates, int64_t bs,
                        int64_t H) {
  tg::detail::parallel_for(bs, row_grain(4 * H), [&](int64_t b0, int64_t b1) {
    std::vector<T> tanh_c(static_cast<size_t>(H));
    for (int64_t b = b0; b < b1; ++b) {
      const T* gate_row = gates + b * 4 * H;
      T* dgate_row = dgates + b * 4 * H;
      std::copy(c + b * H, c + (b + 1) * H, tanh_c.begin());
      tanh_row(tanh_c.data(), H);  // the forward's tanh(c), bit for bit
      for (int64_t j = 0; j < H; ++j) {
        const T i = gate_row[j], f = gate_row[H + j], g = gate_row[2 * H + j], o = gate_row[3 * H + j];
        const T dh = dhh[b * H + j];
        const T dc_total = dc[b * H + j] + dh * o * (T(1) - tanh_c[j] * tanh_c[j]);  // through h = o ⊙ tanh(c)
        dgate_row[j] = dc_total * g * i * (T(1) - i);                                 // σ' = σ(1 − σ)
        dgate_row[H + j] = dc_total * c_prev[b * H + j] * f * (T(1) - f);
        dgate_row[2 * H + j] = dc_total * i * (T(1) - g * g);  // tanh' = 1 − tanh²
        dgate_row[3 * H + j] = dh * tanh_c[j] * o * (T(1) - o);
        dc[b * H + j] = dc_total * f;
      }
    }
  });
}

// GRU, one step. gx: [bs, 3H] = x·W_ihᵀ + b_ih, gh: [bs, 3H] = h·W_hhᵀ + b_hh (r, z, n);
// h_prev: [bs, H] -> gates: [bs, 3H] activated (r, z, n); h: [bs, H].
template <typename T>
void gru_step_forward(const T* gx, const T* gh, const T* h_prev, T* gates, T* h, int64_t bs, int64_t H) {
  tg::detail::parallel_for(bs, row_grain(3 * H), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const T* x_row = gx + b * 3 * H;
      const T* h_row = gh + b * 3 * H;
      T* gate = gates + b * 3 * H;  // r, z, n
      for (int64_t j = 0; j < 2 * H; ++j) gate[j] = x_row[j] + h_row[j];
      sigmoid_row(gate, 2 * H);
      // n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))
      for (int64_t j = 0; j < H; ++j) gate[2 * H + j] = x_row[2 * H + j] + gate[j] * h_row[2 * H + j];
      tanh_row(gate + 2 * H, H);
      for (int64_t j = 0; j < H; ++j) {
        const T z = gate[H + j], n = gate[2 * H + j];
        h[b * H + j] = n + z * (h_prev[b * H + j] - n);  // (1 − z) ⊙ n + z ⊙ h_prev, as PyTorch rounds it
      }
    }
  });
}

// dh: [bs, H]; gates, ghn (the recurrent part of n, W_hn h + b_hn) and h_prev as saved
// -> dgx: [bs, 3H], dgh: [bs, 3H] the gradients of the two pre-activation parts; dh_prev: [bs, H]
// the direct part of h_prev's gradient (dh ⊙ z), to which the caller adds dgh·W_hh.
template <typename T>
void gru_step_backward(const T* dh, const T* gates, const T* ghn, const T* h_prev, T* dgx, T* dgh, T* dh_prev,
                       int64_t bs, int64_t H) {
  tg::detail::parallel_for(bs, row_grain(3 * H), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const T* gate_row = gates + b * 3 * H;
      T* dx_row = dgx + b * 3 * H;
      T* dh_row = dgh + b * 3 * H;
      for (int64_t j = 0; j < H; ++j) {
        const T r = gate_row[j], z = gate_row[H + j], n = gate_row[2 * H + j];
        const T grad = dh[b * H + j];
        const T dn = grad * (T(1) - z) * (T(1) - n * n);        // through tanh
        const T dz = grad * (h_prev[b * H + j] - n) * z * (T(1) - z);
        const T dr = dn * ghn[b * H + j] * r * (T(1) - r);
        dx_row[j] = dh_row[j] = dr;
        dx_row[H + j] = dh_row[H + j] = dz;
        dx_row[2 * H + j] = dn;
        dh_row[2 * H + j] = dn * r;  // n's recurrent part is scaled by r
        dh_prev[b * H + j] = grad * z;
      }
    }
  });
}

// Elman RNN, one step. gx, gh: [bs, H] -> h: [bs, H] = tanh or relu of their sum.
template <typename T>
void rnn_step_forward(const T* gx, const T* gh, T* h, int64_t bs, int64_t H, bool relu) {
  tg::detail::parallel_for(bs, row_grain(H), [&](int64_t b0, int64_t b1) {
    for (int64_t k = b0 * H; k < b1 * H; ++k) h[k] = relu ? std::max(gx[k] + gh[k], T(0)) : gx[k] + gh[k];
    if (!relu) tanh_row(h + b0 * H, (b1 - b0) * H);
  });
}

// dh, h: [bs, H] -> dpre: [bs, H].
template <typename T>
void rnn_step_backward(const T* dh, const T* h, T* dpre, int64_t bs, int64_t H, bool relu) {
  tg::detail::parallel_for(bs, row_grain(H), [&](int64_t b0, int64_t b1) {
    for (int64_t k = b0 * H; k < b1 * H; ++k)
      dpre[k] = relu ? (h[k] > T(0) ? dh[k] : T(0)) : dh[k] * (T(1) - h[k] * h[k]);
  });
}

// dst[r, :] = src[r, :] for rows [0, count) of width `width`.
template <typename T>
void copy_rows(const T* src, T* dst, int64_t count, int64_t width) {
  std::copy(src, src + count * width, dst);
}

// [rows, width] = bias repeated, the start of a GEMM that accumulates into it.
template <typename T>
void fill_rows(T* out, const T* bias, int64_t rows, int64_t width) {
  tg::detail::parallel_for(rows, std::max<int64_t>(1, tg::detail::kElementwiseGrain / std::max<int64_t>(width, 1)),
                           [&](int64_t r0, int64_t r1) {
                             for (int64_t r = r0; r < r1; ++r) std::copy(bias, bias + width, out + r * width);
                           });
}

// ---- one layer over the whole sequence ---------------------------------------------------------

// Sizes and the step order of one layer.
struct Plan {
  RecurrentCell cell;
  std::vector<int64_t> batch_sizes;  // per step, non-increasing
  std::vector<int64_t> offsets;      // per step: its first row in the packed rows
  bool reverse;
  int64_t total, batch, input, hidden, out, gates;  // rows, N, I, H, H_out, G·H
  bool lstm() const { return cell == RecurrentCell::kLSTM; }
  bool gru() const { return cell == RecurrentCell::kGRU; }
  bool relu() const { return cell == RecurrentCell::kRelu; }
  int64_t steps() const { return static_cast<int64_t>(batch_sizes.size()); }
  // The k-th step processed: from the first step up, or from the last down.
  int64_t step(int64_t k) const { return reverse ? steps() - 1 - k : k; }
};

Plan make_plan(RecurrentCell cell, const std::vector<int64_t>& batch_sizes, bool reverse, const Tensor& rows,
               const Tensor& h0, const Tensor& w_hh) {
  Plan plan{cell, batch_sizes, {}, reverse, rows.size(0), h0.size(0), rows.size(1), 0, h0.size(1), w_hh.size(0)};
  plan.hidden = plan.gates / gate_count(cell);
  int64_t offset = 0;
  for (int64_t size : batch_sizes) {
    plan.offsets.push_back(offset);
    offset += size;
  }
  return plan;
}

// What the forward keeps for the backward, all over the packed rows:
// gates [total, G·H] activated (the RNN's: its h), h_prev [total, H_out] the state each step read,
// and for the LSTM c, c_prev [total, H] (hh [total, H] = o ⊙ tanh(c) with a projection); for the
// GRU ghn [total, H], the recurrent part of n.
struct Workspace {
  Tensor gates, h_prev, c, c_prev, hh, ghn;
  std::vector<Tensor> list() const { return {gates, h_prev, c, c_prev, hh, ghn}; }
  static Workspace from(const std::vector<Tensor>& t) { return {t[0], t[1], t[2], t[3], t[4], t[5]}; }
};

// The whole forward: y [total, H_out], h_n [N, H_out], c_n [N, H] (LSTM), filling `work`.
template <typename T>
void layer_forward(const Plan& p, const T* x, const T* h0, const T* c0, const T* w_ih, const T* w_hh, const T* b_ih,
                   const T* b_hh, const T* w_hr, T* y, T* h_state, T* c_state, Workspace& work) {
  const int64_t G = p.gates, H = p.hidden, O = p.out;
  // GX = X·W_ihᵀ + b_ih (+ b_hh): every step's input product at once.
  Tensor gx_tensor = make_tensor({p.total, G}, dtype_of<T>(), "recurrent layer");
  T* gx = gx_tensor.mutable_data<T>();
  if (b_ih) {
    std::vector<T> bias(b_ih, b_ih + G);
    if (!p.gru())  // the GRU's b_hh goes with the recurrent part, which r scales in the n gate
      for (int64_t g = 0; g < G; ++g) bias[g] += b_hh[g];
    fill_rows(gx, bias.data(), p.total, G);
  }
  tg::detail::gemm<T>(false, true, p.total, G, p.input, x, w_ih, gx, /*accumulate=*/b_ih != nullptr);

  // W_hhᵀ [H_out, G·H] once: every step's product then packs rows as they are stored instead of
  // transposing W_hh again.
  Tensor w_hh_t_tensor = make_tensor({O, G}, dtype_of<T>(), "recurrent layer");
  T* w_hh_t = w_hh_t_tensor.mutable_data<T>();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t o = 0; o < O; ++o) w_hh_t[o * G + g] = w_hh[g * O + o];

  std::copy(h0, h0 + p.batch * O, h_state);
  if (p.lstm()) std::copy(c0, c0 + p.batch * H, c_state);
  Tensor gh_tensor = make_tensor({p.batch, G}, dtype_of<T>(), "recurrent layer");  // one step's GH
  T* gh = gh_tensor.mutable_data<T>();
  T* gates = work.gates.mutable_data<T>();
  T* h_prev = work.h_prev.mutable_data<T>();
  for (int64_t k = 0; k < p.steps(); ++k) {
    const int64_t t = p.step(k), bs = p.batch_sizes[t], row = p.offsets[t];
    copy_rows(h_state, h_prev + row * O, bs, O);
    // GH = h·W_hhᵀ (+ b_hh for the GRU, whose n gate needs it apart from GX)
    const bool gru_bias = p.gru() && b_hh;
    if (gru_bias) fill_rows(gh, b_hh, bs, G);
    tg::detail::gemm<T>(false, false, bs, G, O, h_prev + row * O, w_hh_t, gh, gru_bias);
    T* y_rows = y + row * O;
    if (p.lstm()) {
      T* c_prev = work.c_prev.mutable_data<T>() + row * H;
      T* c = work.c.mutable_data<T>() + row * H;
      copy_rows(c_state, c_prev, bs, H);
      T* hh = w_hr ? work.hh.mutable_data<T>() + row * H : y_rows;
      lstm_step_forward(gx + row * G, gh, c_prev, gates + row * G, c, hh, bs, H);
      copy_rows(c, c_state, bs, H);
      if (w_hr) tg::detail::gemm<T>(false, true, bs, O, H, hh, w_hr, y_rows, false);  // h = hh·W_hrᵀ
    } else if (p.gru()) {
      gru_step_forward(gx + row * G, gh, h_prev + row * O, gates + row * G, y_rows, bs, H);
      T* ghn = work.ghn.mutable_data<T>() + row * H;
      for (int64_t b = 0; b < bs; ++b) std::copy(gh + b * G + 2 * H, gh + b * G + 3 * H, ghn + b * H);
    } else {
      rnn_step_forward(gx + row * G, gh, y_rows, bs, H, p.relu());
      std::copy(y_rows, y_rows + bs * H, gates + row * G);
    }
    copy_rows(y_rows, h_state, bs, O);
  }
}

// The whole backward from dy [total, H_out], dh_n [N, H_out], dc_n [N, H] (LSTM). Null outputs are
// gradients nobody needs; dh0 and dc0 double as the running state gradients, so they are always given.
template <typename T>
void layer_backward(const Plan& p, const Workspace& work, const T* x, const T* w_ih, const T* w_hh, const T* w_hr,
                    const T* dy, const T* dh_n, const T* dc_n, T* dx, T* dh0, T* dc0, T* dw_ih, T* dw_hh, T* db_ih,
                    T* db_hh, T* dw_hr) {
  const int64_t G = p.gates, H = p.hidden, O = p.out;
  const T* gates = work.gates.data<T>();
  const T* h_prev = work.h_prev.data<T>();
  // dGX, and dGH for the GRU (the others' is dGX itself): [total, G·H]; dH: [total, H_out] the
  // gradient of each step's h, kept for dW_hr.
  Tensor dgx_tensor = make_tensor({p.total, G}, dtype_of<T>(), "recurrent layer backward");
  Tensor dgh_tensor = p.gru() ? make_tensor({p.total, G}, dtype_of<T>(), "recurrent layer backward") : dgx_tensor;
  Tensor dh_tensor = make_tensor({p.total, O}, dtype_of<T>(), "recurrent layer backward");
  Tensor dhh_tensor = w_hr ? make_tensor({p.batch, H}, dtype_of<T>(), "recurrent layer backward") : Tensor();
  T* dgx = dgx_tensor.mutable_data<T>();
  T* dgh = dgh_tensor.mutable_data<T>();
  T* dh_all = dh_tensor.mutable_data<T>();
  std::copy(dh_n, dh_n + p.batch * O, dh0);
  if (p.lstm()) std::copy(dc_n, dc_n + p.batch * H, dc0);
  for (int64_t k = p.steps() - 1; k >= 0; --k) {
    const int64_t t = p.step(k), bs = p.batch_sizes[t], row = p.offsets[t];
    T* dh = dh_all + row * O;
    for (int64_t e = 0; e < bs * O; ++e) dh[e] = dh0[e] + dy[row * O + e];  // from the later steps and from y
    if (p.lstm()) {
      const T* dhh = dh;
      if (w_hr) {  // dhh = dh·W_hr
        tg::detail::gemm<T>(false, false, bs, H, O, dh, w_hr, dhh_tensor.mutable_data<T>(), false);
        dhh = dhh_tensor.data<T>();
      }
      lstm_step_backward(dhh, gates + row * G, work.c.data<T>() + row * H, work.c_prev.data<T>() + row * H, dc0,
                         dgx + row * G, bs, H);
    } else if (p.gru()) {
      gru_step_backward(dh, gates + row * G, work.ghn.data<T>() + row * H, h_prev + row * O, dgx + row * G,
                        dgh + row * G, dh0, bs, H);
    } else {
      rnn_step_backward(dh, gates + row * G, dgx + row * G, bs, H, p.relu());
    }
    // dh_prev = dGH·W_hh (+ dh ⊙ z already there for the GRU)
    tg::detail::gemm<T>(false, false, bs, O, G, dgh + row * G, w_hh, dh0, /*accumulate=*/p.gru());
  }
  if (dx) tg::detail::gemm<T>(false, false, p.total, p.input, G, dgx, w_ih, dx, false);     // dX = dGX·W_ih
  if (dw_ih) tg::detail::gemm<T>(true, false, G, p.input, p.total, dgx, x, dw_ih, false);   // dW_ih = dGXᵀ·X
  if (dw_hh) tg::detail::gemm<T>(true, false, G, O, p.total, dgh, h_prev, dw_hh, false);    // dW_hh = dGHᵀ·H_prev
  if (db_ih) tg::detail::reduce_sum<T>(dgx, db_ih, 1, p.total, G, 1.0);                     // db_ih = Σ_rows dGX
  if (db_hh) tg::detail::reduce_sum<T>(dgh, db_hh, 1, p.total, G, 1.0);                     // db_hh = Σ_rows dGH
  if (dw_hr) tg::detail::gemm<T>(true, false, O, H, p.total, dh_all, work.hh.data<T>(), dw_hr, false);  // dHᵀ·HH
}

// ---- the same layer in differentiable ops --------------------------------------------------------

// The layer step by step in tg ops (matmul, sigmoid, tanh, cat...): what a backward differentiates
// when it is itself recorded. Same shapes and results as the fused path.
std::vector<Tensor> layer_in_ops(const Plan& p, const Tensor& x, const Tensor& h0, const Tensor& c0,
                                 const LayerWeights& w) {
  const int64_t N = p.batch;
  Tensor gx = tg::matmul(x, w.w_ih.t());
  if (w.b_ih.defined()) gx = gx + w.b_ih;
  Tensor h = h0, c = c0;
  std::vector<Tensor> ys(p.steps());
  // The state's rows [0, bs) replaced by `rows`, the rest kept (sequences not running this step).
  auto update = [N](const Tensor& state, const Tensor& rows, int64_t bs) {
    return bs == N ? rows : tg::cat({rows, state.narrow(0, bs, N - bs)}, 0);
  };
  for (int64_t k = 0; k < p.steps(); ++k) {
    const int64_t t = p.step(k), bs = p.batch_sizes[t];
    const Tensor h_prev = h.narrow(0, 0, bs), gxt = gx.narrow(0, p.offsets[t], bs);
    Tensor gh = tg::matmul(h_prev, w.w_hh.t());
    if (w.b_hh.defined()) gh = gh + w.b_hh;
    Tensor h_new;
    if (p.lstm()) {
      const std::vector<Tensor> pre = (gxt + gh).chunk(4, 1);
      const Tensor i = pre[0].sigmoid(), f = pre[1].sigmoid(), g = pre[2].tanh(), o = pre[3].sigmoid();
      const Tensor c_new = f * c.narrow(0, 0, bs) + i * g;
      h_new = o * c_new.tanh();
      if (w.w_hr.defined()) h_new = tg::matmul(h_new, w.w_hr.t());
      c = update(c, c_new, bs);
    } else if (p.gru()) {
      const std::vector<Tensor> xs = gxt.chunk(3, 1), hs = gh.chunk(3, 1);
      const Tensor r = (xs[0] + hs[0]).sigmoid(), z = (xs[1] + hs[1]).sigmoid();
      const Tensor n = (xs[2] + r * hs[2]).tanh();
      h_new = n + z * (h_prev - n);
    } else {
      h_new = p.relu() ? (gxt + gh).relu() : (gxt + gh).tanh();
    }
    ys[t] = h_new;
    h = update(h, h_new, bs);
  }
  std::vector<Tensor> outputs{tg::cat(ys, 0), h};
  if (p.lstm()) outputs.push_back(c);
  return outputs;
}

// A graph computed in differentiable ops on leaves that stand for a node's inputs: `results` are
// functions of `leaves` alone, so a pass through them never walks the graph around the node.
struct InnerGraph {
  std::vector<Tensor> leaves, results;
};

// A node that outputs the values of an inner graph's results, connected to `inputs` (the tensors
// the leaves stand for). Its backward is the gradient of the results with respect to the leaves,
// itself through such a node when that backward is recorded, so the chain can be differentiated
// to any order.
struct DifferentiatedInOps : autograd::Function<DifferentiatedInOps> {
  static autograd::variable_list forward(autograd::AutogradContext* ctx, const std::vector<Tensor>& inputs,
                                         const InnerGraph& graph) {
    ctx->save_for_backward(inputs);
    ctx->saved_data["leaves"] = graph.leaves;
    ctx->saved_data["results"] = graph.results;
    autograd::variable_list outputs;
    for (const Tensor& result : graph.results) outputs.push_back(result.detach().clone());
    return outputs;
  }
  static autograd::variable_list backward(autograd::AutogradContext* ctx, autograd::variable_list grad_outputs);
};

// The gradients of `graph.results` against `grad_outputs` (one per result), one per leaf: plain
// tensors, or, when grad mode is on (a recorded backward), connected to `inputs` through a
// DifferentiatedInOps node whose inner graph has the incoming gradients as leaves too.
autograd::variable_list gradient_through(const std::vector<Tensor>& inputs, const InnerGraph& graph,
                                         const std::vector<Tensor>& grad_outputs) {
  // A result that is constant in the leaves (a materialised zero gradient) sends nothing back.
  std::vector<Tensor> results, seeds;
  for (size_t k = 0; k < graph.results.size(); ++k)
    if (graph.results[k].requires_grad()) {
      results.push_back(graph.results[k]);
      seeds.push_back(grad_outputs[k]);
    }
  if (!is_grad_enabled()) {
    if (results.empty()) {
      std::vector<Tensor> zeros_out;
      for (const Tensor& leaf : graph.leaves) zeros_out.push_back(tg::zeros_like(leaf));
      return zeros_out;
    }
    return autograd::grad(results, graph.leaves, seeds, {.retain_graph = true, .materialize_grads = true});
  }
  InnerGraph next{graph.leaves, {}};
  std::vector<Tensor> all_inputs = inputs;
  for (Tensor& seed : seeds) {
    all_inputs.push_back(seed);
    seed = seed.detach().requires_grad_();
    next.leaves.push_back(seed);
  }
  if (results.empty()) {
    for (const Tensor& leaf : graph.leaves) next.results.push_back(tg::zeros_like(leaf));
  } else {
    next.results = autograd::grad(results, graph.leaves, seeds,
                                  {.retain_graph = true, .create_graph = true, .materialize_grads = true});
  }
  return DifferentiatedInOps::apply(all_inputs, next);
}

autograd::variable_list DifferentiatedInOps::backward(autograd::AutogradContext* ctx,
                                                      autograd::variable_list grad_outputs) {
  const InnerGraph graph{ctx->saved_data["leaves"].toTensorVector(), ctx->saved_data["results"].toTensorVector()};
  autograd::variable_list grads = gradient_through(ctx->get_saved_variables(), graph, grad_outputs);
  grads.emplace_back();  // the InnerGraph argument
  return grads;
}

// ---- the tape node of one layer ------------------------------------------------------------------

struct RecurrentLayer : autograd::Function<RecurrentLayer> {
  // Tensor arguments 0..7: rows, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr (undefined when absent).
  static autograd::variable_list forward(autograd::AutogradContext* ctx, const Tensor& rows, const Tensor& h0,
                                         const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                         const Tensor& b_hh, const Tensor& w_hr, const Plan& plan) {
    const DType dtype = rows.dtype();
    Tensor y = make_tensor({plan.total, plan.out}, dtype, "recurrent layer");
    Tensor h_n = make_tensor({plan.batch, plan.out}, dtype, "recurrent layer");
    Tensor c_n = plan.lstm() ? make_tensor({plan.batch, plan.hidden}, dtype, "recurrent layer") : Tensor();
    const int64_t H = plan.hidden;
    Workspace work;
    work.gates = make_tensor({plan.total, plan.gates}, dtype, "recurrent layer");
    work.h_prev = make_tensor({plan.total, plan.out}, dtype, "recurrent layer");
    if (plan.lstm()) {
      work.c = make_tensor({plan.total, H}, dtype, "recurrent layer");
      work.c_prev = make_tensor({plan.total, H}, dtype, "recurrent layer");
      if (w_hr.defined()) work.hh = make_tensor({plan.total, H}, dtype, "recurrent layer");
    }
    if (plan.gru()) work.ghn = make_tensor({plan.total, H}, dtype, "recurrent layer");
    tg::detail::dispatch_floating("recurrent layer", dtype, [&]<typename T>() {
      auto ptr = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
      layer_forward<T>(plan, rows.data<T>(), h0.data<T>(), ptr(c0), w_ih.data<T>(), w_hh.data<T>(), ptr(b_ih),
                       ptr(b_hh), ptr(w_hr), y.mutable_data<T>(), h_n.mutable_data<T>(),
                       c_n.defined() ? c_n.mutable_data<T>() : nullptr, work);
    });
    bool any = false;
    for (size_t i = 0; i < 8; ++i) any = any || ctx->needs_input_grad(i);
    if (any) {  // inference keeps nothing
      ctx->save_for_backward({rows, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr});
      ctx->saved_data["workspace"] = work.list();
      ctx->saved_data["plan"] = std::vector<int64_t>{static_cast<int64_t>(plan.cell), plan.reverse};
      ctx->saved_data["batch_sizes"] = plan.batch_sizes;
    }
    if (plan.lstm()) return {y, h_n, c_n};
    return {y, h_n};
  }

  static autograd::variable_list backward(autograd::AutogradContext* ctx, autograd::variable_list grad_outputs) {
    const std::vector<Tensor> saved = ctx->get_saved_variables();
    const Tensor &rows = saved[0], &h0 = saved[1], &c0 = saved[2], &w_hh = saved[4];
    const std::vector<int64_t> flags = ctx->saved_data["plan"].toIntVector();
    const Plan plan = make_plan(static_cast<RecurrentCell>(flags[0]), ctx->saved_data["batch_sizes"].toIntVector(),
                                flags[1] != 0, rows, h0, w_hh);
    if (is_grad_enabled()) {
      // A recorded backward: the gradient of the layer written in ops, taken on leaves that stand
      // for the saved inputs (so the inner pass never walks the outer graph).
      std::vector<Tensor> inputs, leaves;
      std::vector<int> slot;
      std::vector<Tensor> stand_in(8);
      for (size_t i = 0; i < 8; ++i) {
        if (!saved[i].defined()) continue;
        stand_in[i] = saved[i].detach().requires_grad_(ctx->needs_input_grad(i));
        if (!ctx->needs_input_grad(i)) continue;
        inputs.push_back(saved[i]);
        leaves.push_back(stand_in[i]);
        slot.push_back(static_cast<int>(i));
      }
      const InnerGraph graph{leaves, layer_in_ops(plan, stand_in[0], stand_in[1], stand_in[2],
                                                  {stand_in[3], stand_in[4], stand_in[5], stand_in[6], stand_in[7]})};
      const autograd::variable_list grads = gradient_through(inputs, graph, grad_outputs);
      autograd::variable_list out(9);
      for (size_t k = 0; k < slot.size(); ++k) out[slot[k]] = grads[k];
      return out;
    }
    const Workspace work = Workspace::from(ctx->saved_data["workspace"].toTensorVector());
    auto needed = [&](size_t i) { return saved[i].defined() && ctx->needs_input_grad(i); };
    auto like = [&](size_t i) { return needed(i) ? make_tensor(saved[i].shape(), saved[i].dtype()) : Tensor(); };
    autograd::variable_list grads{like(0), make_tensor(h0.shape(), h0.dtype()),
                                  plan.lstm() ? make_tensor(c0.shape(), c0.dtype()) : Tensor(),
                                  like(3), like(4), like(5), like(6), like(7), Tensor()};
    tg::detail::dispatch_floating("recurrent layer backward", rows.dtype(), [&]<typename T>() {
      auto in = [](const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
      auto out = [](Tensor& t) { return t.defined() ? t.mutable_data<T>() : nullptr; };
      layer_backward<T>(plan, work, rows.data<T>(), saved[3].data<T>(), w_hh.data<T>(), in(saved[7]),
                        grad_outputs[0].data<T>(), grad_outputs[1].data<T>(),
                        plan.lstm() ? grad_outputs[2].data<T>() : nullptr, out(grads[0]), out(grads[1]),
                        out(grads[2]), out(grads[3]), out(grads[4]), out(grads[5]), out(grads[6]), out(grads[7]));
    });
    if (!ctx->needs_input_grad(1)) grads[1] = Tensor();
    if (!needed(2)) grads[2] = Tensor();
    return grads;
  }
};

}  // namespace

std::vector<Tensor> recurrent_layer(RecurrentCell cell, const Tensor& rows, const std::vector<int64_t>& batch_sizes,
                                    bool reverse, const Tensor& h0, const Tensor& c0, const LayerWeights& weights) {
  const Plan plan = make_plan(cell, batch_sizes, reverse, rows, h0, weights.w_hh);
  std::vector<Tensor> outputs = RecurrentLayer::apply(rows, h0, c0, weights.w_ih, weights.w_hh, weights.b_ih,
                                                      weights.b_hh, weights.w_hr, plan);
  if (outputs.size() == 2) outputs.emplace_back();
  return outputs;
}

}  // namespace tg::nn::detail
