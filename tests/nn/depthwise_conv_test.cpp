// The depthwise convolution's direct kernels (nn/src/depthwise_conv_kernels.cpp) against naive loops
// over the definition: forward and input gradient bit for bit (the loops add the same products in the
// same order), the weight gradient within float rounding of a double sum; and all three bitwise
// the same at every vector level and thread count.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "depthwise_conv_kernels.hpp"
#include "support/vector_isa_levels.hpp"

using tg::detail::Conv2dShape;

namespace {

struct Case {
  std::string name;
  int64_t N, C, multiplier, H, W, kH, kW, sh, sw, ph, pw, dh, dw;
  bool bias;
};

Conv2dShape shape_of(const Case& c) {
  Conv2dShape s{};
  s.N = c.N, s.C_in = c.C, s.H = c.H, s.W = c.W;
  s.C_out = c.C * c.multiplier, s.kH = c.kH, s.kW = c.kW;
  s.stride_h = c.sh, s.stride_w = c.sw, s.pad_h = c.ph, s.pad_w = c.pw, s.dilation_h = c.dh, s.dilation_w = c.dw;
  s.groups = c.C;
  // PyTorch's output size: ⌊(H + 2p − d·(k − 1) − 1) / s⌋ + 1.
  s.H_out = (c.H + 2 * c.ph - c.dh * (c.kH - 1) - 1) / c.sh + 1;
  s.W_out = (c.W + 2 * c.pw - c.dw * (c.kW - 1) - 1) / c.sw + 1;
  return s;
}

template <typename T>
std::vector<T> uniform(int64_t n, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<double> draw(-1.0, 1.0);
  std::vector<T> values(static_cast<size_t>(n));
  for (T& v : values) v = static_cast<T>(draw(generator));
  return values;
}

template <typename T>
std::vector<unsigned char> bytes(const std::vector<T>& v) {
  std::vector<unsigned char> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// y[n, oc, oh, ow] = (Σ_{kh, kw} w[oc, kh, kw]·x[n, c, ih, iw] over the reads inside the input) + bias.
template <typename T>
std::vector<T> naive_forward(const Conv2dShape& s, const std::vector<T>& x, const std::vector<T>& w, const T* bias) {
  const int64_t m = s.C_out / s.C_in;
  std::vector<T> y(static_cast<size_t>(s.N * s.C_out * s.H_out * s.W_out));
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t oc = 0; oc < s.C_out; ++oc)
      for (int64_t oh = 0; oh < s.H_out; ++oh)
        for (int64_t ow = 0; ow < s.W_out; ++ow) {
          T acc = 0;
          for (int64_t kh = 0; kh < s.kH; ++kh)
            for (int64_t kw = 0; kw < s.kW; ++kw) {
              const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
              const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
              if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
              acc += w[(oc * s.kH + kh) * s.kW + kw] * x[((n * s.C_in + oc / m) * s.H + ih) * s.W + iw];
            }
          y[((n * s.C_out + oc) * s.H_out + oh) * s.W_out + ow] = acc + (bias ? bias[oc] : T(0));
        }
  return y;
}

// gx[n, c, ih, iw] = Σ_j Σ_{kh, kw} w[c·m + j, kh, kw]·gy[n, c·m + j, oh, ow] over the outputs that read
// (ih, iw): oh·sh = ih + ph − kh·dh, likewise ow.
template <typename T>
std::vector<T> naive_backward_input(const Conv2dShape& s, const std::vector<T>& gy, const std::vector<T>& w) {
  const int64_t m = s.C_out / s.C_in;
  std::vector<T> gx(static_cast<size_t>(s.N * s.C_in * s.H * s.W));
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t c = 0; c < s.C_in; ++c)
      for (int64_t ih = 0; ih < s.H; ++ih)
        for (int64_t iw = 0; iw < s.W; ++iw) {
          T acc = 0;
          for (int64_t j = 0; j < m; ++j)
            for (int64_t kh = 0; kh < s.kH; ++kh)
              for (int64_t kw = 0; kw < s.kW; ++kw) {
                const int64_t row = ih + s.pad_h - kh * s.dilation_h, col = iw + s.pad_w - kw * s.dilation_w;
                if (row < 0 || col < 0 || row % s.stride_h != 0 || col % s.stride_w != 0) continue;
                const int64_t oh = row / s.stride_h, ow = col / s.stride_w;
                if (oh >= s.H_out || ow >= s.W_out) continue;
                const int64_t oc = c * m + j;
                acc += w[(oc * s.kH + kh) * s.kW + kw] * gy[((n * s.C_out + oc) * s.H_out + oh) * s.W_out + ow];
              }
          gx[((n * s.C_in + c) * s.H + ih) * s.W + iw] = acc;
        }
  return gx;
}

// gw[oc, kh, kw] = Σ_{n, oh, ow} gy·x in double, and Σ|gy·x| (the scale of its rounding).
template <typename T>
std::pair<std::vector<double>, std::vector<double>> naive_backward_weight(const Conv2dShape& s, const std::vector<T>& x,
                                                                          const std::vector<T>& gy) {
  const int64_t m = s.C_out / s.C_in;
  std::vector<double> gw(static_cast<size_t>(s.C_out * s.kH * s.kW)), magnitude(gw.size());
  for (int64_t oc = 0; oc < s.C_out; ++oc)
    for (int64_t kh = 0; kh < s.kH; ++kh)
      for (int64_t kw = 0; kw < s.kW; ++kw) {
        double sum = 0, abs_sum = 0;
        for (int64_t n = 0; n < s.N; ++n)
          for (int64_t oh = 0; oh < s.H_out; ++oh)
            for (int64_t ow = 0; ow < s.W_out; ++ow) {
              const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
              const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
              if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
              const double term = static_cast<double>(gy[((n * s.C_out + oc) * s.H_out + oh) * s.W_out + ow]) *
                                  static_cast<double>(x[((n * s.C_in + oc / m) * s.H + ih) * s.W + iw]);
              sum += term;
              abs_sum += std::fabs(term);
            }
        gw[(oc * s.kH + kh) * s.kW + kw] = sum;
        magnitude[(oc * s.kH + kh) * s.kW + kw] = abs_sum;
      }
  return {gw, magnitude};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // name, N, C, m, H, W, kH, kW, sh, sw, ph, pw, dh, dw, bias
      {"3x3 pad 1, rows shorter than a vector", 2, 3, 1, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, true},
      {"3x3 pad 1, 28x28, several chunks", 4, 16, 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, false},
      {"3x3 no padding, wide rows", 1, 2, 1, 5, 70, 3, 3, 1, 1, 0, 0, 1, 1, true},
      {"3x3 stride 2, multiplier 2", 2, 3, 2, 9, 19, 3, 3, 2, 2, 1, 1, 1, 1, true},
      {"3x3 dilation 2 pad 2", 2, 2, 1, 12, 23, 3, 3, 1, 1, 2, 2, 2, 2, false},
      {"3x2, strides (2, 1), dilation (1, 2), multiplier 2", 2, 2, 2, 8, 21, 3, 2, 2, 1, 1, 0, 1, 2, true},
      {"5x3, strides (1, 3), padding past the kernel, multiplier 3", 1, 3, 3, 11, 37, 5, 3, 1, 3, 2, 4, 2, 1, true},
      {"1x1 stride 2", 2, 4, 1, 6, 40, 1, 1, 2, 2, 0, 0, 1, 1, true},
      {"7x7 pad 3, stride 2", 2, 2, 1, 17, 33, 7, 7, 2, 2, 3, 3, 1, 1, false},
  };
  return all;
}

template <typename T>
void check_case(const Case& c) {
  CAPTURE(c.name, sizeof(T));
  const Conv2dShape s = shape_of(c);
  const std::vector<T> x = uniform<T>(s.N * s.C_in * s.H * s.W, 1);
  const std::vector<T> w = uniform<T>(s.C_out * s.kH * s.kW, 2);
  const std::vector<T> bias = uniform<T>(s.C_out, 3);
  const std::vector<T> gy = uniform<T>(s.N * s.C_out * s.H_out * s.W_out, 4);
  const T* bias_data = c.bias ? bias.data() : nullptr;

  const auto run = [&] {
    const auto& kernels = tg::detail::depthwise_conv_kernels_for_cpu().of<T>();
    // Filled with NaN: every element must be written.
    std::vector<T> y(gy.size(), NAN), gx(x.size(), NAN), gw(w.size(), NAN);
    kernels.forward(s, x.data(), w.data(), bias_data, y.data());
    kernels.backward_input(s, gy.data(), w.data(), gx.data());
    kernels.backward_weight(s, x.data(), gy.data(), gw.data());
    return std::vector{y, gx, gw};
  };
  const std::vector<std::vector<T>> result = run();
  CHECK(bytes(result[0]) == bytes(naive_forward(s, x, w, bias_data)));
  CHECK(bytes(result[1]) == bytes(naive_backward_input(s, gy, w)));
  const auto [gw, magnitude] = naive_backward_weight(s, x, gy);
  // Rounding bound: each lane sums at most H_out·⌈W_out / L⌉ terms of an image in T (L = 64 bytes of
  // lanes), then images and lanes in double.
  const int64_t lanes = 64 / static_cast<int64_t>(sizeof(T));
  const int64_t terms = s.H_out * ((s.W_out + lanes - 1) / lanes);
  const double tolerance = static_cast<double>(terms + s.N + 8) * std::numeric_limits<T>::epsilon() / 2;
  for (size_t i = 0; i < gw.size(); ++i) {
    CAPTURE(i, gw[i], result[2][i]);
    REQUIRE(std::fabs(static_cast<double>(result[2][i]) - gw[i]) <= tolerance * magnitude[i] + 1e-300);
  }
  tg::testing::require_same_at_every_level_and_thread_count([&] {
    const auto values = run();
    return std::vector{bytes(values[0]), bytes(values[1]), bytes(values[2])};
  });
}

}  // namespace

TEST_CASE("depthwise conv kernels equal naive loops, at every level and thread count", "[conv][depthwise][vector_isa]") {
  for (const Case& c : cases()) {
    check_case<float>(c);
    check_case<double>(c);
  }
}

TEST_CASE("depthwise conv kernels: a batch of none leaves outputs empty and zeroes the weight gradient",
          "[conv][depthwise]") {
  Case c{"empty batch", 0, 3, 2, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, true};
  const Conv2dShape s = shape_of(c);
  std::vector<float> w(static_cast<size_t>(s.C_out * 9), 1.0f), gw(w.size(), NAN);
  const auto& kernels = tg::detail::depthwise_conv_kernels_for_cpu().f32;
  kernels.forward(s, nullptr, w.data(), nullptr, nullptr);
  kernels.backward_input(s, nullptr, w.data(), nullptr);
  kernels.backward_weight(s, nullptr, nullptr, gw.data());
  CHECK(gw == std::vector<float>(gw.size(), 0.0f));
}
