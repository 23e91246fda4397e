// F::pad in its four modes and the padding modules, all through one separable gather and its
// adjoint (axis_gather.hpp), which nearest interpolation shares.
//
// A padded dim of size n with pads (before, after) becomes m + B + A elements, where
//   c₀ = max(−before, 0), c₁ = max(−after, 0)   (negative pads crop first),
//   m = n − c₀ − c₁                              (the cropped size),
//   B = max(before, 0), A = max(after, 0),
// and output element j reads the cropped element k = j − B, mapped into [0, m) by the mode:
//   constant:  k itself, or the fill where k ∉ [0, m)
//   reflect:   −k for k < 0, 2(m − 1) − k for k ≥ m       (the edge itself is not repeated)
//   replicate: clamp(k, 0, m − 1)
//   circular:  k mod m
// then src = c₀ + that. Cropping first is what torch does for circular padding with a negative
// pad on the other side; for the other modes it is the same as mapping j − before directly.
#include "tapegrad/nn/padding.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "autocast_policy.hpp"
#include "autograd/node.hpp"
#include "axis_gather.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "parallel_for.hpp"
#include "tensor_impl.hpp"

namespace tg::detail {

namespace {

using GatherDTypes = DTypes<kFloat32, kFloat64, kInt64>;

// The shape of a gather's rows: lead × (out_1 · ... · out_{k−1}) rows of out_k elements.
struct RowLayout {
  int64_t lead = 1;          // product of the leading (not gathered) dims
  int64_t out_rows = 1;      // output rows per leading index
  int64_t in_plane = 1;      // input elements per leading index
  int64_t out_plane = 1;     // output elements per leading index
  int64_t in_last = 1, out_last = 1;
};

RowLayout row_layout(const Shape& in_shape, const AxisMaps& maps) {
  RowLayout r;
  const size_t k = maps.src.size(), lead_dims = in_shape.size() - k;
  for (size_t d = 0; d < lead_dims; ++d) r.lead *= in_shape[d];
  for (size_t a = 0; a < k; ++a) {
    r.in_plane *= maps.in_sizes[a];
    r.out_plane *= static_cast<int64_t>(maps.src[a].size());
    if (a + 1 < k) r.out_rows *= static_cast<int64_t>(maps.src[a].size());
  }
  r.in_last = maps.in_sizes[k - 1];
  r.out_last = static_cast<int64_t>(maps.src[k - 1].size());
  return r;
}

// The offset within one leading index of the input row that output row `row` reads, or −1 when
// that row is all fill (some outer axis maps to −1).
int64_t source_row(const AxisMaps& maps, int64_t row) {
  const size_t k = maps.src.size();
  int64_t offset = 0, stride = maps.in_sizes[k - 1];
  for (size_t a = k - 1; a-- > 0;) {
    const auto& src = maps.src[a];
    const int64_t out_size = static_cast<int64_t>(src.size());
    const int64_t i = src[row % out_size];
    row /= out_size;
    if (i < 0) return -1;
    offset += i * stride;
    stride *= maps.in_sizes[a];
  }
  return offset;
}

// The last axis's contiguous run: outputs [begin, begin + length) read inputs src[begin] + 0, 1, ...
// (a pad's middle), copied as one block instead of element by element.
std::pair<int64_t, int64_t> contiguous_run(const std::vector<int64_t>& src) {
  int64_t best_begin = 0, best_length = 0;
  const int64_t n = static_cast<int64_t>(src.size());
  for (int64_t j = 0; j < n;) {
    int64_t end = j + 1;
    if (src[j] >= 0)
      while (end < n && src[end] == src[end - 1] + 1) ++end;
    if (src[j] >= 0 && end - j > best_length) best_begin = j, best_length = end - j;
    j = end;
  }
  return {best_begin, best_length};
}

// x: [lead, in_plane] -> y: [lead, out_plane], y's rows of out_last elements as the maps say.
template <typename T>
void gather_kernel(const T* x, T* y, const AxisMaps& maps, const RowLayout& r, T fill) {
  const std::vector<int64_t>& last = maps.src.back();
  // Plain variables, not a structured binding: clang before 16 cannot capture one in a lambda.
  const std::pair<int64_t, int64_t> run = contiguous_run(last);
  const int64_t run_begin = run.first, run_length = run.second;
  const int64_t rows = r.lead * r.out_rows;
  parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(r.out_last, 1)),
               [&](int64_t row0, int64_t row1) {
                 for (int64_t row = row0; row < row1; ++row) {
                   const int64_t b = row / r.out_rows, src_row = source_row(maps, row % r.out_rows);
                   T* y_row = y + row * r.out_last;
                   if (src_row < 0) {
                     std::fill(y_row, y_row + r.out_last, fill);
                     continue;
                   }
                   const T* x_row = x + b * r.in_plane + src_row;
                   for (int64_t j = 0; j < run_begin; ++j) y_row[j] = last[j] < 0 ? fill : x_row[last[j]];
                   if (run_length > 0) std::memcpy(y_row + run_begin, x_row + last[run_begin], run_length * sizeof(T));
                   for (int64_t j = run_begin + run_length; j < r.out_last; ++j)
                     y_row[j] = last[j] < 0 ? fill : x_row[last[j]];
                 }
               });
}

// g: [lead, out_plane] -> gx: [lead, in_plane] (overwritten): every output element added into the
// input element it read. Rows of one leading index run in order (two rows may read one input
// row), unless the maps are injective; either way each sum has one fixed order.
template <typename T>
void scatter_kernel(const T* g, T* gx, const AxisMaps& maps, const RowLayout& r) {
  const std::vector<int64_t>& last = maps.src.back();
  auto add_row = [&](int64_t row) {
    const int64_t b = row / r.out_rows, src_row = source_row(maps, row % r.out_rows);
    if (src_row < 0) return;
    const T* g_row = g + row * r.out_last;
    T* gx_row = gx + b * r.in_plane + src_row;
    for (int64_t j = 0; j < r.out_last; ++j)
      if (last[j] >= 0) gx_row[last[j]] += g_row[j];
  };
  if (maps.injective) {
    std::fill(gx, gx + r.lead * r.in_plane, T(0));
    parallel_for(r.lead * r.out_rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(r.out_last, 1)),
                 [&](int64_t row0, int64_t row1) {
                   for (int64_t row = row0; row < row1; ++row) add_row(row);
                 });
    return;
  }
  parallel_for(r.lead, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(r.out_plane, 1)),
               [&](int64_t b0, int64_t b1) {
                 std::fill(gx + b0 * r.in_plane, gx + b1 * r.in_plane, T(0));
                 for (int64_t b = b0; b < b1; ++b)
                   for (int64_t row = b * r.out_rows; row < (b + 1) * r.out_rows; ++row) add_row(row);
               });
}

Shape gathered_shape(const Shape& shape, const AxisMaps& maps, bool to_output) {
  Shape out = shape;
  const size_t k = maps.src.size(), lead_dims = shape.size() - k;
  for (size_t a = 0; a < k; ++a)
    out[lead_dims + a] = to_output ? maps.out_sizes[a] : maps.in_sizes[a];
  return out;
}

}  // namespace

Tensor axis_gather(const Tensor& x, const std::shared_ptr<const AxisMaps>& maps, double fill) {
  const AxisMaps& m = *maps;
  Tensor y = make_tensor(gathered_shape(x.shape(), m, true), x.dtype(), m.gather_node);
  const RowLayout r = row_layout(x.shape(), m);
  dispatch<GatherDTypes>(m.gather_node, x.dtype(), [&]<typename T>() {
    if (y.numel() > 0) gather_kernel<T>(x.data<T>(), y.mutable_data<T>(), m, r, static_cast<T>(fill));
  });
  if (autograd::needs_grad(x))
    autograd::record(y, m.gather_node, {x}, [maps](const Tensor& g, autograd::GradInputs& grads) {
      grads.set(0, axis_scatter(g, maps));  // recorded itself when the pass records the backward
    });
  return y;
}

Tensor axis_scatter(const Tensor& grad, const std::shared_ptr<const AxisMaps>& maps) {
  const AxisMaps& m = *maps;
  Tensor gx = make_tensor(gathered_shape(grad.shape(), m, false), grad.dtype(), m.adjoint_node);
  const RowLayout r = row_layout(gx.shape(), m);
  dispatch<GatherDTypes>(m.adjoint_node, grad.dtype(), [&]<typename T>() {
    if (gx.numel() > 0) scatter_kernel<T>(grad.data<T>(), gx.mutable_data<T>(), m, r);
  });
  if (autograd::needs_grad(grad))
    autograd::record(gx, m.adjoint_node, {grad}, [maps](const Tensor& gg, autograd::GradInputs& grads) {
      grads.set(0, axis_gather(gg, maps, 0.0));
    });
  return gx;
}

}  // namespace tg::detail

namespace tg::nn {

namespace {

enum class PadMode { kConstant, kReflect, kReplicate, kCircular };

PadMode parse_mode(const std::string& mode) {
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "replicate") return PadMode::kReplicate;
  if (mode == "circular") return PadMode::kCircular;
  tg::detail::fail("pad", "unknown mode \"", mode, "\" (expected constant, reflect, replicate or circular)");
}

// The source indices of one padded dim of size n (see the top of the file); −1 = the fill.
std::vector<int64_t> pad_map(PadMode mode, int64_t n, int64_t before, int64_t after) {
  const int64_t c0 = std::max<int64_t>(-before, 0), c1 = std::max<int64_t>(-after, 0);
  const int64_t m = n - c0 - c1, B = std::max<int64_t>(before, 0), A = std::max<int64_t>(after, 0);
  std::vector<int64_t> src(static_cast<size_t>(m + B + A));
  for (int64_t j = 0; j < m + B + A; ++j) {
    const int64_t k = j - B;
    int64_t i = k;
    switch (mode) {
      case PadMode::kConstant: i = k >= 0 && k < m ? k : -1 - c0; break;
      case PadMode::kReflect: i = k < 0 ? -k : k >= m ? 2 * (m - 1) - k : k; break;
      case PadMode::kReplicate: i = std::clamp<int64_t>(k, 0, m - 1); break;
      case PadMode::kCircular: i = ((k % m) + m) % m; break;
    }
    src[static_cast<size_t>(j)] = c0 + i;
  }
  return src;
}

const char* node_name(PadMode mode) {
  switch (mode) {
    case PadMode::kConstant: return "ConstantPadNdBackward";
    case PadMode::kReflect: return "ReflectionPadBackward";
    case PadMode::kReplicate: return "ReplicationPadBackward";
    case PadMode::kCircular: return "CircularPadBackward";
  }
  return "";
}

}  // namespace

namespace functional {

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const PadFuncOptions& options) try {
  check(x.defined(), "pad", "undefined input");
  const PadMode mode = parse_mode(options.mode);
  if (mode != PadMode::kConstant && tg::detail::autocast_enabled())  // reflect and replicate: autocast's float32 list
    return tg::detail::autocast_to_float32([&](const Tensor& wide) { return functional::pad(wide, pad, options); }, x);
  const int64_t ndim = x.dim();
  check(pad.size() % 2 == 0, "pad", "expected an even number of pad sizes ((before, after) per dim), got ",
        pad.size(), " for an input of shape ", x.shape());
  const int64_t k = static_cast<int64_t>(pad.size() / 2);
  check(k <= ndim, "pad", "got ", pad.size(), " pad sizes (", k, " dims) for an input of shape ", x.shape(),
        " with only ", ndim, " dims");
  tg::detail::check_dtype<tg::detail::DTypes<kFloat32, kFloat64, kInt64>>("pad", x.dtype());
  if (mode != PadMode::kConstant) {
    check(options.value == 0, "pad", "mode \"", options.mode, "\" takes no value, got value = ", options.value);
    check(k >= 1 && k <= 3 && (ndim == k + 1 || ndim == k + 2), "pad", "mode \"", options.mode,
          "\" pads the last 1, 2 or 3 dims of an input with one or two more dims (unbatched or batched), got ",
          pad.size(), " pad sizes for an input of shape ", x.shape());
  }
  if (k == 0) return x.clone();  // nothing padded: a copy, as torch's constant_pad_nd

  auto maps = std::make_shared<tg::detail::AxisMaps>();
  maps->injective = mode == PadMode::kConstant;
  maps->gather_node = node_name(mode);
  maps->adjoint_node = "PadBackwardBackward";
  Shape out_shape = x.shape();
  for (int64_t a = 0; a < k; ++a) {
    const int64_t dim = ndim - k + a;               // outermost padded dim first
    const int64_t before = pad[2 * (k - 1 - a)], after = pad[2 * (k - 1 - a) + 1];
    const int64_t n = x.size(dim);
    // Negative pads crop, by at most n together (each ≥ −n first, so that the sum cannot overflow);
    // then the positive ones add, checked.
    const int64_t cropped =
        before >= -n && after >= -n ? n + std::min<int64_t>(before, 0) + std::min<int64_t>(after, 0) : -1;
    check(cropped >= 0, "pad", "pads (", before, ", ", after, ") crop more than dim ", dim, "'s ", n,
          " elements of the input of shape ", x.shape(), ", leaving a negative size");
    int64_t out = 0;
    check(!__builtin_add_overflow(cropped, std::max<int64_t>(before, 0), &out) &&
              !__builtin_add_overflow(out, std::max<int64_t>(after, 0), &out),
          "pad", "pads (", before, ", ", after, ") at dim ", dim, " of the input of shape ", x.shape(),
          " are too large: the padded size overflows int64");
    if (mode != PadMode::kConstant) {
      check(n > 0, "pad", "mode \"", options.mode, "\" needs non-empty padded dims, got dim ", dim,
            " of size 0 in an input of shape ", x.shape());
      const int64_t most = std::max({before, after, int64_t{0}});
      if (mode == PadMode::kReflect)
        check(most < cropped || most == 0, "pad", "reflect padding must be smaller than the dim it pads, got pads (",
              before, ", ", after, ") at dim ", dim, " of an input of shape ", x.shape());
      if (mode == PadMode::kCircular)
        check(most <= cropped, "pad", "circular padding wraps around more than once: pads (", before, ", ",
              after, ") at dim ", dim, " of an input of shape ", x.shape());
      if (mode == PadMode::kReplicate)
        check(cropped > 0 || out == 0, "pad", "pads (", before, ", ", after, ") leave nothing of dim ", dim,
              " of the input of shape ", x.shape(), " to replicate");
    }
    maps->in_sizes.push_back(n);
    maps->out_sizes.push_back(out);
    out_shape[static_cast<size_t>(dim)] = out;
  }
  // The index tables take memory in proportion to the output's sizes: filled only for an output
  // with elements (and one whose shape can be allocated at all).
  const bool has_elements = checked_numel(out_shape, "pad") > 0;
  for (int64_t a = 0; a < k; ++a) {
    const int64_t before = pad[2 * (k - 1 - a)], after = pad[2 * (k - 1 - a) + 1];
    maps->src.push_back(has_elements ? pad_map(mode, x.size(ndim - k + a), before, after) : std::vector<int64_t>{});
  }
  return tg::detail::axis_gather(x, maps, mode == PadMode::kConstant ? options.value : 0.0);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("pad");
}

}  // namespace functional

PaddingSize2d::PaddingSize2d(const std::vector<int64_t>& p) : values_(p) {
  if (p.size() == 1) values_.assign(4, p[0]);
  check(values_.size() == 4, "Pad2d", "expected 1 or 4 padding sizes (left, right, top, bottom), got ", p.size());
}

ZeroPad2d::ZeroPad2d(PaddingSize2d padding) : padding(padding.values()) {}
Tensor ZeroPad2d::forward(const Tensor& x) { return functional::pad(x, padding); }

ConstantPad2d::ConstantPad2d(PaddingSize2d padding, double value) : padding(padding.values()), value(value) {}
Tensor ConstantPad2d::forward(const Tensor& x) { return functional::pad(x, padding, {.value = value}); }

ReflectionPad2d::ReflectionPad2d(PaddingSize2d padding) : padding(padding.values()) {}
Tensor ReflectionPad2d::forward(const Tensor& x) { return functional::pad(x, padding, {.mode = "reflect"}); }

ReplicationPad2d::ReplicationPad2d(PaddingSize2d padding) : padding(padding.values()) {}
Tensor ReplicationPad2d::forward(const Tensor& x) { return functional::pad(x, padding, {.mode = "replicate"}); }

}  // namespace tg::nn
