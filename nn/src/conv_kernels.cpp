// Convolution as GEMMs over bounded tiles of output pixels, compiled once per vector level by
// tg_add_isa_kernels (TG_ISA = v2, v3 or avx512) into tg::detail::<level>.
//
// Shapes (conv_shape.hpp): x [N, C_in, H, W], w [C_out, C_in/G, kH, kW], y [N, C_out, H_out, W_out]
// with G groups; per group g, Cig = C_in/G input and Cog = C_out/G output channels, and
// Kg = Cig·kH·kW, P = H_out·W_out. For a tile of output pixels (several whole images, or a range
// [p0, p1) of one image) and group g:
//
//   col[(c, kh, kw), (n, p)] = x[n, g·Cig + c, oh·s_h − pad_h + kh·d_h, ow·s_w − pad_w + kw·d_w]
//                              (0 outside the image; p = oh·W_out + ow)          [Kg, width]
//   forward:      y[n, g·Cog : (g+1)·Cog, p] = W_g[Cog, Kg] · col                 (+ bias)
//   grad input:   col' = W_gᵀ[Kg, Cog] · grad_y tile,  then grad_x += col2im(col')
//   grad weight:  grad_W_g[Cog, Kg] += grad_y tile · colᵀ
//
// The column matrix of a tile is about kColumnBytes, never the whole batch: large images are cut
// into pixel ranges, small ones grouped so that the GEMM is wide (a tile of one image reads and
// writes y and grad_y in place with row stride P; a tile of several copies through a buffer). A 1×1
// kernel at stride 1 without padding needs no column matrix: it is x itself.
//
// Parallelism and determinism: forward runs its tiles in parallel, each writing its own part of
// y. Grad input runs tiles in parallel when they hold whole images, else images in parallel with
// the tiles of one image (which overlap in grad_x) added in order. Grad weight splits the tiles
// into at most kWeightChunks chunks fixed by the sizes; each chunk sums its tiles in order into its
// own slot, and the slots are added in chunk order: the same bits at any thread count.
#include "conv_kernels.hpp"

#include <algorithm>
#include <cstring>

#include "checked_arithmetic.hpp"
#include "kernel_buffer.hpp"
#include "ops/gemm.hpp"
#include "parallel_for.hpp"

namespace tg::detail::TG_ISA {

namespace {

// The column buffer of one tile: about a typical L2 (1 MiB), so that the GEMM runs wide.
constexpr int64_t kColumnBytes = int64_t{1} << 20;
// Pixel ranges of large images come in multiples of this many pixels.
constexpr int64_t kPixelMultiple = 64;
// Grad weight's partial sums: at most this many slots of the weight's size.
constexpr int64_t kWeightChunks = 16;

// A tile of the output pixels: either whole images [n0, n1) (small images, several per tile, so
// that the GEMM is wide enough to run at speed) or the pixels [p0, p1) of one image n0 (large
// images). Its column matrix is [Kg, width], width = (n1 − n0)·(p1 − p0), image-major.
struct Tiling {
  int64_t P;                // output pixels per image
  int64_t Kg;               // rows of a group's column matrix: Cig·kH·kW
  int64_t images_per_tile;  // > 1 only when a tile holds whole images
  int64_t pixels_per_tile;  // P when a tile holds whole images
  int64_t tiles_per_image;  // 1 when a tile holds whole images
  int64_t tiles;            // in all
};

struct Tile {
  int64_t n0, n1, p0, p1;
  int64_t images() const { return n1 - n0; }
  int64_t pixels() const { return p1 - p0; }
  int64_t width() const { return images() * pixels(); }
};

// A 1×1 kernel at stride 1 without padding: the column matrix of a group is x's channel block itself.
bool col_is_input(const Conv2dShape& s) {
  return s.kH == 1 && s.kW == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

template <typename T>
Tiling tiling_of(const Conv2dShape& s) {
  Tiling t{};
  t.P = s.H_out * s.W_out;
  t.Kg = s.C_in / s.groups * s.kH * s.kW;
  const int64_t budget = std::max<int64_t>(kColumnBytes / static_cast<int64_t>(sizeof(T)) / std::max<int64_t>(t.Kg, 1), 16);
  if (t.P == 0 || s.N == 0) return t;
  if (budget >= t.P && !col_is_input(s)) {
    t.images_per_tile = std::min(s.N, budget / t.P);
    t.pixels_per_tile = t.P;
    t.tiles_per_image = 1;
    t.tiles = ceil_div(s.N, t.images_per_tile);
  } else {
    t.images_per_tile = 1;
    // A multiple of 64 pixels: whole micro-panels of the GEMM's kernels (32 or 16 wide), no edge tiles.
    t.pixels_per_tile = std::min(budget >= 2 * kPixelMultiple ? budget / kPixelMultiple * kPixelMultiple : budget, t.P);
    t.tiles_per_image = ceil_div(t.P, t.pixels_per_tile);
    t.tiles = s.N * t.tiles_per_image;
  }
  return t;
}

Tile tile_of(const Tiling& t, int64_t N, int64_t index) {
  if (t.tiles_per_image == 1) {
    const int64_t n0 = index * t.images_per_tile;
    return {n0, std::min(N, n0 + t.images_per_tile), 0, t.P};
  }
  const int64_t n = index / t.tiles_per_image, p0 = index % t.tiles_per_image * t.pixels_per_tile;
  return {n, n + 1, p0, std::min(t.P, p0 + t.pixels_per_tile)};
}


// For kernel column kw: the output columns [lo, hi) whose input column ow·s_w − pad_w + kw·d_w lies
// in [0, W); the others read padding.
inline void valid_columns(const Conv2dShape& s, int64_t kw, int64_t& lo, int64_t& hi) {
  const int64_t offset = kw * s.dilation_w - s.pad_w;  // iw = ow·s_w + offset
  // −offset ≤ pad_w and W − offset ≤ W + pad_w fit, but plus a stride near 2^63 they may not.
  lo = offset >= 0 ? 0 : ceil_div_nonnegative(-offset, s.stride_w);
  hi = offset >= s.W ? 0 : ceil_div_nonnegative(s.W - offset, s.stride_w);
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

// At stride 1 with W_out == W, output pixel q = oh·W + ow of tap (kh, kw) reads x[q + shift] with
// one shift for the whole tap, wherever it reads inside the image: a column row is a shifted copy
// of x's channel with the padding reads zeroed (a few columns per output row, and whole rows at
// the top and bottom), so im2col and col2im run as long contiguous loops even for small images.
inline bool shifted_taps(const Conv2dShape& s) { return s.stride_h == 1 && s.stride_w == 1 && s.W_out == s.W; }

// For tap (kh, kw) of a shifted_taps shape: the shift, and the pixels [q_lo, q_hi) (within
// [p0, p1)) whose input row lies inside the image.
struct ShiftedTap {
  int64_t shift, q_lo, q_hi;
};
inline ShiftedTap shifted_tap(const Conv2dShape& s, int64_t kh, int64_t kw, int64_t p0, int64_t p1) {
  const int64_t row_offset = kh * s.dilation_h - s.pad_h;  // ih = oh + row_offset
  const int64_t oh_lo = std::clamp<int64_t>(-row_offset, 0, s.H_out);
  const int64_t oh_hi = std::clamp<int64_t>(s.H - row_offset, oh_lo, s.H_out);
  return {row_offset * s.W + kw * s.dilation_w - s.pad_w, std::clamp(oh_lo * s.W, p0, p1),
          std::clamp(oh_hi * s.W, p0, p1)};
}

// Calls zero(q) for the pixels q in [q_lo, q_hi) whose input column ow + kw·d_w − pad_w lies
// outside [0, W) (columns [0, lo) and [hi, W) of each output row).
template <typename Zero>
inline void for_padding_columns(const Conv2dShape& s, int64_t kw, int64_t q_lo, int64_t q_hi, const Zero& zero) {
  if (q_lo >= q_hi) return;
  int64_t lo, hi;
  valid_columns(s, kw, lo, hi);
  if (lo == 0 && hi == s.W) return;
  for (int64_t oh = q_lo / s.W; oh * s.W < q_hi; ++oh) {
    const int64_t begin = oh * s.W;
    for (int64_t ow = 0; ow < lo; ++ow)
      if (begin + ow >= q_lo && begin + ow < q_hi) zero(begin + ow);
    for (int64_t ow = hi; ow < s.W; ++ow)
      if (begin + ow >= q_lo && begin + ow < q_hi) zero(begin + ow);
  }
}

// im2col for shifted_taps shapes: col row (c, kh, kw)[q − p0] = x_c[q + shift], 0 for padding reads.
template <typename T>
void im2col_shifted(const Conv2dShape& s, const T* x_group, int64_t Cig, int64_t p0, int64_t p1, T* col, int64_t ld) {
  const int64_t image = s.H * s.W;
  for (int64_t c = 0; c < Cig; ++c) {
    const T* x_channel = x_group + c * image;
    for (int64_t kh = 0; kh < s.kH; ++kh) {
      for (int64_t kw = 0; kw < s.kW; ++kw) {
        T* row = col + ((c * s.kH + kh) * s.kW + kw) * ld - p0;  // row[q], q in [p0, p1)
        const ShiftedTap tap = shifted_tap(s, kh, kw, p0, p1);
        // Inside the valid rows, reads outside the channel are padding columns: zeroed below.
        const int64_t q0 = std::clamp(-tap.shift, tap.q_lo, tap.q_hi);
        const int64_t q1 = std::clamp(image - tap.shift, q0, tap.q_hi);
        for (int64_t q = p0; q < q0; ++q) row[q] = T(0);
        const T* src = x_channel + tap.shift;
        for (int64_t q = q0; q < q1; ++q) row[q] = src[q];
        for (int64_t q = q1; q < p1; ++q) row[q] = T(0);
        for_padding_columns(s, kw, q0, q1, [&](int64_t q) { row[q] = T(0); });
      }
    }
  }
}

// col2im_add for shifted_taps shapes: grad_x_c[q + shift] += col row (c, kh, kw)[q − p0] over the
// reads inside the image. The padding columns of `col` are zeroed first (so that one contiguous loop
// adds the rest), hence col is scratch. With `overwrite` (a whole image whose centre tap reads every
// pixel once: ih = oh, iw = ow) the centre tap's row is stored rather than added, and grad_x needs
// no zero-fill beforehand.
template <typename T>
void col2im_add_shifted(const Conv2dShape& s, T* col, int64_t Cig, int64_t p0, int64_t p1, T* grad_x_group,
                        int64_t ld, int64_t centre) {
  const int64_t image = s.H * s.W;
  const int64_t taps = s.kH * s.kW;
  for (int64_t c = 0; c < Cig; ++c) {
    T* gx_channel = grad_x_group + c * image;
    if (centre >= 0) {
      const T* row = col + (c * taps + centre) * ld;
      for (int64_t q = 0; q < image; ++q) gx_channel[q] = row[q];
    }
    for (int64_t kh = 0; kh < s.kH; ++kh) {
      for (int64_t kw = 0; kw < s.kW; ++kw) {
        if (kh * s.kW + kw == centre) continue;
        T* row = col + (c * taps + kh * s.kW + kw) * ld - p0;
        const ShiftedTap tap = shifted_tap(s, kh, kw, p0, p1);
        const int64_t q0 = std::clamp(-tap.shift, tap.q_lo, tap.q_hi);
        const int64_t q1 = std::clamp(image - tap.shift, q0, tap.q_hi);
        for_padding_columns(s, kw, q0, q1, [&](int64_t q) { row[q] = T(0); });
        T* dst = gx_channel + tap.shift;
        for (int64_t q = q0; q < q1; ++q) dst[q] += row[q];
      }
    }
  }
}

// The tap that reads every pixel of the image exactly once (ih = oh, iw = ow, so H_out = H,
// W_out = W at stride 1), or −1: with it, a whole image's col2im stores that tap first.
inline int64_t centre_tap(const Conv2dShape& s) {
  if (!shifted_taps(s) || s.H_out != s.H) return -1;
  if (s.pad_h % s.dilation_h != 0 || s.pad_w % s.dilation_w != 0) return -1;
  const int64_t kh = s.pad_h / s.dilation_h, kw = s.pad_w / s.dilation_w;
  return kh < s.kH && kw < s.kW ? kh * s.kW + kw : -1;
}

// col[Kg, p1 − p0] (row stride ld) = the column matrix of one group of one image over the pixels
// [p0, p1), x_group: [Cig, H, W].
template <typename T>
void im2col(const Conv2dShape& s, const T* x_group, int64_t Cig, int64_t p0, int64_t p1, T* col, int64_t ld) {
  if (shifted_taps(s)) {
    im2col_shifted(s, x_group, Cig, p0, p1, col, ld);
    return;
  }
  const int64_t width = ld;
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

// grad_x_group[Cig, H, W] += col2im(col), col: [Kg, p1 − p0] with row stride ld (im2col's adjoint:
// each column entry is added back to the input pixel it was read from; padding reads are dropped).
template <typename T>
void col2im_add(const Conv2dShape& s, const T* col, int64_t Cig, int64_t p0, int64_t p1, T* grad_x_group,
                int64_t ld) {
  const int64_t width = ld;
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

// Per-thread scratch (slot 0: column matrices, slot 1: a tile of y or grad_y): every element is
// written before it is read, so which thread's buffer a tile uses cannot change a result.
template <typename T, int kSlot>
T* scratch(int64_t elements) {
  thread_local KernelBuffer<T> buffer(0);
  thread_local int64_t capacity = 0;
  if (capacity < elements) {
    buffer = KernelBuffer<T>(elements);
    capacity = elements;
  }
  return buffer.data();
}

// The tile's rows of a [N, C, P] tensor's channels [c0, c0 + rows) as one matrix: in place (row
// stride P) for a tile of one image, else copied image-major into `buffer` [rows, width].
template <typename T>
const T* gather_rows(const T* t, int64_t C, int64_t c0, int64_t rows, int64_t P, const Tile& tile, T* buffer,
                     int64_t& ld) {
  if (tile.images() == 1) {
    ld = P;
    return t + (tile.n0 * C + c0) * P + tile.p0;
  }
  ld = tile.width();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = tile.n0; n < tile.n1; ++n)
      std::memcpy(buffer + r * ld + (n - tile.n0) * P, t + (n * C + c0 + r) * P, static_cast<size_t>(P) * sizeof(T));
  return buffer;
}

// The tile's column matrix of group g, [Kg, width]: x itself for a direct 1×1 convolution (row
// stride P, one image per tile), else im2col into `col` image by image.
template <typename T>
const T* columns(const Conv2dShape& s, const Tiling& t, const Tile& tile, const T* x, int64_t g, bool direct, T* col,
                 int64_t& ld) {
  const int64_t Cig = s.C_in / s.groups;
  if (direct) {
    ld = t.P;
    return x + (tile.n0 * s.C_in + g * Cig) * t.P + tile.p0;
  }
  ld = tile.width();
  for (int64_t n = tile.n0; n < tile.n1; ++n)
    im2col(s, x + (n * s.C_in + g * Cig) * s.H * s.W, Cig, tile.p0, tile.p1, col + (n - tile.n0) * tile.pixels(), ld);
  return col;
}

template <typename T>
void conv_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y) {
  const Tiling t = tiling_of<T>(s);
  const int64_t Cog = s.C_out / s.groups;
  const bool direct = col_is_input(s);
  parallel_for(t.tiles, 1, [&](int64_t begin, int64_t end) {
    T* col = direct ? nullptr : scratch<T, 0>(t.Kg * t.images_per_tile * t.pixels_per_tile);
    T* out = t.images_per_tile > 1 ? scratch<T, 1>(Cog * t.images_per_tile * t.P) : nullptr;
    for (int64_t index = begin; index < end; ++index) {
      const Tile tile = tile_of(t, s.N, index);
      for (int64_t g = 0; g < s.groups; ++g) {
        int64_t ldb;
        const T* B = columns(s, t, tile, x, g, direct, col, ldb);
        // C = y's block [Cog, pixels] of one image (row stride P), or `out` [Cog, width] for several.
        const bool one_image = tile.images() == 1;
        T* C = one_image ? y + (tile.n0 * s.C_out + g * Cog) * t.P + tile.p0 : out;
        const int64_t ldc = one_image ? t.P : tile.width();
        if (bias)
          for (int64_t o = 0; o < Cog; ++o) std::fill(C + o * ldc, C + o * ldc + tile.width(), bias[g * Cog + o]);
        gemm_on_calling_thread<T>(false, false, Cog, tile.width(), t.Kg, w + g * Cog * t.Kg, t.Kg, B, ldb, C, ldc,
                                  /*accumulate=*/bias != nullptr);
        if (!one_image)
          for (int64_t o = 0; o < Cog; ++o)
            for (int64_t n = tile.n0; n < tile.n1; ++n)
              std::memcpy(y + (n * s.C_out + g * Cog + o) * t.P, out + o * ldc + (n - tile.n0) * t.P,
                          static_cast<size_t>(t.P) * sizeof(T));
      }
    }
  });
}

// grad_x of the images of one tile (+= for a tile of part of an image, whose neighbours add too).
// centre ≥ 0 (a tile of whole images, grad_x not zero-filled): col2im stores that tap first.
template <typename T>
void backward_input_tile(const Conv2dShape& s, const Tiling& t, const Tile& tile, const T* grad_y, const T* w,
                         T* grad_x, bool direct, T* col, T* gathered, int64_t centre) {
  const int64_t Cig = s.C_in / s.groups, Cog = s.C_out / s.groups;
  for (int64_t g = 0; g < s.groups; ++g) {
    int64_t lda;
    const T* A = gather_rows(grad_y, s.C_out, g * Cog, Cog, t.P, tile, gathered, lda);
    if (direct) {
      // Tiles do not overlap: grad_x[n, g, :, p0:p1] = W_gᵀ · grad_y[n, g, :, p0:p1].
      gemm_on_calling_thread<T>(true, false, Cig, tile.width(), Cog, w + g * Cog * t.Kg, t.Kg, A, lda,
                                grad_x + (tile.n0 * s.C_in + g * Cig) * t.P + tile.p0, t.P, false);
      continue;
    }
    // col' = W_gᵀ · grad_y tile, then added back to the input pixels it came from.
    gemm_on_calling_thread<T>(true, false, t.Kg, tile.width(), Cog, w + g * Cog * t.Kg, t.Kg, A, lda, col,
                              tile.width(), false);
    for (int64_t n = tile.n0; n < tile.n1; ++n) {
      T* image_col = col + (n - tile.n0) * tile.pixels();
      T* image_grad = grad_x + (n * s.C_in + g * Cig) * s.H * s.W;
      if (shifted_taps(s))
        col2im_add_shifted(s, image_col, Cig, tile.p0, tile.p1, image_grad, tile.width(), centre);
      else
        col2im_add(s, image_col, Cig, tile.p0, tile.p1, image_grad, tile.width());
    }
  }
}

template <typename T>
void conv_backward_input(const Conv2dShape& s, const T* grad_y, const T* w, T* grad_x) {
  const Tiling t = tiling_of<T>(s);
  const int64_t Cog = s.C_out / s.groups;
  const int64_t image = s.C_in * s.H * s.W;
  const bool direct = col_is_input(s);
  if (t.tiles == 0) {
    std::fill(grad_x, grad_x + s.N * image, T(0));
    return;
  }
  auto buffers = [&](T*& col, T*& gathered) {
    col = direct ? nullptr : scratch<T, 0>(t.Kg * t.images_per_tile * t.pixels_per_tile);
    gathered = t.images_per_tile > 1 ? scratch<T, 1>(Cog * t.images_per_tile * t.P) : nullptr;
  };
  if (direct || t.tiles_per_image == 1) {
    // Tiles write disjoint parts of grad_x: in parallel over tiles.
    const int64_t centre = direct ? -1 : centre_tap(s);
    parallel_for(t.tiles, 1, [&](int64_t begin, int64_t end) {
      T *col, *gathered;
      buffers(col, gathered);
      for (int64_t index = begin; index < end; ++index) {
        const Tile tile = tile_of(t, s.N, index);
        if (!direct && centre < 0) std::fill(grad_x + tile.n0 * image, grad_x + tile.n1 * image, T(0));
        backward_input_tile(s, t, tile, grad_y, w, grad_x, direct, col, gathered, centre);
      }
    });
    return;
  }
  // Tiles of one image overlap in grad_x: images in parallel, each one's tiles in order.
  parallel_for(s.N, 1, [&](int64_t begin, int64_t end) {
    T *col, *gathered;
    buffers(col, gathered);
    for (int64_t n = begin; n < end; ++n) {
      std::fill(grad_x + n * image, grad_x + (n + 1) * image, T(0));
      for (int64_t index = n * t.tiles_per_image; index < (n + 1) * t.tiles_per_image; ++index)
        backward_input_tile(s, t, tile_of(t, s.N, index), grad_y, w, grad_x, direct, col, gathered, int64_t{-1});
    }
  });
}

template <typename T>
void conv_backward_weight(const Conv2dShape& s, const T* x, const T* grad_y, T* grad_w) {
  const Tiling t = tiling_of<T>(s);
  const int64_t Cog = s.C_out / s.groups;
  const int64_t weight_size = s.C_out * t.Kg;
  if (t.tiles == 0) {
    std::fill(grad_w, grad_w + weight_size, T(0));
    return;
  }
  const bool direct = col_is_input(s);
  const int64_t per_chunk = ceil_div(t.tiles, kWeightChunks), chunks = ceil_div(t.tiles, per_chunk);
  // Each chunk sums its tiles into its own slot, transposed: per group [Kg, Cog] = col · grad_yᵀ.
  // (Cog is typically a multiple of 16 or 32 and Kg = 9·Cig of 12, 14 or 16, so in this orientation
  // the GEMM's micro-tiles cover both sides without padded edge tiles.)
  KernelBuffer<T> partials(chunks * weight_size);
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    T* col = direct ? nullptr : scratch<T, 0>(t.Kg * t.images_per_tile * t.pixels_per_tile);
    T* gathered = t.images_per_tile > 1 ? scratch<T, 1>(Cog * t.images_per_tile * t.P) : nullptr;
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      T* slot = partials.data() + chunk * weight_size;
      const int64_t first = chunk * per_chunk, last = std::min(t.tiles, first + per_chunk);
      for (int64_t index = first; index < last; ++index) {
        const Tile tile = tile_of(t, s.N, index);
        for (int64_t g = 0; g < s.groups; ++g) {
          int64_t lda, ldb;
          const T* A = gather_rows(grad_y, s.C_out, g * Cog, Cog, t.P, tile, gathered, lda);
          const T* B = columns(s, t, tile, x, g, direct, col, ldb);
          // slot_g[Kg, Cog] (+)= col · grad_y tileᵀ
          gemm_on_calling_thread<T>(false, true, t.Kg, Cog, tile.width(), B, ldb, A, lda, slot + g * Cog * t.Kg, Cog,
                                    /*accumulate=*/index != first);
        }
      }
    }
  });
  // grad_w[g, o, k] = slot 0 + slot 1 + ... in chunk order, each slot read transposed; in parallel
  // over the rows (g, o) of grad_w, each element's sum in the same order.
  parallel_for(s.C_out, ceil_div(kElementwiseGrain, t.Kg), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t g = r / Cog, o = r % Cog;
      T* row = grad_w + r * t.Kg;
      const T* slot = partials.data() + g * Cog * t.Kg + o;  // slot[k·Cog] = element (k, o)
      for (int64_t k = 0; k < t.Kg; ++k) row[k] = slot[k * Cog];
      for (int64_t chunk = 1; chunk < chunks; ++chunk) {
        slot += weight_size;
        for (int64_t k = 0; k < t.Kg; ++k) row[k] += slot[k * Cog];
      }
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
