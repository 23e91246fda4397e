// Convolution: conv1d, conv2d and conv_transpose2d, and their modules.
//
// Every convolution here is one of three bilinear primitives of the same sizes (Conv2dShape; a 1-D
// convolution is the 2-D one with H = kH = 1), each one tape node on a kernel of conv_kernels.cpp:
//
//   forward(x, w)          y  = conv(x, w)                 [N, C_out, H_out, W_out]
//   input_adjoint(g, w)    gx = conv(·, w)ᵀ g              [N, C_in, H, W]    (conv_transpose2d)
//   weight_grad(x, g)      gw = conv(x, ·)ᵀ g              [C_out, C_in/G, kH, kW]
//
// From ⟨conv(x, w), g⟩ = ⟨x, input_adjoint(g, w)⟩ = ⟨w, weight_grad(x, g)⟩ each primitive's
// gradients are the other two (PyTorch's _convolution_double_backward):
//
//   forward:        dx = input_adjoint(G, w),  dw = weight_grad(x, G)
//   input_adjoint:  dg = forward(G, w),        dw = weight_grad(G, g)
//   weight_grad:    dx = input_adjoint(g, G),  dg = forward(x, G)
//
// and a bias (of forward, or of conv_transpose2d's input_adjoint) gets G summed over all but its
// channel dim. The backward closures call the recording primitives: in a plain backward nothing
// requires grad and each call is the bare kernel; with create_graph each records its node, so the
// convolution is differentiable any number of times.
#include "tapegrad/nn/conv.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include "autograd/node.hpp"
#include "autocast_policy.hpp"
#include "bfloat16_compute.hpp"
#include "checked_arithmetic.hpp"
#include "conv_kernels.hpp"
#include "conv_shape.hpp"
#include "depthwise_conv_kernels.hpp"
#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "tapegrad/nn/init.hpp"
#include "tapegrad/nn/padding.hpp"

namespace tg::nn {

namespace {

using tg::detail::Conv2dShape;
using tg::detail::drop_unused_strides;

// One convolution's sizes as the kernels take them, and the shapes of its three tensors as the
// user sees them (3-D for conv1d or an unbatched input).
struct ConvGeometry {
  Conv2dShape s;
  Shape input, weight, output;
  const char* op;  // the function the user called ("conv2d"), named by every error of its primitives
};
using Geometry = std::shared_ptr<const ConvGeometry>;

// A depthwise convolution (each input channel its own group, C_out a multiple of C_in) does kH·kW
// multiply-adds per output, too few for a GEMM's packing to pay: it runs on the direct kernels of
// depthwise_conv_kernels.cpp (unless a huge stride, dilation or padding would make their padded
// planes huge), everything else on the GEMM kernels of conv_kernels.cpp. Both tables have the same
// three functions.
template <typename T>
tg::detail::ConvKernels<T> kernels_for(const Conv2dShape& s) {
  if (s.groups > 1 && s.groups == s.C_in && tg::detail::depthwise_buffers_fit(s)) {
    const auto& direct = tg::detail::depthwise_conv_kernels_for_cpu().of<T>();
    return {direct.forward, direct.backward_input, direct.backward_weight};
  }
  return tg::detail::conv_kernels_for_cpu().of<T>();
}

// g [N, C, ...] (or unbatched [C, ...]) summed over everything but the channels: the bias gradient.
Tensor channel_sum(const Tensor& g, int64_t N, int64_t C) {
  const int64_t rest = N * C == 0 ? 0 : g.numel() / (N * C);
  return g.reshape({N, C, rest}).sum({0, 2});
}

Tensor forward_op(const Geometry& geo, const Tensor& x, const Tensor& w, const Tensor& bias, const char* name);
Tensor input_adjoint_op(const Geometry& geo, const Tensor& g, const Tensor& w, const Tensor& bias, const char* name);
Tensor weight_grad_op(const Geometry& geo, const Tensor& x, const Tensor& g);

// Records `backward` on `out` with inputs (a, b) or (a, b, bias) when any of them requires grad;
// an absent bias is not an input of the node.
template <typename Backward>
void record_conv(Tensor& out, const char* name, const Tensor& a, const Tensor& b, const Tensor& bias,
                 Backward&& backward) {
  if (bias.defined()) {
    if (autograd::needs_grad(a, b, bias)) autograd::record(out, name, {a, b, bias}, std::forward<Backward>(backward));
  } else if (autograd::needs_grad(a, b)) {
    autograd::record(out, name, {a, b}, std::forward<Backward>(backward));
  }
}

// y = conv(x, w) + bias.
Tensor forward_op(const Geometry& geo, const Tensor& x, const Tensor& w, const Tensor& bias, const char* name) {
  Tensor y = make_tensor(geo->output, x.dtype(), geo->op);
  tg::detail::dispatch_floating(geo->op, x.dtype(), [&]<typename T>() {
    kernels_for<T>(geo->s).forward(geo->s, x.data<T>(), w.data<T>(),
                                                       bias.defined() ? bias.data<T>() : nullptr, y.mutable_data<T>());
  });
  record_conv(y, name, x, w, bias,
              [geo, saved_x = autograd::SavedTensor(x), saved_w = autograd::SavedTensor(w), has_bias = bias.defined()](
                  const Tensor& grad, autograd::GradInputs& grads) {
                const Tensor x = grads.unpack(saved_x), w = grads.unpack(saved_w);
                if (grads.needed(0)) grads.set(0, input_adjoint_op(geo, grad, w, {}, "ConvolutionBackwardBackward"));
                if (grads.needed(1)) grads.set(1, weight_grad_op(geo, x, grad));
                if (has_bias && grads.needed(2)) grads.set(2, channel_sum(grad, geo->s.N, geo->s.C_out));
              });
  return y;
}

// gx = conv(·, w)ᵀ g + bias (per channel of gx).
Tensor input_adjoint_op(const Geometry& geo, const Tensor& g, const Tensor& w, const Tensor& bias, const char* name) {
  Tensor gx = make_tensor(geo->input, g.dtype(), geo->op);
  tg::detail::dispatch_floating(geo->op, g.dtype(), [&]<typename T>() {
    T* out = gx.mutable_data<T>();
    kernels_for<T>(geo->s).backward_input(geo->s, g.data<T>(), w.data<T>(), out);
    if (bias.defined()) {
      const T* b = bias.data<T>();
      const int64_t plane = geo->s.H * geo->s.W;
      for (int64_t n = 0; n < geo->s.N; ++n)
        for (int64_t c = 0; c < geo->s.C_in; ++c)
          for (T *p = out + (n * geo->s.C_in + c) * plane, *e = p + plane; p != e; ++p) *p += b[c];
    }
  });
  record_conv(gx, name, g, w, bias,
              [geo, saved_g = autograd::SavedTensor(g), saved_w = autograd::SavedTensor(w), has_bias = bias.defined()](
                  const Tensor& grad, autograd::GradInputs& grads) {
                const Tensor g = grads.unpack(saved_g), w = grads.unpack(saved_w);
                if (grads.needed(0)) grads.set(0, forward_op(geo, grad, w, {}, "ConvolutionBackwardBackward"));
                if (grads.needed(1)) grads.set(1, weight_grad_op(geo, grad, g));
                if (has_bias && grads.needed(2)) grads.set(2, channel_sum(grad, geo->s.N, geo->s.C_in));
              });
  return gx;
}

// gw = conv(x, ·)ᵀ g.
Tensor weight_grad_op(const Geometry& geo, const Tensor& x, const Tensor& g) {
  Tensor gw = make_tensor(geo->weight, x.dtype(), geo->op);
  tg::detail::dispatch_floating(geo->op, x.dtype(), [&]<typename T>() {
    kernels_for<T>(geo->s).backward_weight(geo->s, x.data<T>(), g.data<T>(), gw.mutable_data<T>());
  });
  record_conv(gw, "ConvolutionBackwardBackward", x, g, Tensor(),
              [geo, saved_x = autograd::SavedTensor(x), saved_g = autograd::SavedTensor(g)](
                  const Tensor& grad, autograd::GradInputs& grads) {
                const Tensor x = grads.unpack(saved_x), g = grads.unpack(saved_g);
                if (grads.needed(0)) grads.set(0, input_adjoint_op(geo, g, grad, {}, "ConvolutionBackwardBackward"));
                if (grads.needed(1)) grads.set(1, forward_op(geo, x, grad, {}, "ConvolutionBackwardBackward"));
              });
  return gw;
}

std::string tuple_text(const int64_t* values, size_t D) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < D; ++i) out << (i ? ", " : "") << values[i];
  out << ")";
  return out.str();
}

// What conv1d/conv2d/conv_transpose2d share: the checks of the tensors themselves.
void check_tensors(const char* op, size_t D, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check(input.defined() && weight.defined(), op, "undefined input or weight");
  const int64_t batched = static_cast<int64_t>(D) + 2;
  check(input.dim() == batched - 1 || input.dim() == batched, op, "expected ", batched - 1, "D (unbatched) or ",
        batched, "D (batched) input, got input of shape ", input.shape());
  check(weight.dim() == batched, op, "expected a ", batched, "D weight, got weight of shape ", weight.shape());
  check(is_floating_point(input.dtype()), op, "expected a float32 or float64 input, got ", input.dtype(),
        tg::detail::cast_advice<tg::detail::FloatingDTypes>(input.dtype()));
  check(weight.dtype() == input.dtype(), op, "dtypes differ: input ", input.dtype(), ", weight ", weight.dtype());
  if (bias.defined())
    check(bias.dtype() == input.dtype(), op, "dtypes differ: input ", input.dtype(), ", bias ", bias.dtype());
}

// The sizes of a convolution (not transposed) of D = 1 or 2 spatial dims; fills geo.
template <size_t D>
Geometry conv_geometry(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                       const ExpandingArray<D>& stride, const ConvPadding<D>& padding,
                       const ExpandingArray<D>& dilation, int64_t groups) {
  check_tensors(op, D, input, weight, bias);
  const bool batched = input.dim() == static_cast<int64_t>(D) + 2;
  const int64_t first = batched ? 1 : 0;  // input's channel dim
  check(groups > 0, op, "non-positive groups is not supported, got groups = ", groups);
  for (size_t i = 0; i < D; ++i) {
    check(stride[i] > 0, op, "non-positive stride is not supported, got stride = ", tuple_text(stride.values().data(), D));
    check(dilation[i] > 0, op, "dilation should be greater than zero, got dilation = ",
          tuple_text(dilation.values().data(), D));
    check(padding.is_same() || padding.is_valid() || padding.values()[i] >= 0, op,
          "negative padding is not supported, got padding = ", tuple_text(padding.values().values().data(), D));
  }
  if (padding.is_same())
    for (size_t i = 0; i < D; ++i)
      check(stride[i] == 1, op, "padding='same' is not supported for strided convolutions, got stride = ",
            tuple_text(stride.values().data(), D));
  const int64_t C_in = input.size(first), C_out = weight.size(0);
  check(C_out % groups == 0, op, "given groups = ", groups, ", expected weight to be divisible by ", groups,
        " at dim 0, but got weight of shape ", weight.shape());
  const int64_t expected_in = tg::detail::checked_mul(weight.size(1), groups, op, "groups = ", groups,
                                                      " is too large for a weight of shape ", weight.shape());
  check(expected_in == C_in, op, "given groups = ", groups, ", weight of shape ", weight.shape(), " expects input ",
        input.shape(), " to have ", expected_in, " channels, but got ", C_in, " channels");
  if (bias.defined())
    check(bias.shape() == Shape{C_out}, op, "expected a bias of shape [", C_out, "] for a weight of shape ",
          weight.shape(), ", got ", bias.shape());

  // Per spatial dim: the dilated kernel's span, begin padding, the padded input and the output size
  // (with "same", an odd total puts the extra zero at the end: the output is as long as the input,
  // reads past the end are zeros). Checked arithmetic: sizes near 2^63 are refused, not wrapped.
  std::array<int64_t, D> in{}, k{}, pad{}, out{}, padded{}, spans{};
  bool fits = true;
  for (size_t i = 0; i < D; ++i) {
    in[i] = input.size(first + 1 + static_cast<int64_t>(i));
    k[i] = weight.size(2 + static_cast<int64_t>(i));
    check(k[i] > 0, op, "kernel size should be greater than zero, got weight of shape ", weight.shape());
    const std::string dilation_text = tuple_text(dilation.values().data(), D);
    const int64_t reach = tg::detail::checked_mul(dilation[i], k[i] - 1, op, "dilation = ", dilation_text,
                                                  " is too large for a weight of shape ", weight.shape());
    spans[i] = tg::detail::checked_add(reach, 1, op, "dilation = ", dilation_text,
                                       " is too large for a weight of shape ", weight.shape());
    if (padding.is_same()) {
      pad[i] = reach / 2;
      padded[i] = tg::detail::checked_add(in[i], reach, op, "dilation = ", dilation_text,
                                          " with padding='same' is too large for input ", input.shape(),
                                          " and weight ", weight.shape());
      out[i] = in[i];
    } else {
      pad[i] = padding.is_valid() ? 0 : padding.values()[i];
      const std::string padding_text = tuple_text(padding.values().values().data(), D);
      padded[i] = tg::detail::checked_add(
          in[i], tg::detail::checked_mul(2, pad[i], op, "padding = ", padding_text, " is too large"), op,
          "padding = ", padding_text, " is too large for input ", input.shape());
      out[i] = padded[i] < spans[i] ? 0 : (padded[i] - spans[i]) / stride[i] + 1;
    }
    fits = fits && padded[i] >= spans[i];
  }
  check(fits, op, "calculated padded input size per channel: ", tuple_text(padded.data(), D),
        ", kernel size (dilated): ", tuple_text(spans.data(), D),
        ": the kernel can't be greater than the padded input (input ", input.shape(), ", weight ", weight.shape(), ")");
  auto geo = std::make_shared<ConvGeometry>();
  Conv2dShape& s = geo->s;
  s.N = batched ? input.size(0) : 1;
  s.C_in = C_in;
  s.C_out = C_out;
  s.groups = groups;
  // A 1-D convolution is the 2-D one over a single row.
  const size_t h = D == 2 ? 0 : D;  // index of the height in the arrays, D meaning "absent"
  auto at = [](const auto& values, size_t i, int64_t absent) { return i < D ? values[i] : absent; };
  s.H = at(in, h, 1);
  s.W = in[D - 1];
  s.kH = at(k, h, 1);
  s.kW = k[D - 1];
  s.stride_h = D == 2 ? stride[0] : 1;
  s.stride_w = stride[D - 1];
  s.pad_h = at(pad, h, 0);
  s.pad_w = pad[D - 1];
  s.dilation_h = D == 2 ? dilation[0] : 1;
  s.dilation_w = dilation[D - 1];
  s.H_out = at(out, h, 1);
  s.W_out = out[D - 1];
  drop_unused_strides(s);
  geo->input = input.shape();
  geo->weight = weight.shape();
  geo->op = op;
  geo->output = batched ? Shape{s.N, C_out} : Shape{C_out};
  for (size_t i = 0; i < D; ++i) geo->output.push_back(out[i]);
  return geo;
}

template <size_t D>
Tensor convolution(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const ExpandingArray<D>& stride, const ConvPadding<D>& padding, const ExpandingArray<D>& dilation,
                   int64_t groups) try {
  if (tg::detail::autocast_enabled())  // autocast's lower-precision list
    return tg::detail::autocast_to_lower([&](const Tensor& x, const Tensor& w, const Tensor& b) {
      return convolution<D>(op, x, w, b, stride, padding, dilation, groups);
    }, input, weight, bias);
  if (tg::detail::all_bfloat16(input, weight, bias))  // in float32, rounded once
    return tg::detail::in_float32_on_bf16_products(tg::detail::Bf16Products::factors_exact, [&](const Tensor& x, const Tensor& w, const Tensor& b) {
      return convolution<D>(op, x, w, b, stride, padding, dilation, groups);
    }, input, weight, bias);
  const Geometry geo = conv_geometry<D>(op, input, weight, bias, stride, padding, dilation, groups);
  return forward_op(geo, input, weight, bias, "ConvolutionBackward");
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(op);
}

// conv_transpose2d's output size along one dim, (in − 1)·stride − 2·pad + dilation·(k − 1) +
// output_padding + 1: the input size of the convolution it is the adjoint of. Every step is
// checked, and so is that size padded (its sum before the − 2·pad), as conv_geometry checks it.
int64_t transposed_size(int64_t in, int64_t stride, int64_t pad, int64_t dilation, int64_t k,
                        int64_t output_padding, const Tensor& input, const Tensor& weight) {
  const auto check_fits = [&](bool overflow) {
    check(!overflow, "conv_transpose2d", "stride = ", stride, ", padding = ", pad, ", dilation = ", dilation,
          " and output_padding = ", output_padding, " make the output size of input ", input.shape(), " and weight ",
          weight.shape(), " overflow int64");
  };
  int64_t padded = 0, term = 0;  // in ≥ 0 (a tensor's size) and k ≥ 1: in − 1 and k − 1 cannot overflow
  check_fits(__builtin_mul_overflow(in - 1, stride, &padded));
  check_fits(__builtin_mul_overflow(dilation, k - 1, &term) || __builtin_add_overflow(padded, term, &padded));
  check_fits(__builtin_add_overflow(padded, output_padding, &padded) || __builtin_add_overflow(padded, 1, &padded));
  check_fits(__builtin_mul_overflow(2, pad, &term) || __builtin_sub_overflow(padded, term, &padded));
  return padded;
}

}  // namespace

namespace functional {

Tensor conv1d(const Tensor& input, const Tensor& weight, const Conv1dFuncOptions& options) {
  return convolution<1>("conv1d", input, weight, options.bias, options.stride, options.padding, options.dilation,
                        options.groups);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& options) {
  return convolution<2>("conv2d", input, weight, options.bias, options.stride, options.padding, options.dilation,
                        options.groups);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const ConvTranspose2dFuncOptions& options) try {
  const char* op = "conv_transpose2d";
  if (tg::detail::autocast_enabled()) {  // autocast's float32 list (PyTorch 1.13's CPU autocast)
    ConvTranspose2dFuncOptions wide = options;
    wide.bias = tg::detail::widened(options.bias);
    return tg::detail::autocast_to_float32([&](const Tensor& x, const Tensor& w) { return conv_transpose2d(x, w, wide); },
                                           input, weight);
  }
  check_tensors(op, 2, input, weight, options.bias);
  const bool batched = input.dim() == 4;
  const int64_t first = batched ? 1 : 0;
  const int64_t groups = options.groups;
  check(groups > 0, op, "non-positive groups is not supported, got groups = ", groups);
  for (size_t i = 0; i < 2; ++i) {
    check(options.stride[i] > 0, op, "non-positive stride is not supported, got stride = ",
          tuple_text(options.stride.values().data(), 2));
    check(options.dilation[i] > 0, op, "dilation should be greater than zero, got dilation = ",
          tuple_text(options.dilation.values().data(), 2));
    check(options.padding[i] >= 0, op, "negative padding is not supported, got padding = ",
          tuple_text(options.padding.values().data(), 2));
    check(options.output_padding[i] >= 0 &&
              (options.output_padding[i] < options.stride[i] || options.output_padding[i] < options.dilation[i]),
          op, "output padding must be smaller than either stride or dilation, got output_padding = ",
          tuple_text(options.output_padding.values().data(), 2), ", stride = ",
          tuple_text(options.stride.values().data(), 2), ", dilation = ",
          tuple_text(options.dilation.values().data(), 2));
  }
  const int64_t C_in = input.size(first);
  check(weight.size(0) == C_in, op, "weight of shape ", weight.shape(), " expects input ", input.shape(), " to have ",
        weight.size(0), " channels, but got ", C_in, " channels");
  check(C_in % groups == 0, op, "given groups = ", groups, ", expected weight to be divisible by ", groups,
        " at dim 0, but got weight of shape ", weight.shape());
  const int64_t C_out = tg::detail::checked_mul(weight.size(1), groups, op, "groups = ", groups,
                                                " is too large for a weight of shape ", weight.shape());
  if (options.bias.defined())
    check(options.bias.shape() == Shape{C_out}, op, "expected a bias of shape [", C_out, "] for a weight of shape ",
          weight.shape(), " and groups = ", groups, ", got ", options.bias.shape());

  auto geo = std::make_shared<ConvGeometry>();
  Conv2dShape& s = geo->s;
  // The convolution this one is the input-adjoint of: from the output [N, C_out, H_o, W_o] back to
  // the input [N, C_in, H, W].
  s.N = batched ? input.size(0) : 1;
  s.C_in = C_out;
  s.C_out = C_in;
  s.groups = groups;
  s.kH = weight.size(2);
  s.kW = weight.size(3);
  s.stride_h = options.stride[0];
  s.stride_w = options.stride[1];
  s.pad_h = options.padding[0];
  s.pad_w = options.padding[1];
  s.dilation_h = options.dilation[0];
  s.dilation_w = options.dilation[1];
  s.H_out = input.size(first + 1);
  s.W_out = input.size(first + 2);
  check(s.kH > 0 && s.kW > 0, op, "kernel size should be greater than zero, got weight of shape ", weight.shape());
  s.H = transposed_size(s.H_out, s.stride_h, s.pad_h, s.dilation_h, s.kH, options.output_padding[0], input, weight);
  s.W = transposed_size(s.W_out, s.stride_w, s.pad_w, s.dilation_w, s.kW, options.output_padding[1], input, weight);
  check(s.H > 0 && s.W > 0, op, "the output size (", s.H, ", ", s.W, ") of input ", input.shape(), " and weight ",
        weight.shape(), " with padding = ", tuple_text(options.padding.values().data(), 2), " is too small");
  drop_unused_strides(s);  // after the sizes, whose errors name the strides passed
  geo->input = batched ? Shape{s.N, C_out, s.H, s.W} : Shape{C_out, s.H, s.W};
  geo->weight = weight.shape();
  geo->output = input.shape();
  geo->op = op;
  return input_adjoint_op(geo, input, weight, options.bias, "ConvolutionBackward");
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("conv_transpose2d");
}

}  // namespace functional

namespace {

void check_channels(const char* op, int64_t in_channels, int64_t out_channels, int64_t groups) {
  check(groups > 0, op, "groups must be a positive integer, got ", groups);
  check(in_channels > 0 && out_channels > 0, op, "expected positive channel counts, got in_channels = ", in_channels,
        ", out_channels = ", out_channels);
  check(in_channels % groups == 0, op, "in_channels must be divisible by groups, got in_channels = ", in_channels,
        ", groups = ", groups);
  check(out_channels % groups == 0, op, "out_channels must be divisible by groups, got out_channels = ",
        out_channels, ", groups = ", groups);
}

// An uninitialised float32 parameter of module `op` (`what`: "weight" or "bias"): a shape with too
// many elements, or too little memory for it, is a tg::Error naming the module and the parameter.
Tensor empty_parameter(const char* op, const char* what, const Shape& shape) {
  try {
    return make_tensor(shape, kFloat32, op);
  } catch (const tg::detail::OutOfMemoryError& error) {
    throw tg::detail::OutOfMemoryError(op, tg::detail::concat("cannot allocate ", what, " ", shape, ": ",
                                                              error.what_failed()));
  }
}

// PyTorch's _ConvNd.reset_parameters: the weight [out, in/groups, k...] by kaiming_uniform_(a = √5)
// (bound 1/√fan_in up to rounding, through nn::init with PyTorch's arithmetic so that the float32
// draws are PyTorch's bits), after checking the module's arguments.
template <size_t D>
Tensor conv_weight(const char* op, int64_t in_channels, int64_t out_channels, const ExpandingArray<D>& k,
                   int64_t groups, const std::string& padding_mode) try {
  check_channels(op, in_channels, out_channels, groups);
  check(padding_mode == "zeros" || padding_mode == "reflect" || padding_mode == "replicate" ||
            padding_mode == "circular",
        op, "padding_mode must be one of 'zeros', 'reflect', 'replicate' or 'circular', got '", padding_mode, "'");
  Shape shape{out_channels, in_channels / groups};
  for (size_t i = 0; i < D; ++i) {
    check(k[i] > 0, op, "expected a positive kernel_size, got ", tuple_text(k.values().data(), D));
    shape.push_back(k[i]);
  }
  Tensor values = empty_parameter(op, "weight", shape);
  return init::kaiming_uniform_(values, std::sqrt(5.0));
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(op);  // the initialiser's draws, too, belong to the module
}

// Then the bias [out] by U(±1/√fan_in), fan_in = weight.size(1) · Πk.
Tensor conv_bias(const char* op, const Shape& weight_shape, int64_t out) try {
  int64_t fan_in = 1;  // a product of the weight's dims: it fits
  for (size_t i = 1; i < weight_shape.size(); ++i) fan_in *= weight_shape[i];
  Tensor values = empty_parameter(op, "bias", {out});
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  return init::uniform_(values, -bound, bound);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as(op);
}

}  // namespace

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size, const Conv1dOptions& options)
    : weight("Conv1d.weight", conv_weight("Conv1d", in_channels, out_channels, kernel_size, options.groups,
                                          options.padding_mode)),
      bias("Conv1d.bias", options.bias ? conv_bias("Conv1d", weight.shape(), out_channels) : Tensor()),
      options(options),
      kernel_size(kernel_size) {}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size, const Conv2dOptions& options)
    : weight("Conv2d.weight", conv_weight("Conv2d", in_channels, out_channels, kernel_size, options.groups,
                                          options.padding_mode)),
      bias("Conv2d.bias", options.bias ? conv_bias("Conv2d", weight.shape(), out_channels) : Tensor()),
      options(options),
      kernel_size(kernel_size) {}

// The weight is [in, out/groups, kH, kW]: conv_weight's shape with the channel counts swapped.
ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
                                 const ConvTranspose2dOptions& options)
    : weight("ConvTranspose2d.weight",
             conv_weight("ConvTranspose2d", out_channels, in_channels, kernel_size, options.groups, "zeros")),
      bias("ConvTranspose2d.bias", options.bias ? conv_bias("ConvTranspose2d", weight.shape(), out_channels) : Tensor()),
      options(options),
      kernel_size(kernel_size) {}

namespace {

// padding_mode other than zeros: the input padded by F::pad (reflect, replicate, circular), then a
// convolution without padding, as PyTorch's _conv_forward. PyTorch's
// _reversed_padding_repeated_twice: per dim from the last, (begin, end); "same" puts an odd
// total's extra element at the end.
template <size_t D>
std::vector<int64_t> mode_padding(const char* op, const ConvPadding<D>& padding, const ExpandingArray<D>& dilation,
                                  const ExpandingArray<D>& k) {
  std::vector<int64_t> pad;
  for (size_t i = D; i-- > 0;) {
    if (padding.is_same()) {
      const int64_t total = tg::detail::checked_mul(dilation[i], k[i] - 1, op, "dilation = ", dilation.vec(),
                                                    " is too large for kernel_size ", k.vec());
      pad.push_back(total / 2);
      pad.push_back(total - total / 2);
    } else {
      const int64_t p = padding.is_valid() ? 0 : padding.values()[i];
      pad.push_back(p);
      pad.push_back(p);
    }
  }
  return pad;
}

// A Conv1d/Conv2d module's forward: padding_mode "zeros" pads inside the convolution; any other
// mode pads the input with F::pad in that mode, then convolves without padding (PyTorch's
// _conv_forward). FuncOptions is Conv1dFuncOptions or Conv2dFuncOptions, `conv` F::conv1d or conv2d,
// `op` the module's name.
template <size_t D, typename FuncOptions, typename Options, typename Conv>
Tensor conv_module_forward(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Options& options,
                           const ExpandingArray<D>& kernel_size, Conv conv) {
  FuncOptions func{.bias = bias, .stride = options.stride, .padding = options.padding,
                   .dilation = options.dilation, .groups = options.groups};
  if (options.padding_mode == "zeros") return conv(x, weight, func);
  const Tensor padded = functional::pad(x, mode_padding<D>(op, options.padding, options.dilation, kernel_size),
                                        {.mode = options.padding_mode});
  func.padding = 0;
  return conv(padded, weight, func);
}

}  // namespace

Tensor Conv1d::forward(const Tensor& x) {
  return conv_module_forward<1, functional::Conv1dFuncOptions>("Conv1d", x, weight, bias, options, kernel_size,
                                                                functional::conv1d);
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv_module_forward<2, functional::Conv2dFuncOptions>("Conv2d", x, weight, bias, options, kernel_size,
                                                                functional::conv2d);
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return functional::conv_transpose2d(x, weight,
                                      {.bias = bias, .stride = options.stride, .padding = options.padding,
                                       .output_padding = options.output_padding, .groups = options.groups,
                                       .dilation = options.dilation});
}

void Conv1d::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

void Conv2d::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

void ConvTranspose2d::members(Members& m) {
  m.parameter("weight", weight);
  m.parameter("bias", bias);
}

}  // namespace tg::nn
