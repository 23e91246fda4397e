// Convolution as GEMMs over bounded tiles of output pixels, compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Shapes (conv_shape.hpp): x [N, C_in, H, W], w [C_out, C_in/G, kH, kW], y [N, C_out, H_out, W_out]
// with G groups; per group g, Cig = C_in/G input and Cog = C_out/G output channels, and
// Kg = Cig·kH·kW, P = H_out·W_out. For one image n and a tile of output pixels p ∈ [p0, p1):
//
//   col[(c, kh, kw), p] = x[n, g·Cig + c, oh·s_h − pad_h + kh·d_h, ow·s_w − pad_w + kw·d_w]
//                         (0 outside the image; p = oh·W_out + ow)                [Kg, p1 − p0]
//   forward:         y[n, g·Cog : (g+1)·Cog, p0:p1]  = W_g[Cog, Kg] · col          (+ bias)
//   grad input:      col' = W_gᵀ[Kg, Cog] · grad_y[n, g, p0:p1],  then grad_x += col2im(col')
//   grad weight:     grad_W_g[Cog, Kg] += grad_y[n, g, p0:p1] · colᵀ
//
// The column buffer of a tile is at most kColumnBytes (it stays in L2 between im2col and the
// GEMM's packing), never the whole image or batch. A 1×1 kernel with stride 1 and no padding needs
// no buffer at all: col is x itself, read in place with row stride P.
//
// Parallelism and determinism: forward runs its (image, tile) pieces in parallel, each writing its
// own block of y. Grad input runs images in parallel (tiles of one image overlap in grad_x and are
// added in tile order). Grad weight splits the (image, tile) pieces into at most kWeightChunks
// chunks fixed by the sizes; each chunk sums its pieces in order into its own slot, and the slots
// are added in chunk order: the same bits at any thread count.
#include "conv_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/gemm.hpp"
#include "parallel_for.hpp"

namespace tg::detail::TG_ISA {

namespace {

// The column buffer of one tile of output pixels: half of a typical 1 MiB L2.
constexpr int64_t kColumnBytes = int64_t{512} << 10;
// Grad weight's partial sums: at most this many slots of the weight's size.
constexpr int64_t kWeightChunks = 16;

// One tile of output pixels [p0, p1) of one image.
struct Tiling {
  int64_t P;        // output pixels per image
  int64_t Kg;       // rows of a group's column matrix: Cig·kH·kW
  int64_t per_tile; // output pixels per tile (the last tile may be shorter)
  int64_t tiles;    // tiles per image
};

template <typename T>
Tiling tiling_of(const Conv2dShape& s) {
  Tiling t{};
  t.P = s.H_out * s.W_out;
  t.Kg = s.C_in / s.groups * s.kH * s.kW;
  const int64_t budget = kColumnBytes / static_cast<int64_t>(sizeof(T)) / std::max<int64_t>(t.Kg, 1);
  t.per_tile = std::clamp<int64_t>(budget, std::min<int64_t>(t.P, 16), std::max<int64_t>(t.P, 1));
  t.tiles = t.P == 0 ? 0 : ceil_div(t.P, t.per_tile);
  return t;
}

// A 1×1 kernel at stride 1 without padding: the column matrix of a group is x's channel block itself.
bool col_is_input(const Conv2dShape& s) {
  return s.kH == 1 && s.kW == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

// For kernel column kw: the output columns [lo, hi) whose input column ow·s_w − pad_w + kw·d_w lies
// in [0, W); the others read padding.
inline void valid_columns(const Conv2dShape& s, int64_t kw, int64_t& lo, int64_t& hi) {
  const int64_t offset = kw * s.dilation_w - s.pad_w;  // iw = ow·s_w + offset
  lo = offset >= 0 ? 0 : ceil_div(-offset, s.stride_w);
  hi = offset >= s.W ? 0 : ceil_div(s.W - offset, s.stride_w);
  lo = std::min(lo, s.W_out);
  hi = std::clamp(hi, lo, s.W_out);
}

// Walks the tile's pixels [p0, p1) one output row segment at a time, for kernel offset (kh, kw):
// visit(dst_offset, oh, ow0, ow1, ih, lo, hi) where dst_offset is the segment's place in the tile,
// ih the input row (maybe outside [0, H)), [lo, hi) ∩ [ow0, ow1) the columns inside the image.
template <typename Visit>
inline void for_each_row_segment(const Conv2dShape& s, int64_t p0, int64_t p1, int64_t kh, int64_t lo, int64_t hi,
                                 const Visit& visit) {
  int64_t p = p0;
  while (p < p1) {
    const int64_t oh = p / s.W_out, ow0 = p % s.W_out;
    const int64_t ow1 = std::min(s.W_out, ow0 + (p1 - p));
    const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
    visit(p - p0, ow0, ow1, ih, std::clamp(lo, ow0, ow1), std::clamp(hi, ow0, ow1));
    p += ow1 - ow0;
  }
}

// col[Kg, p1 − p0] = the tile's column matrix of one group, x_group: [Cig, H, W].
template <typename T>
void im2col(const Conv2dShape& s, const T* x_group, int64_t Cig, int64_t p0, int64_t p1, T* col) {
  const int64_t width = p1 - p0;
  for (int64_t c = 0; c < Cig; ++c) {
    const T* x_channel = x_group + c * s.H * s.W;
    for (int64_t kh = 0; kh < s.kH; ++kh) {
      for (int64_t kw = 0; kw < s.kW; ++kw) {
        T* row = col + ((c * s.kH + kh) * s.kW + kw) * width;
        int64_t lo, hi;
        valid_columns(s, kw, lo, hi);
        const int64_t offset = kw * s.dilation_w - s.pad_w;
        for_each_row_segment(s, p0, p1, kh, lo, hi,
                             [&](int64_t at, int64_t ow0, int64_t ow1, int64_t ih, int64_t in0, int64_t in1) {
                               T* dst = row + at - ow0;  // dst[ow] for ow in [ow0, ow1)
                               if (ih < 0 || ih >= s.H) {
                                 std::fill(dst + ow0, dst + ow1, T(0));
                                 return;
                               }
                               std::fill(dst + ow0, dst + in0, T(0));
                               const T* src = x_channel + ih * s.W + offset;  // src[ow·s_w] = x[ih, iw]
                               if (s.stride_w == 1) {
                                 std::memcpy(dst + in0, src + in0, static_cast<size_t>(in1 - in0) * sizeof(T));
                               } else {
                                 for (int64_t ow = in0; ow < in1; ++ow) dst[ow] = src[ow * s.stride_w];
                               }
                               std::fill(dst + in1, dst + ow1, T(0));
                             });
      }
    }
  }
}

// grad_x_group[Cig, H, W] += col2im(col), col: [Kg, p1 − p0] (im2col's adjoint: each column entry
// is added back to the input pixel it was read from; padding reads are dropped).
template <typename T>
void col2im_add(const Conv2dShape& s, const T* col, int64_t Cig, int64_t p0, int64_t p1, T* grad_x_group) {
  const int64_t width = p1 - p0;
  for (int64_t c = 0; c < Cig; ++c) {
    T* gx_channel = grad_x_group + c * s.H * s.W;
    for (int64_t kh = 0; kh < s.kH; ++kh) {
      for (int64_t kw = 0; kw < s.kW; ++kw) {
        const T* row = col + ((c * s.kH + kh) * s.kW + kw) * width;
        int64_t lo, hi;
        valid_columns(s, kw, lo, hi);
        const int64_t offset = kw * s.dilation_w - s.pad_w;
        for_each_row_segment(s, p0, p1, kh, lo, hi,
                             [&](int64_t at, int64_t ow0, int64_t, int64_t ih, int64_t in0, int64_t in1) {
                               if (ih < 0 || ih >= s.H) return;
                               const T* src = row + at - ow0;
                               T* dst = gx_channel + ih * s.W + offset;
                               if (s.stride_w == 1) {
                                 for (int64_t ow = in0; ow < in1; ++ow) dst[ow] += src[ow];
                               } else {
                                 for (int64_t ow = in0; ow < in1; ++ow) dst[ow * s.stride_w] += src[ow];
                               }
                             });
      }
    }
  }
}

// A per-thread column buffer: scratch only (every element is written before it is read), so which
// thread's buffer a tile uses cannot change a result.
template <typename T>
T* column_buffer(int64_t elements) {
  thread_local std::vector<T> buffer;
  if (static_cast<int64_t>(buffer.size()) < elements) buffer.resize(static_cast<size_t>(elements));
  return buffer.data();
}

template <typename T>
void conv_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y) {
  const Tiling t = tiling_of<T>(s);
  const int64_t Cig = s.C_in / s.groups, Cog = s.C_out / s.groups;
  const bool direct = col_is_input(s);
  const int64_t pieces = s.N * t.tiles;
  parallel_for(pieces, 1, [&](int64_t begin, int64_t end) {
    T* col = direct ? nullptr : column_buffer<T>(t.Kg * t.per_tile);
    for (int64_t piece = begin; piece < end; ++piece) {
      const int64_t n = piece / t.tiles, p0 = piece % t.tiles * t.per_tile, p1 = std::min(t.P, p0 + t.per_tile);
      for (int64_t g = 0; g < s.groups; ++g) {
        const T* x_group = x + (n * s.C_in + g * Cig) * s.H * s.W;
        const T* B = direct ? x_group + p0 : col;
        const int64_t ldb = direct ? t.P : p1 - p0;
        if (!direct) im2col(s, x_group, Cig, p0, p1, col);
        T* y_block = y + (n * s.C_out + g * Cog) * t.P + p0;  // [Cog, p1 − p0], row stride P
        if (bias)
          for (int64_t o = 0; o < Cog; ++o) std::fill(y_block + o * t.P, y_block + o * t.P + (p1 - p0), bias[g * Cog + o]);
        gemm_on_calling_thread<T>(false, false, Cog, p1 - p0, t.Kg, w + g * Cog * t.Kg, t.Kg, B, ldb, y_block, t.P,
                                  /*accumulate=*/bias != nullptr);
      }
    }
  });
}

template <typename T>
void conv_backward_input(const Conv2dShape& s, const T* grad_y, const T* w, T* grad_x) {
  const Tiling t = tiling_of<T>(s);
  const int64_t Cig = s.C_in / s.groups, Cog = s.C_out / s.groups;
  const int64_t image = s.C_in * s.H * s.W;
  if (t.tiles == 0) {
    std::fill(grad_x, grad_x + s.N * image, T(0));
    return;
  }
  if (col_is_input(s)) {
    // Tiles do not overlap: each writes grad_x[n, g, :, p0:p1] = W_gᵀ · grad_y[n, g, :, p0:p1].
    parallel_for(s.N * t.tiles, 1, [&](int64_t begin, int64_t end) {
      for (int64_t piece = begin; piece < end; ++piece) {
        const int64_t n = piece / t.tiles, p0 = piece % t.tiles * t.per_tile, p1 = std::min(t.P, p0 + t.per_tile);
        for (int64_t g = 0; g < s.groups; ++g)
          gemm_on_calling_thread<T>(true, false, Cig, p1 - p0, Cog, w + g * Cog * t.Kg, t.Kg,
                                    grad_y + (n * s.C_out + g * Cog) * t.P + p0, t.P,
                                    grad_x + (n * s.C_in + g * Cig) * t.P + p0, t.P, false);
      }
    });
    return;
  }
  parallel_for(s.N, 1, [&](int64_t begin, int64_t end) {
    T* col = column_buffer<T>(t.Kg * t.per_tile);
    for (int64_t n = begin; n < end; ++n) {
      std::fill(grad_x + n * image, grad_x + (n + 1) * image, T(0));
      for (int64_t tile = 0; tile < t.tiles; ++tile) {
        const int64_t p0 = tile * t.per_tile, p1 = std::min(t.P, p0 + t.per_tile);
        for (int64_t g = 0; g < s.groups; ++g) {
          gemm_on_calling_thread<T>(true, false, t.Kg, p1 - p0, Cog, w + g * Cog * t.Kg, t.Kg,
                                    grad_y + (n * s.C_out + g * Cog) * t.P + p0, t.P, col, p1 - p0, false);
          col2im_add(s, col, Cig, p0, p1, grad_x + n * image + g * Cig * s.H * s.W);
        }
      }
    }
  });
}

template <typename T>
void conv_backward_weight(const Conv2dShape& s, const T* x, const T* grad_y, T* grad_w) {
  const Tiling t = tiling_of<T>(s);
  const int64_t Cig = s.C_in / s.groups, Cog = s.C_out / s.groups;
  const int64_t weight_size = s.C_out * t.Kg;
  const int64_t pieces = s.N * t.tiles;
  if (pieces == 0) {
    std::fill(grad_w, grad_w + weight_size, T(0));
    return;
  }
  const bool direct = col_is_input(s);
  const int64_t per_chunk = ceil_div(pieces, kWeightChunks), chunks = ceil_div(pieces, per_chunk);
  // Slot 0 is grad_w itself; slots 1.. are partial sums, added to it in chunk order afterwards.
  std::vector<T> partials(static_cast<size_t>((chunks - 1) * weight_size));
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    T* col = direct ? nullptr : column_buffer<T>(t.Kg * t.per_tile);
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      T* slot = chunk == 0 ? grad_w : partials.data() + (chunk - 1) * weight_size;
      const int64_t first = chunk * per_chunk, last = std::min(pieces, first + per_chunk);
      for (int64_t piece = first; piece < last; ++piece) {
        const int64_t n = piece / t.tiles, p0 = piece % t.tiles * t.per_tile, p1 = std::min(t.P, p0 + t.per_tile);
        for (int64_t g = 0; g < s.groups; ++g) {
          const T* x_group = x + (n * s.C_in + g * Cig) * s.H * s.W;
          const T* B = direct ? x_group + p0 : col;
          const int64_t ldb = direct ? t.P : p1 - p0;
          if (!direct) im2col(s, x_group, Cig, p0, p1, col);
          // slot_g[Cog, Kg] (+)= grad_y[n, g, :, p0:p1] · colᵀ
          gemm_on_calling_thread<T>(false, true, Cog, t.Kg, p1 - p0, grad_y + (n * s.C_out + g * Cog) * t.P + p0,
                                    t.P, B, ldb, slot + g * Cog * t.Kg, t.Kg, /*accumulate=*/piece != first);
        }
      }
    }
  });
  // grad_w = slot 0 + slot 1 + ... in chunk order, element by element.
  if (chunks > 1)
    parallel_for(weight_size, kElementwiseGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t chunk = 1; chunk < chunks; ++chunk) {
        const T* slot = partials.data() + (chunk - 1) * weight_size;
        for (int64_t i = i0; i < i1; ++i) grad_w[i] += slot[i];
      }
    });
}

}  // namespace

const DtypeKernels<ConvKernels> conv_kernels = {
    .f32 = {.forward = conv_forward<float>,
            .backward_input = conv_backward_input<float>,
            .backward_weight = conv_backward_weight<float>},
    .f64 = {.forward = conv_forward<double>,
            .backward_input = conv_backward_input<double>,
            .backward_weight = conv_backward_weight<double>},
};

}  // namespace tg::detail::TG_ISA
