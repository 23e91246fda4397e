// The depthwise convolution's direct kernels (depthwise_conv_kernels.hpp), compiled once per vector
// level by tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Sizes as conv_shape.hpp: input [N, C, H, W], weight [C·m, 1, kH, kW], output [N, C·m, H_out, W_out],
// output channel oc = c·m + j reading input channel c; taps t = kh·kW + kw.
//
// Forward, per output element:
//   y[oh, ow] = Σ_t w[t] · xpad[oh·sh + kh·dh, ow·sw + kw·dw] + bias
// where xpad is the channel's plane with pad_h/pad_w zeros around it. Each channel's plane is first
// copied into a padded buffer whose rows are split into sw phases (padded column q·sw + p goes to
// phase p, position q): then for every tap the W_out inputs an output row reads are contiguous,
// phase (kw·dw) mod sw from position ⌊kw·dw / sw⌋, and an output row is a sum of kH·kW shifted rows,
// a vector at a time with no bounds checks.
//
// Input gradient, the adjoint: with gy zero-upsampled by the strides and padded so that
// G[r, q] = gy[oh, ow] at r = oh·sh + (kH−1)·dh − ph, q = ow·sw + (kW−1)·dw − pw (zeros elsewhere),
//   gx[ih, iw] = Σ_j Σ_t w_j[t] · G_j[ih + (kH−1−kh)·dh, iw + (kW−1−kw)·dw]
// the same shifted-row sum (the taps reversed), over the m output channels of the group.
//
// Weight gradient: gw[oc, t] = Σ_n Σ_{oh, ow} gy[n, oc, oh, ow] · xpad[oh·sh + kh·dh, ow·sw + kw·dw].
// Element ow of a row goes to lane ow mod L of a sum of one 64-byte vector (L = 16 floats or 8
// doubles) at every level, its rows added in order; each image's lanes are then added into double
// lanes, images in order, and the L double lanes are added as a fixed tree. The order is fixed by
// the shape alone: bitwise the same at every level and thread count (each task owns whole channels).
//
// No fused multiply-adds (the file is compiled with -ffp-contract=off): each product is rounded,
// then added, at every level. The zeros of the padding enter the sums as products w·0; an
// accumulator starts at +0 and a sum of finite terms is never −0, so such a term changes no bit
// (for finite weights), and the kernels equal a loop that skips the padding.
#include "depthwise_conv_kernels.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel_buffer.hpp"
#include "parallel_for.hpp"
#include "simd_lanes.hpp"

// The kernels pass SIMD vectors by value (see simd_lanes.hpp on -Wpsabi).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

namespace tg::detail::TG_ISA {

namespace {

// One register of the level: kWidth elements of T.
template <typename T>
struct Reg {
  typedef T Vec __attribute__((vector_size(kRegisterBytes)));
  static constexpr int64_t kWidth = kRegisterBytes / sizeof(T);
};
template <typename T>
using VecOf = typename Reg<T>::Vec;

// Lanes of the weight gradient's sums: one 64-byte vector, at every level.
template <typename T>
inline constexpr int64_t kSumLanes = 64 / sizeof(T);

template <typename T>
VecOf<T> load(const T* p) {
  VecOf<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(T* p, VecOf<T> v) {
  std::memcpy(p, &v, sizeof v);
}

// Every lane s. s − (+0) is s exactly for every s (−0 included), so the subtraction folds away.
template <typename T>
VecOf<T> splat(T s) {
  return s - VecOf<T>{};
}

// The first `count` elements at p (0 < count < kWidth), zeros in the other lanes. The masked loads
// touch no memory past the count.
template <typename T>
VecOf<T> load_first(const T* p, int64_t count) {
  using V = VecOf<T>;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) return V(_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p));
  else return V(_mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << count) - 1), p));
#elif defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    typedef int32_t Mask __attribute__((vector_size(32)));
    const Mask lanes = {0, 1, 2, 3, 4, 5, 6, 7};
    return V(_mm256_maskload_ps(p, __m256i(lanes < static_cast<int32_t>(count))));
  } else {
    typedef int64_t Mask __attribute__((vector_size(32)));
    const Mask lanes = {0, 1, 2, 3};
    return V(_mm256_maskload_pd(p, __m256i(lanes < count)));
  }
#else
  V v = {};
  for (int64_t i = 0; i < count; ++i) v[i] = p[i];
  return v;
#endif
}

// Stores the first `count` lanes of v at p (0 < count < kWidth); the memory after them is untouched.
template <typename T>
void store_first(T* p, VecOf<T> v, int64_t count) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << count) - 1), __m512(v));
  else _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << count) - 1), __m512d(v));
#elif defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    typedef int32_t Mask __attribute__((vector_size(32)));
    const Mask lanes = {0, 1, 2, 3, 4, 5, 6, 7};
    _mm256_maskstore_ps(p, __m256i(lanes < static_cast<int32_t>(count)), __m256(v));
  } else {
    typedef int64_t Mask __attribute__((vector_size(32)));
    const Mask lanes = {0, 1, 2, 3};
    _mm256_maskstore_pd(p, __m256i(lanes < count), __m256d(v));
  }
#else
  for (int64_t i = 0; i < count; ++i) p[i] = v[i];
#endif
}

// f(kTaps) with kTaps = 9 for 3×3 kernels (the taps' loop unrolled), else 0 (the count at run time).
template <typename F>
void with_taps(int64_t taps, const F& f) {
  if (taps == 9) f(std::integral_constant<int64_t, 9>{});
  else f(std::integral_constant<int64_t, 0>{});
}

// The padded, phase-split plane of one input channel (top of the file): `rows` rows of row_stride
// = sw·phase_len elements, phase p of a row at p·phase_len. offsets[t]: where tap t's reads of
// output row 0 start; output row oh adds oh·sh·row_stride.
struct InputLayout {
  int64_t rows, phase_len, row_stride, size;
  KernelBuffer<int64_t> offsets;

  explicit InputLayout(const Conv2dShape& s)
      : rows((s.H_out - 1) * s.stride_h + (s.kH - 1) * s.dilation_h + 1),
        phase_len(ceil_div((s.W_out - 1) * s.stride_w + (s.kW - 1) * s.dilation_w + 1, s.stride_w)),
        row_stride(s.stride_w * phase_len),
        size(rows * row_stride),
        offsets(s.kH * s.kW) {
    for (int64_t kh = 0; kh < s.kH; ++kh)
      for (int64_t kw = 0; kw < s.kW; ++kw) {
        const int64_t column = kw * s.dilation_w;
        offsets.data()[kh * s.kW + kw] =
            kh * s.dilation_h * row_stride + (column % s.stride_w) * phase_len + column / s.stride_w;
      }
  }
};

// x_plane: [H, W] -> padded: [rows, sw, phase_len], padded[r, p, q] = x[r − ph, q·sw + p − pw] or 0.
template <typename T>
void fill_input_plane(const Conv2dShape& s, const InputLayout& layout, const T* x_plane, T* padded) {
  for (int64_t r = 0; r < layout.rows; ++r) {
    T* row = padded + r * layout.row_stride;
    const int64_t ih = r - s.pad_h;
    if (ih < 0 || ih >= s.H) {
      std::fill(row, row + layout.row_stride, T(0));
      continue;
    }
    const T* x_row = x_plane + ih * s.W;
    if (s.stride_w == 1) {  // one phase: padded column q is x's column q − pw
      const int64_t lo = std::min(s.pad_w, layout.row_stride), hi = std::min(s.pad_w + s.W, layout.row_stride);
      std::fill(row, row + lo, T(0));
      std::copy(x_row + (lo - s.pad_w), x_row + (hi - s.pad_w), row + lo);
      std::fill(row + hi, row + layout.row_stride, T(0));
    } else {
      for (int64_t p = 0; p < s.stride_w; ++p)
        for (int64_t q = 0; q < layout.phase_len; ++q) {
          const int64_t iw = q * s.stride_w + p - s.pad_w;
          row[p * layout.phase_len + q] = iw >= 0 && iw < s.W ? x_row[iw] : T(0);
        }
    }
  }
}

// The zero-upsampled, padded planes of the input gradient (top of the file): G: [Hg, Wg] per output
// channel of a group, Hg = H + (kH−1)·dh, Wg = W + (kW−1)·dw. offsets[t]: where tap t's reads of
// input row 0 start (the taps reversed).
struct GradLayout {
  int64_t rows, cols, size;
  KernelBuffer<int64_t> offsets;

  explicit GradLayout(const Conv2dShape& s)
      : rows(s.H + (s.kH - 1) * s.dilation_h), cols(s.W + (s.kW - 1) * s.dilation_w), size(rows * cols),
        offsets(s.kH * s.kW) {
    for (int64_t kh = 0; kh < s.kH; ++kh)
      for (int64_t kw = 0; kw < s.kW; ++kw)
        offsets.data()[kh * s.kW + kw] = (s.kH - 1 - kh) * s.dilation_h * cols + (s.kW - 1 - kw) * s.dilation_w;
  }
};

// gy_plane: [H_out, W_out] -> G: [Hg, Wg], G[oh·sh + (kH−1)·dh − ph, ow·sw + (kW−1)·dw − pw] = gy[oh, ow],
// zeros elsewhere; outputs whose place falls outside G read only padding and are dropped.
template <typename T>
void fill_grad_plane(const Conv2dShape& s, const GradLayout& layout, const T* gy_plane, T* grad) {
  std::fill(grad, grad + layout.size, T(0));
  const int64_t row0 = (s.kH - 1) * s.dilation_h - s.pad_h, col0 = (s.kW - 1) * s.dilation_w - s.pad_w;
  for (int64_t oh = 0; oh < s.H_out; ++oh) {
    const int64_t r = oh * s.stride_h + row0;
    if (r < 0 || r >= layout.rows) continue;
    const T* gy_row = gy_plane + oh * s.W_out;
    T* row = grad + r * layout.cols;
    // Columns ow·sw + col0 in [0, cols): ow in [ow_lo, ow_hi).
    const int64_t ow_lo = col0 >= 0 ? 0 : ceil_div(-col0, s.stride_w);
    const int64_t ow_hi = std::min(s.W_out, col0 >= layout.cols ? 0 : ceil_div(layout.cols - col0, s.stride_w));
    if (s.stride_w == 1) {
      if (ow_lo < ow_hi) std::copy(gy_row + ow_lo, gy_row + ow_hi, row + ow_lo + col0);
    } else {
      for (int64_t ow = ow_lo; ow < ow_hi; ++ow) row[ow * s.stride_w + col0] = gy_row[ow];
    }
  }
}

// out: [rows, n] -> out[r, i] = Σ_{j < sources} Σ_{t < taps} w[j·taps + t] · in[j·plane_step + r·row_step
// + offsets[t] + i] + bias, the terms in that order from +0. A vector of the level's width of i at a
// time (each element is its own sum: the width changes no bit), the row's tail masked.
template <int64_t kTaps, typename T>
void correlate_rows(const T* in, int64_t plane_step, int64_t row_step, const int64_t* offsets, const T* w,
                    int64_t sources, int64_t taps, T bias, T* out, int64_t rows, int64_t n) {
  using V = VecOf<T>;
  constexpr int64_t R = Reg<T>::kWidth;
  const int64_t tap_count = kTaps ? kTaps : taps;
  const auto row_sum = [&](const T* in_row, int64_t i, auto read) {
    V acc = {};
    for (int64_t j = 0; j < sources; ++j)
      for (int64_t t = 0; t < tap_count; ++t)
        acc += splat(w[j * tap_count + t]) * read(in_row + j * plane_step + offsets[t] + i);
    return acc + bias;
  };
  for (int64_t r = 0; r < rows; ++r) {
    const T* in_row = in + r * row_step;
    T* out_row = out + r * n;
    int64_t i = 0;
    for (; i + R <= n; i += R) store(out_row + i, row_sum(in_row, i, [](const T* p) { return load(p); }));
    if (i < n) {
      const int64_t count = n - i;
      store_first(out_row + i, row_sum(in_row, i, [=](const T* p) { return load_first(p, count); }), count);
    }
  }
}

// Planes of at least this many multiply-adds (plus copies) per parallel chunk.
inline constexpr int64_t kChunkWork = 65536;

template <typename T>
void depthwise_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y) {
  const int64_t m = s.C_out / s.C_in, taps = s.kH * s.kW;
  const int64_t out_plane = s.H_out * s.W_out, in_plane = s.H * s.W;
  const InputLayout layout(s);
  const int64_t plane_work = m * out_plane * taps + layout.size;
  parallel_for(s.N * s.C_in, ceil_div(kChunkWork, std::max<int64_t>(plane_work, 1)), [&](int64_t p0, int64_t p1) {
    KernelBuffer<T> padded(layout.size);
    for (int64_t p = p0; p < p1; ++p) {  // p = n·C_in + c
      const int64_t n = p / s.C_in, c = p % s.C_in;
      fill_input_plane(s, layout, x + p * in_plane, padded.data());
      for (int64_t j = 0; j < m; ++j) {
        const int64_t oc = c * m + j;
        with_taps(taps, [&](auto kTaps) {
          correlate_rows<decltype(kTaps)::value>(padded.data(), 0, s.stride_h * layout.row_stride,
                                                 layout.offsets.data(), w + oc * taps, 1, taps,
                                                 bias ? bias[oc] : T(0), y + (n * s.C_out + oc) * out_plane,
                                                 s.H_out, s.W_out);
        });
      }
    }
  });
}

template <typename T>
void depthwise_backward_input(const Conv2dShape& s, const T* grad_y, const T* w, T* grad_x) {
  const int64_t m = s.C_out / s.C_in, taps = s.kH * s.kW;
  const int64_t out_plane = s.H_out * s.W_out, in_plane = s.H * s.W;
  const GradLayout layout(s);
  const int64_t plane_work = m * (in_plane * taps + layout.size);
  parallel_for(s.N * s.C_in, ceil_div(kChunkWork, std::max<int64_t>(plane_work, 1)), [&](int64_t p0, int64_t p1) {
    KernelBuffer<T> grad(m * layout.size);  // [m, Hg, Wg]
    for (int64_t p = p0; p < p1; ++p) {  // p = n·C_in + c
      const int64_t n = p / s.C_in, c = p % s.C_in;
      for (int64_t j = 0; j < m; ++j)
        fill_grad_plane(s, layout, grad_y + (n * s.C_out + c * m + j) * out_plane, grad.data() + j * layout.size);
      with_taps(taps, [&](auto kTaps) {
        correlate_rows<decltype(kTaps)::value>(grad.data(), layout.size, layout.cols, layout.offsets.data(),
                                               w + c * m * taps, m, taps, T(0), grad_x + p * in_plane, s.H, s.W);
      });
    }
  });
}

// acc[t] (t < taps) += Σ over the plane's rows and the split's vectors of gy · xpad shifted by tap
// t: the vectors at columns split·R + k·L (k = 0, 1, ...), R the register's lanes and L = kSumLanes,
// so that lane l of split `split` holds the terms of columns ≡ split·R + l (mod L), rows in order.
template <int64_t kTaps, typename T>
void weight_plane_sums(const Conv2dShape& s, const InputLayout& layout, const T* padded, const T* gy_plane,
                       int64_t split, int64_t tap_begin, int64_t tap_end, VecOf<T>* acc) {
  using V = VecOf<T>;
  constexpr int64_t R = Reg<T>::kWidth, L = kSumLanes<T>;
  const int64_t* offsets = layout.offsets.data();
  const int64_t t0 = kTaps ? 0 : tap_begin, t1 = kTaps ? kTaps : tap_end;
  V sums[kTaps ? kTaps : 1];
  for (int64_t t = t0; t < t1; ++t) sums[t - t0] = V{};
  for (int64_t oh = 0; oh < s.H_out; ++oh) {
    const T* gy_row = gy_plane + oh * s.W_out;
    const T* in_row = padded + oh * s.stride_h * layout.row_stride;
    for (int64_t i = split * R; i < s.W_out; i += L) {
      const int64_t count = std::min(R, s.W_out - i);
      if (count == R) {
        const V g = load(gy_row + i);
        for (int64_t t = t0; t < t1; ++t) sums[t - t0] += g * load(in_row + offsets[t] + i);
      } else {
        const V g = load_first(gy_row + i, count);
        for (int64_t t = t0; t < t1; ++t) sums[t - t0] += g * load_first(in_row + offsets[t] + i, count);
      }
    }
  }
  for (int64_t t = t0; t < t1; ++t) acc[t] = sums[t - t0];
}

template <typename T>
void depthwise_backward_weight(const Conv2dShape& s, const T* x, const T* grad_y, T* grad_w) {
  using V = VecOf<T>;
  constexpr int64_t R = Reg<T>::kWidth, L = kSumLanes<T>, kSplits = L / R;
  const int64_t m = s.C_out / s.C_in, taps = s.kH * s.kW;
  const int64_t out_plane = s.H_out * s.W_out, in_plane = s.H * s.W;
  const InputLayout layout(s);
  const int64_t channel_work = s.N * (m * out_plane * taps + layout.size);
  parallel_for(s.C_in, ceil_div(kChunkWork, std::max<int64_t>(channel_work, 1)), [&](int64_t c0, int64_t c1) {
    KernelBuffer<T> padded(layout.size);
    KernelBuffer<double> lanes(m * taps * L);  // [m, taps, L]: the channel's double lanes
    KernelBuffer<V> plane_sums(taps);
    for (int64_t c = c0; c < c1; ++c) {
      std::fill(lanes.data(), lanes.data() + m * taps * L, 0.0);
      for (int64_t n = 0; n < s.N; ++n) {
        fill_input_plane(s, layout, x + (n * s.C_in + c) * in_plane, padded.data());
        for (int64_t j = 0; j < m; ++j) {
          const T* gy_plane = grad_y + (n * s.C_out + c * m + j) * out_plane;
          for (int64_t split = 0; split < kSplits; ++split) {
            if (split * R >= s.W_out) break;  // no column in this split: its lanes stay 0
            with_taps(taps, [&](auto kTaps) {
              if constexpr (decltype(kTaps)::value != 0) {
                weight_plane_sums<decltype(kTaps)::value>(s, layout, padded.data(), gy_plane, split, 0, taps,
                                                          plane_sums.data());
              } else {  // one tap at a time: one accumulator in registers, the same order per lane
                for (int64_t t = 0; t < taps; ++t)
                  weight_plane_sums<0>(s, layout, padded.data(), gy_plane, split, t, t + 1, plane_sums.data());
              }
            });
            // The image's sums into the channel's double lanes, images in order.
            for (int64_t t = 0; t < taps; ++t) {
              double* lane = lanes.data() + (j * taps + t) * L + split * R;
              for (int64_t l = 0; l < R; ++l) lane[l] += static_cast<double>(plane_sums.data()[t][l]);
            }
          }
        }
      }
      // gw = the L lanes added as a tree: halves pairwise down to one.
      for (int64_t jt = 0; jt < m * taps; ++jt) {
        double* lane = lanes.data() + jt * L;
        for (int64_t half = L / 2; half >= 1; half /= 2)
          for (int64_t l = 0; l < half; ++l) lane[l] += lane[l + half];
        grad_w[c * m * taps + jt] = static_cast<T>(lane[0]);
      }
    }
  });
}

}  // namespace

const DtypeKernels<DepthwiseConvKernels> depthwise_conv_kernels = {
    .f32 = {.forward = depthwise_forward<float>,
            .backward_input = depthwise_backward_input<float>,
            .backward_weight = depthwise_backward_weight<float>},
    .f64 = {.forward = depthwise_forward<double>,
            .backward_input = depthwise_backward_input<double>,
            .backward_weight = depthwise_backward_weight<double>},
};

}  // namespace tg::detail::TG_ISA

#pragma GCC diagnostic pop
