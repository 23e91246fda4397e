// The fused attention kernels of attention.cpp, compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Per head b, query i, key j (attention_kernels.hpp's layout), FlashAttention's scheme:
//   s_ij = scale · q_i·k_j + mask_ij            (−∞ where masked, or causal and j > i)
//   forward, over key tiles in order, with a running max m_i and sum l_i per query:
//     m' = max(m, max_j s_ij),  α = e^(m − m'),  p_ij = e^(s_ij − m'),
//     l' = α·l + Σ_j p_ij,      o_i' = α·o_i + Σ_j p̃_ij v_j   (p̃ = p·z/(1 − p_drop), z the keep bit)
//   then o_i /= l_i and lse_i = m_i + log l_i, the only statistic saved.
//   backward recomputes P_ij = e^(s_ij − lse_i) tile by tile, and with D_i = Σ_e dO_ie·O_ie
//   (= Σ_j p̃_ij dp̃_ij, since O = P̃·V):
//     dV_j += P̃ᵀ dO,  dP̃ = dO·Vᵀ,  dS = scale · (P̃ ∘ dP̃ − P ∘ D),  dQ += dS·K,  dK += dSᵀ·Q.
// The tile products run on the small GEMM of this level (ops/small_gemm_kernels.hpp; core's bf16
// product at "medium" matmul precision), the
// exponentials on simd_exp.hpp's float exp (float32) or libm's (float64).
//
// Determinism: forward tasks are (head, query tile) pairs that share nothing; a backward task is
// one head, its key tiles in order and, inside, its query tiles in order, so every sum into dQ,
// dK and dV has one order whatever the thread count.
#include "attention_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/gemm.hpp"
#include "ops/matmul_precision.hpp"
#include "ops/small_gemm_kernels.hpp"
#include "parallel_for.hpp"
#include "simd_exp.hpp"
#include "simd_lanes.hpp"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

constexpr int64_t kQueryTile = kAttentionQueryTile;
constexpr int64_t kKeyTile = kAttentionKeyTile;

// Work (multiply-adds) below which a parallel chunk costs more to schedule than to do.
constexpr int64_t kChunkWork = int64_t{1} << 18;

template <typename T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();
template <typename T>
constexpr T kInf = std::numeric_limits<T>::infinity();

// e^x: simd_exp.hpp's float exp (the softmax family's, the same bits at every level) for float,
// libm's for double.
template <typename T>
inline T exponential(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_float(x, 0.0f);
  else return std::exp(x);
}

// The element `index` of the splitmix64 stream seeded with `seed`, as a uniform double in [0, 1):
// a counter-based draw, so forward and backward (and any thread) agree on each weight's keep bit.
inline bool kept(uint64_t seed, uint64_t index, double keep_probability) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53 < keep_probability;
}

// A tile product: this level's small GEMM, or at "medium" matmul precision core's bf16 product
// (ops/gemm.hpp), which rounds the factors and sums in the same order.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
          int64_t ldb, T* C, int64_t ldc, bool accumulate) {
  if constexpr (std::is_same_v<T, float>)
    if (float32_products_in_bf16()) {
      gemm_on_calling_thread(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
      return;
    }
  small_gemm_kernels.of<T>().gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// x: [S, E] (one head's keys or values) -> xt: [ceil(S / kKeyTile), E, kKeyTile], key tile j's
// transpose as a contiguous [E, kKeyTile] block (the last one's columns past S unset): the score
// products read it as op(B) with row stride kKeyTile, where a stride of S floats would put every
// row of a tile in one L1 set.
template <typename T>
void transpose_key_tiles(const T* x, int64_t S, int64_t E, T* xt) {
  for (int64_t j0 = 0; j0 < S; j0 += kKeyTile) {
    const int64_t cols = std::min(kKeyTile, S - j0);
    T* tile = xt + j0 * E;  // (j0 / kKeyTile) · E · kKeyTile
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t e = 0; e < E; ++e) tile[e * kKeyTile + c] = x[(j0 + c) * E + e];
  }
}

// Elements of T in one 64-byte vector: the lanes of the row sums below, at every level.
template <typename T>
constexpr int64_t kSumLanes = 64 / sizeof(T);

// max(m, max_c x[c]) over x: [n], NaN skipped (x > m ? x : m, maxps's rule); exact, so the lane
// split does not matter.
template <typename T>
T row_max(const T* x, int64_t n, T m) {
  constexpr int64_t W = kSumLanes<T>;
  T lanes[W];
  for (int64_t l = 0; l < W; ++l) lanes[l] = m;
  int64_t c = 0;
  for (; c + W <= n; c += W)
    for (int64_t l = 0; l < W; ++l) lanes[l] = x[c + l] > lanes[l] ? x[c + l] : lanes[l];
  for (; c < n; ++c) m = x[c] > m ? x[c] : m;
  for (int64_t l = 0; l < W; ++l) m = lanes[l] > m ? lanes[l] : m;
  return m;
}

// Σ_c x[c] over x: [n]: element c to lane c mod W while whole vectors last, the lanes then added
// in order, then the tail: an order fixed by n alone, the same at every level.
template <typename T>
T row_sum(const T* x, int64_t n) {
  constexpr int64_t W = kSumLanes<T>;
  T lanes[W] = {};
  int64_t c = 0;
  for (; c + W <= n; c += W)
    for (int64_t l = 0; l < W; ++l) lanes[l] += x[c + l];
  T sum = T(0);
  for (int64_t l = 0; l < W; ++l) sum += lanes[l];
  for (; c < n; ++c) sum += x[c];
  return sum;
}

// x[c] = e^(x[c] − shift) for x: [n], in the level's vectors for float (exp_float lane by lane:
// the same bits at every width), libm's exp for double.
template <typename T>
void exp_shifted(T* x, int64_t n, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    for_each_lane<float>(n, [=](auto at) {
      const auto v = at(x) - shift;
      at.store(x, exp_float(v, decltype(v){}));
    });
  } else {
    for (int64_t c = 0; c < n; ++c) x[c] = std::exp(x[c] - shift);
  }
}

// scores: [rows, kKeyTile] = q_tile·kᵀ for queries i0.. and keys j0.. of head b -> in place
// s = scale·scores + mask, −∞ where causal masks (j > i).
template <typename T>
void finish_scores(const AttentionProblem<T>& p, int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                   T* scores) {
  const T scale = static_cast<T>(p.scale);
  for (int64_t r = 0; r < rows; ++r) {
    T* s = scores + r * kKeyTile;
    const int64_t i = i0 + r;
    if (p.mask) {
      const T* mask_row = p.mask + p.mask_offsets[b] + i * p.mask_row_stride + j0 * p.mask_col_stride;
      if (p.mask_col_stride == 1)
        for (int64_t c = 0; c < cols; ++c) s[c] = s[c] * scale + mask_row[c];
      else
        for (int64_t c = 0; c < cols; ++c) s[c] = s[c] * scale + mask_row[0];
    } else {
      for (int64_t c = 0; c < cols; ++c) s[c] = s[c] * scale;
    }
    if (p.causal)
      for (int64_t c = std::max<int64_t>(i - j0 + 1, 0); c < cols; ++c) s[c] = kNegInf<T>;
  }
}

// Dropout of a probability tile: dropped[r, c] = probs[r, c]·z/(1 − p) for queries i0.., keys j0..
// of head b.
template <typename T>
void drop(const AttentionProblem<T>& p, int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const T* probs,
          T* dropped) {
  const double keep_probability = 1.0 - p.dropout_p;
  const T kept_scale = T(1) / static_cast<T>(keep_probability);
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t base = static_cast<uint64_t>((b * p.L + i0 + r) * p.S + j0);
    for (int64_t c = 0; c < cols; ++c)
      dropped[r * kKeyTile + c] =
          kept(p.dropout_seed, base + static_cast<uint64_t>(c), keep_probability) ? probs[r * kKeyTile + c] * kept_scale
                                                                                 : T(0);
  }
}

inline int64_t key_tiles(int64_t S) { return attention_key_tiles(S); }

// kt: [batch, key_tiles(S)·E·kKeyTile], each head's transpose_key_tiles of x: [batch, S, E].
template <typename T>
void transpose_heads(const T* x, int64_t batch, int64_t S, int64_t E, T* kt) {
  const int64_t head = key_tiles(S) * E * kKeyTile;
  parallel_for(batch, ceil_div(kChunkWork, S * E + 1), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) transpose_key_tiles(x + b * S * E, S, E, kt + b * head);
  });
}

template <typename T>
void forward(const AttentionProblem<T>& p, T* out, T* lse, T* workspace) {
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  if (p.batch == 0 || L == 0) return;
  const int64_t kt_head = key_tiles(S) * E * kKeyTile;
  transpose_heads(p.k, p.batch, S, E, workspace);
  const int64_t query_tiles = ceil_div(L, kQueryTile);
  const int64_t tile_work = kQueryTile * (S + 1) * (E + Ev + 1);
  parallel_for(p.batch * query_tiles, ceil_div(kChunkWork, tile_work), [&](int64_t t0, int64_t t1) {
    alignas(64) T scores[kQueryTile * kKeyTile];
    alignas(64) T dropped[kQueryTile * kKeyTile];
    T row_max_of[kQueryTile], row_sum_of[kQueryTile];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / query_tiles, i0 = (t % query_tiles) * kQueryTile;
      const int64_t rows = std::min(kQueryTile, L - i0);
      const T* kt = workspace + b * kt_head;
      const T* q = p.q + (b * L + i0) * E;
      const T* v = p.v + b * S * Ev;
      T* o = out + (b * L + i0) * Ev;
      std::memset(o, 0, static_cast<size_t>(rows * Ev) * sizeof(T));
      for (int64_t r = 0; r < rows; ++r) row_max_of[r] = kNegInf<T>, row_sum_of[r] = T(0);
      // Causal: keys past the tile's last query are masked for every query of the tile.
      const int64_t key_end = p.causal ? std::min(S, i0 + rows) : S;
      for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, key_end - j0);
        gemm<T>(false, false, rows, cols, E, q, E, kt + j0 * E, kKeyTile, scores, kKeyTile, false);
        finish_scores(p, b, i0, rows, j0, cols, scores);
        for (int64_t r = 0; r < rows; ++r) {
          T* s = scores + r * kKeyTile;
          const T m = row_max(s, cols, row_max_of[r]);
          if (m == kNegInf<T>) {  // every key so far masked: p = 0, nothing to rescale
            for (int64_t c = 0; c < cols; ++c) s[c] = T(0);
            continue;
          }
          const T alpha = exponential(row_max_of[r] - m);  // e^(m − m'), 0 for m = −∞
          exp_shifted(s, cols, m);
          row_sum_of[r] = row_sum_of[r] * alpha + row_sum(s, cols);
          row_max_of[r] = m;
          if (alpha != T(1))
            for (int64_t e = 0; e < Ev; ++e) o[r * Ev + e] *= alpha;
        }
        const T* probs = scores;
        if (p.dropout_p > 0.0) {
          drop(p, b, i0, rows, j0, cols, scores, dropped);
          probs = dropped;
        }
        gemm<T>(false, false, rows, Ev, cols, probs, kKeyTile, v + j0 * Ev, Ev, o, Ev, true);
      }
      for (int64_t r = 0; r < rows; ++r) {
        T* o_row = o + r * Ev;
        if (row_sum_of[r] == T(0)) {  // no key: a zero row, and a +∞ lse so that backward's P is 0
          for (int64_t e = 0; e < Ev; ++e) o_row[e] = T(0);
          lse[b * L + i0 + r] = kInf<T>;
          continue;
        }
        const T inv = T(1) / row_sum_of[r];
        for (int64_t e = 0; e < Ev; ++e) o_row[e] *= inv;
        lse[b * L + i0 + r] = row_max_of[r] + std::log(row_sum_of[r]);
      }
    }
  });
}

template <typename T>
void backward(const AttentionProblem<T>& p, const T* out, const T* lse, const T* grad_out, T* dq, T* dk, T* dv,
              T* workspace) {
  const int64_t L = p.L, S = p.S, E = p.E, Ev = p.Ev;
  std::memset(dq, 0, static_cast<size_t>(p.batch * L * E) * sizeof(T));
  std::memset(dk, 0, static_cast<size_t>(p.batch * S * E) * sizeof(T));
  std::memset(dv, 0, static_cast<size_t>(p.batch * S * Ev) * sizeof(T));
  if (p.batch == 0 || L == 0 || S == 0) return;
  const bool dropout = p.dropout_p > 0.0;
  const T scale = static_cast<T>(p.scale);
  const int64_t head_work = (L + 1) * (S + 1) * (2 * E + 2 * Ev + 1);
  parallel_for(p.batch, ceil_div(kChunkWork, head_work), [&](int64_t b0, int64_t b1) {
    alignas(64) T probs[kQueryTile * kKeyTile];    // P
    alignas(64) T dropped[kQueryTile * kKeyTile];  // P̃ (with dropout)
    alignas(64) T dprobs[kQueryTile * kKeyTile];   // dP̃, then dS
    for (int64_t b = b0; b < b1; ++b) {
      const T* q = p.q + b * L * E;
      const T* k = p.k + b * S * E;
      const T* o = out + b * L * Ev;
      const T* dout = grad_out + b * L * Ev;
      const T* lse_b = lse + b * L;
      // This head's workspace: kᵀ and vᵀ in key tiles, D.
      T* kt = workspace + b * (key_tiles(S) * (E + Ev) * kKeyTile + L);
      T* vt = kt + key_tiles(S) * E * kKeyTile;
      T* delta = vt + key_tiles(S) * Ev * kKeyTile;
      transpose_key_tiles(k, S, E, kt);
      transpose_key_tiles(p.v + b * S * Ev, S, Ev, vt);
      for (int64_t i = 0; i < L; ++i) {  // D_i = Σ_e dO_ie·O_ie
        T sum = T(0);
        for (int64_t e = 0; e < Ev; ++e) sum += dout[i * Ev + e] * o[i * Ev + e];
        delta[i] = sum;
      }
      for (int64_t j0 = 0; j0 < S; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, S - j0);
        // Causal: the query tiles before the one holding query j0 see none of these keys.
        const int64_t first_query = p.causal ? j0 / kQueryTile * kQueryTile : 0;
        for (int64_t i0 = first_query; i0 < L; i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, L - i0);
          gemm<T>(false, false, rows, cols, E, q + i0 * E, E, kt + j0 * E, kKeyTile, probs, kKeyTile, false);
          finish_scores(p, b, i0, rows, j0, cols, probs);
          for (int64_t r = 0; r < rows; ++r) exp_shifted(probs + r * kKeyTile, cols, lse_b[i0 + r]);  // P = e^(s − lse)
          const T* kept_probs = probs;
          if (dropout) {
            drop(p, b, i0, rows, j0, cols, probs, dropped);
            kept_probs = dropped;
          }
          // dV_j += P̃ᵀ·dO_i
          gemm<T>(true, false, cols, Ev, rows, kept_probs, kKeyTile, dout + i0 * Ev, Ev, dv + (b * S + j0) * Ev, Ev,
                  true);
          // dP̃ = dO_i·V_jᵀ
          gemm<T>(false, false, rows, cols, Ev, dout + i0 * Ev, Ev, vt + j0 * Ev, kKeyTile, dprobs, kKeyTile,
                  false);
          for (int64_t r = 0; r < rows; ++r) {
            const T d = delta[i0 + r];
            T* ds = dprobs + r * kKeyTile;
            const T* pr = probs + r * kKeyTile;
            const T* kp = kept_probs + r * kKeyTile;
            if (dropout)  // dS = scale · (P̃ ∘ dP̃ − P ∘ D)
              for (int64_t c = 0; c < cols; ++c) ds[c] = (kp[c] * ds[c] - pr[c] * d) * scale;
            else  // P̃ = P: dS = scale · P ∘ (dP − D)
              for (int64_t c = 0; c < cols; ++c) ds[c] = pr[c] * (ds[c] - d) * scale;
          }
          // dK_j += dSᵀ·Q_i,  dQ_i += dS·K_j
          gemm<T>(true, false, cols, E, rows, dprobs, kKeyTile, q + i0 * E, E, dk + (b * S + j0) * E, E, true);
          gemm<T>(false, false, rows, E, cols, dprobs, kKeyTile, k + j0 * E, E, dq + (b * L + i0) * E, E, true);
        }
      }
    }
  });
}

}  // namespace

const DtypeKernels<AttentionKernels> attention_kernels = {
    .f32 = {.forward = forward<float>, .backward = backward<float>},
    .f64 = {.forward = forward<double>, .backward = backward<double>}};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
