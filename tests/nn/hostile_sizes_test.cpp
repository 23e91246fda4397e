// Hostile sizes (issue 38): every integer size argument of the convolutions, the poolings, F::pad,
// interpolate, their modules and RandomCrop, swept over 0, −1, 2^31, 2^62, INT64_MAX and INT64_MIN
// one argument at a time (and all at once). Each call must either return the shape PyTorch's
// formula gives — computed here in exact 128-bit arithmetic, so that no reference wraps around — or
// throw tg::Error naming the function called; never crash, never return a shape where the formula
// says PyTorch refuses. A hang fails through ctest's timeout (60 s per test case, CMakeLists.txt).
//
// The executable's operator new (tests/fault/failing_allocator.cpp) refuses any allocation above
// 256 MiB, as a small machine would: a legal but huge output (padding 2^31) is then a quick
// out-of-memory tg::Error instead of gigabytes filled on a shared machine.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <tapegrad/tapegrad.hpp>

#include "fault/failing_allocator.hpp"

namespace F = tg::nn::functional;
using tg::Shape;
using tg::Tensor;
using Catch::Matchers::StartsWith;

namespace {

__extension__ typedef __int128 Wide;  // exact for sums and products of a few int64 values

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
const std::vector<int64_t> kHostile{0, -1, int64_t{1} << 31, int64_t{1} << 62, kMax, kMin};

// The limit for the whole executable, set before the first test case runs.
const bool kCapped = [] {
  tg::fault::refuse_allocations_over(size_t{256} << 20);
  return true;
}();

// The shape a reference formula gives, or nullopt where PyTorch refuses the arguments.
using Expected = std::optional<std::vector<Wide>>;

std::string text(const Expected& expected) {
  if (!expected) return "an error";
  std::string out = "[";
  for (size_t i = 0; i < expected->size(); ++i)
    out += (i ? ", " : "") + std::to_string(static_cast<long double>((*expected)[i]));
  return out + "]";
}

// Runs `call`: it returns a tensor of the expected shape, or throws tg::Error whose message starts
// with one of `names` and ":". Any other exception fails the test (Catch reports it).
template <typename Call>
void expect_shape_or_error(const std::vector<std::string>& names, const Expected& expected, const Call& call) {
  INFO("expected " << text(expected));
  try {
    const Tensor y = call();
    INFO("returned a tensor of shape " << ::Catch::Detail::stringify(y.shape()));
    REQUIRE(expected.has_value());
    REQUIRE(static_cast<size_t>(y.dim()) == expected->size());
    for (size_t d = 0; d < expected->size(); ++d) CHECK(static_cast<Wide>(y.size(static_cast<int64_t>(d))) == (*expected)[d]);
  } catch (const tg::Error& error) {
    const std::string message = error.what();
    INFO("threw " << message);
    bool named = false;
    for (const std::string& name : names) named = named || message.rfind(name + ": ", 0) == 0;
    CHECK(named);
  }
}

// --- references: PyTorch's shape formulas, in exact arithmetic -------------------------------

// One spatial dim of a convolution: ⌊(in + 2p − d(k − 1) − 1) / s⌋ + 1, or nullopt (PyTorch refuses).
std::optional<Wide> conv_size(Wide in, Wide k, Wide pad, Wide stride, Wide dilation) {
  if (stride <= 0 || dilation <= 0 || pad < 0) return std::nullopt;
  const Wide padded = in + 2 * pad, span = dilation * (k - 1) + 1;
  if (padded < span) return std::nullopt;
  return (padded - span) / stride + 1;
}

// conv_transpose2d: (in − 1)s − 2p + d(k − 1) + output_padding + 1, which must be positive.
std::optional<Wide> transposed_size(Wide in, Wide k, Wide pad, Wide stride, Wide dilation, Wide output_padding) {
  if (stride <= 0 || dilation <= 0 || pad < 0) return std::nullopt;
  if (output_padding < 0 || (output_padding >= stride && output_padding >= dilation)) return std::nullopt;
  const Wide out = (in - 1) * stride - 2 * pad + dilation * (k - 1) + output_padding + 1;
  if (out <= 0) return std::nullopt;
  return out;
}

// torch's pooling_output_shape, with max/avg pooling's argument checks.
std::optional<Wide> pool_size(Wide in, Wide k, Wide pad, Wide stride, Wide dilation, bool ceil_mode) {
  if (k <= 0 || stride <= 0 || dilation <= 0 || pad < 0 || pad > k / 2) return std::nullopt;
  const Wide numerator = in + 2 * pad - dilation * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  Wide out = (numerator >= 0 ? numerator / stride : -((-numerator + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  if (out <= 0) return std::nullopt;
  return out;
}

// The values an argument is swept over, with the rest at their base: per argument each hostile
// value, then every argument at the same hostile value.
std::vector<std::vector<int64_t>> sweep(const std::vector<int64_t>& base) {
  std::vector<std::vector<int64_t>> cases;
  for (size_t i = 0; i < base.size(); ++i)
    for (int64_t value : kHostile) {
      std::vector<int64_t> c = base;
      c[i] = value;
      cases.push_back(c);
    }
  for (int64_t value : kHostile) cases.emplace_back(base.size(), value);
  return cases;
}

std::string describe(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += std::to_string(v) + " ";
  return out;
}

// F::pad of one dim of size n by (before, after): negative pads crop (at most n together), then
// each mode's limits (the rules of padding.cpp's header, PyTorch's).
Expected pad_expected(const Shape& shape, int64_t before, int64_t after, const std::string& mode) {
  const Wide n = shape.back(), b = before, a = after;
  const Wide cropped = n + std::min<Wide>(b, 0) + std::min<Wide>(a, 0);
  if (b < -n || a < -n || cropped < 0) return std::nullopt;
  const Wide out = n + b + a, most = std::max<Wide>({b, a, 0});
  if (mode != "constant" && n == 0) return std::nullopt;
  if (mode == "reflect" && !(most < cropped || most == 0)) return std::nullopt;
  if (mode == "circular" && most > cropped) return std::nullopt;
  if (mode == "replicate" && !(cropped > 0 || out == 0)) return std::nullopt;
  std::vector<Wide> result(shape.begin(), shape.end());
  result.back() = out;
  return result;
}

// --- convolutions ----------------------------------------------------------------------------

// conv2d on x [1, 2, 5, 5] with a weight [2, 2/groups, 3, 3] (groups 2: the depthwise kernels;
// 1: the GEMM ones): c = {groups, stride h, stride w, pad h, pad w, dilation h, dilation w}.
Expected conv2d_expected(const Shape& x, const Shape& w, const std::vector<int64_t>& c) {
  const Wide groups = c[0];
  if (groups <= 0 || w[0] % groups != 0 || static_cast<Wide>(w[1]) * groups != x[1]) return std::nullopt;
  const auto h = conv_size(x[2], w[2], c[3], c[1], c[5]);
  const auto wd = conv_size(x[3], w[3], c[4], c[2], c[6]);
  if (!h || !wd) return std::nullopt;
  return std::vector<Wide>{x[0], w[0], *h, *wd};
}

TEST_CASE("conv2d: hostile groups, stride, padding and dilation", "[nn][hostile_sizes][conv]") {
  for (int64_t groups : {1, 2}) {
    const Tensor x = tg::randn({1, 2, 5, 5});
    const Tensor w = tg::randn({2, 2 / groups, 3, 3});
    for (const auto& c : sweep({groups, 1, 1, 1, 1, 1, 1})) {
      INFO("groups, stride, padding, dilation: " << describe(c));
      expect_shape_or_error({"conv2d"}, conv2d_expected(x.shape(), w.shape(), c), [&] {
        return F::conv2d(x, w, {.stride = {c[1], c[2]}, .padding = tg::nn::ConvPadding<2>({c[3], c[4]}),
                                .dilation = {c[5], c[6]}, .groups = c[0]});
      });
    }
  }
}

TEST_CASE("conv2d: groups that wrap around int64 are refused (an empty input used to pass)",
          "[nn][hostile_sizes][conv]") {
  // weight.size(1) · groups = 4 · 2^62 = 2^64, which wraps to 0 = C_in; PyTorch refuses.
  const Tensor x = tg::zeros({1, 0, 5, 5});
  const Tensor w = tg::zeros({0, 4, 3, 3});
  CHECK_THROWS_WITH(F::conv2d(x, w, {.groups = int64_t{1} << 62}), StartsWith("conv2d: groups = 4611686018427387904"));
  CHECK_THROWS_WITH(F::conv_transpose2d(tg::zeros({1, 0, 3, 3}), tg::zeros({0, 4, 3, 3}), {.groups = int64_t{1} << 62}),
                    StartsWith("conv_transpose2d: "));
}

TEST_CASE("conv1d: hostile groups, stride, padding and dilation", "[nn][hostile_sizes][conv]") {
  const Tensor x = tg::randn({1, 2, 5});
  const Tensor w = tg::randn({2, 1, 3});
  for (const auto& c : sweep({2, 1, 1, 1})) {
    INFO("groups, stride, padding, dilation: " << describe(c));
    Expected expected;
    if (c[0] > 0 && 2 % c[0] == 0 && static_cast<Wide>(c[0]) == 2)
      if (const auto out = conv_size(5, 3, c[2], c[1], c[3])) expected = std::vector<Wide>{1, 2, *out};
    expect_shape_or_error({"conv1d"}, expected, [&] {
      return F::conv1d(x, w, {.stride = c[1], .padding = tg::nn::ConvPadding<1>(c[2]), .dilation = c[3], .groups = c[0]});
    });
  }
}

TEST_CASE("conv_transpose2d: hostile groups, stride, padding, output_padding and dilation",
          "[nn][hostile_sizes][conv]") {
  for (int64_t groups : {1, 2}) {
    const Tensor x = tg::randn({1, 2, 3, 3});
    const Tensor w = tg::randn({2, 1, 3, 3});  // C_out = groups
    for (const auto& c : sweep({groups, 2, 1, 1, 1})) {  // groups, stride, padding, output_padding, dilation
      INFO("groups, stride, padding, output_padding, dilation: " << describe(c));
      Expected expected;
      if (c[0] > 0 && 2 % c[0] == 0)
        if (const auto out = transposed_size(3, 3, c[2], c[1], c[4], c[3]))
          expected = std::vector<Wide>{1, c[0], *out, *out};
      expect_shape_or_error({"conv_transpose2d"}, expected, [&] {
        return F::conv_transpose2d(x, w, {.stride = c[1], .padding = c[2], .output_padding = c[3], .groups = c[0],
                                          .dilation = c[4]});
      });
    }
  }
}

TEST_CASE("Conv1d, Conv2d, ConvTranspose2d: hostile channels, kernel_size and groups", "[nn][hostile_sizes][conv]") {
  for (const auto& c : sweep({4, 4, 3, 2})) {  // in_channels, out_channels, kernel_size, groups
    INFO("in_channels, out_channels, kernel_size, groups: " << describe(c));
    const Wide in = c[0], out = c[1], k = c[2], groups = c[3];
    const bool valid = in > 0 && out > 0 && k > 0 && groups > 0 && in % groups == 0 && out % groups == 0;
    const Expected conv2d = valid ? Expected(std::vector<Wide>{out, in / groups, k, k}) : std::nullopt;
    expect_shape_or_error({"Conv2d"}, conv2d, [&] {
      return tg::nn::Conv2d(c[0], c[1], c[2], {.groups = c[3]}).weight;
    });
    const Expected conv1d = valid ? Expected(std::vector<Wide>{out, in / groups, k}) : std::nullopt;
    expect_shape_or_error({"Conv1d"}, conv1d, [&] {
      return tg::nn::Conv1d(c[0], c[1], c[2], {.groups = c[3]}).weight;
    });
    const Expected transposed = valid ? Expected(std::vector<Wide>{in, out / groups, k, k}) : std::nullopt;
    expect_shape_or_error({"ConvTranspose2d"}, transposed, [&] {
      return tg::nn::ConvTranspose2d(c[0], c[1], c[2], {.groups = c[3]}).weight;
    });
  }
}

TEST_CASE("Conv2d and ConvTranspose2d forward: hostile stride, padding and dilation", "[nn][hostile_sizes][conv]") {
  const Tensor x = tg::randn({1, 2, 5, 5});
  for (const std::string mode : {"zeros", "reflect", "circular"}) {
    for (const auto& c : sweep({1, 1, 1})) {  // stride, padding, dilation
      INFO("padding_mode " << mode << "; stride, padding, dilation: " << describe(c));
      Expected expected;
      if (mode == "zeros") {
        if (const auto out = conv_size(5, 3, c[1], c[0], c[2])) expected = std::vector<Wide>{1, 2, *out, *out};
      } else if (const Expected padded = pad_expected({5}, c[1], c[1], mode)) {  // F::pad first, then no padding
        const Wide n = padded->back();
        if (n <= kMax)
          if (const auto out = conv_size(n, 3, 0, c[0], c[2])) expected = std::vector<Wide>{1, 2, *out, *out};
      }
      expect_shape_or_error({"conv2d", "Conv2d", "pad"}, expected, [&] {
        tg::nn::Conv2d conv(2, 2, 3, {.stride = c[0], .padding = tg::nn::ConvPadding<2>(c[1]), .dilation = c[2],
                                      .padding_mode = mode});
        return conv.forward(x);
      });
    }
  }
  for (const auto& c : sweep({1, 0, 0, 1})) {  // stride, padding, output_padding, dilation
    INFO("ConvTranspose2d stride, padding, output_padding, dilation: " << describe(c));
    Expected expected;
    if (const auto out = transposed_size(5, 3, c[1], c[0], c[3], c[2])) expected = std::vector<Wide>{1, 2, *out, *out};
    expect_shape_or_error({"conv_transpose2d"}, expected, [&] {
      tg::nn::ConvTranspose2d conv(2, 2, 3, {.stride = c[0], .padding = c[1], .output_padding = c[2], .dilation = c[3]});
      return conv.forward(x);
    });
  }
}

TEST_CASE("a convolution's errors name the function called, not its kernels' allocator",
          "[nn][hostile_sizes][conv]") {
  // Outputs [.., 2^41 + 3, 2^41 + 3]: too many elements to address (the primitives once said "conv:").
  const int64_t pad = int64_t{1} << 40;
  CHECK_THROWS_WITH(F::conv2d(tg::randn({1, 1, 5, 5}), tg::randn({1, 1, 3, 3}), {.padding = pad}),
                    StartsWith("conv2d: shape [1, 1, 2199023255555, 2199023255555]"));
  CHECK_THROWS_WITH(F::conv1d(tg::randn({1, 1, 5}), tg::randn({1, 1, 3}), {.padding = kMax}),
                    StartsWith("conv1d: padding = (9223372036854775807) is too large"));
  CHECK_THROWS_WITH(F::conv_transpose2d(tg::randn({1, 1, 5, 5}), tg::randn({1, 1, 3, 3}), {.stride = pad}),
                    StartsWith("conv_transpose2d: shape [1, 1, 4398046511107, 4398046511107]"));
  // A weight too large for the memory (9 GiB here) names the module and the parameter ("empty:" before).
  CHECK_THROWS_WITH(tg::nn::Conv2d(16384, 16384, 3),
                    StartsWith("Conv2d: cannot allocate weight [16384, 16384, 3, 3]: cannot allocate 9663676416 bytes"));
  CHECK_THROWS_WITH(tg::nn::ConvTranspose2d(16384, 16384, 3), StartsWith("ConvTranspose2d: cannot allocate weight"));
  CHECK_THROWS_WITH(tg::nn::Conv1d(65536, 65536, 3), StartsWith("Conv1d: cannot allocate weight"));
}

// --- poolings --------------------------------------------------------------------------------

TEST_CASE("max_pool2d, avg_pool2d and their modules: hostile kernel_size, stride, padding and dilation",
          "[nn][hostile_sizes][pooling]") {
  const Tensor x = tg::randn({1, 2, 5, 5});
  for (bool ceil_mode : {false, true}) {
    for (const auto& c : sweep({3, 2, 1, 1})) {  // kernel_size, stride, padding, dilation
      INFO("ceil_mode " << ceil_mode << "; kernel_size, stride, padding, dilation: " << describe(c));
      Expected expected;
      if (const auto out = pool_size(5, c[0], c[2], c[1], c[3], ceil_mode)) expected = std::vector<Wide>{1, 2, *out, *out};
      const F::MaxPool2dFuncOptions max_options{.stride = c[1], .padding = c[2], .dilation = c[3], .ceil_mode = ceil_mode};
      expect_shape_or_error({"max_pool2d"}, expected, [&] { return F::max_pool2d(x, c[0], max_options); });
      expect_shape_or_error({"max_pool2d_with_indices"}, expected,
                            [&] { return F::max_pool2d_with_indices(x, c[0], max_options).second; });
      expect_shape_or_error({"max_pool2d"}, expected, [&] {
        tg::nn::MaxPool2d pool(c[0], {.stride = c[1], .padding = c[2], .dilation = c[3], .ceil_mode = ceil_mode});
        return pool.forward(x);
      });
      Expected avg;
      if (const auto out = pool_size(5, c[0], c[2], c[1], 1, ceil_mode)) avg = std::vector<Wide>{1, 2, *out, *out};
      expect_shape_or_error({"avg_pool2d"}, avg, [&] {
        return F::avg_pool2d(x, c[0], {.stride = c[1], .padding = c[2], .ceil_mode = ceil_mode});
      });
      expect_shape_or_error({"avg_pool2d"}, avg, [&] {
        tg::nn::AvgPool2d pool(c[0], {.stride = c[1], .padding = c[2], .ceil_mode = ceil_mode});
        return pool.forward(x);
      });
    }
  }
  for (int64_t divisor : kHostile) {
    INFO("divisor_override " << divisor);
    const Expected expected = divisor != 0 ? Expected(std::vector<Wide>{1, 2, 2, 2}) : std::nullopt;
    expect_shape_or_error({"avg_pool2d"}, expected,
                          [&] { return F::avg_pool2d(x, 2, {.divisor_override = divisor}); });
  }
}

TEST_CASE("adaptive poolings: hostile output sizes", "[nn][hostile_sizes][pooling]") {
  for (int64_t batch : {1, 0}) {  // an empty batch: the output has no elements, whatever its sizes
    const Tensor x = tg::randn({batch, 2, 5, 5});
    for (const auto& c : sweep({3, 3})) {
      INFO("batch " << batch << "; output_size " << describe(c));
      const Expected expected =
          c[0] >= 0 && c[1] >= 0 ? Expected(std::vector<Wide>{batch, 2, c[0], c[1]}) : std::nullopt;
      expect_shape_or_error({"adaptive_avg_pool2d"}, expected, [&] { return F::adaptive_avg_pool2d(x, {c[0], c[1]}); });
      expect_shape_or_error({"adaptive_max_pool2d"}, expected, [&] { return F::adaptive_max_pool2d(x, {c[0], c[1]}); });
      expect_shape_or_error({"adaptive_max_pool2d_with_indices"}, expected,
                            [&] { return F::adaptive_max_pool2d_with_indices(x, {c[0], c[1]}).second; });
      expect_shape_or_error({"adaptive_avg_pool2d"}, expected, [&] {
        tg::nn::AdaptiveAvgPool2d pool({c[0], c[1]});
        return pool.forward(x);
      });
    }
  }
}

// --- padding and interpolation ---------------------------------------------------------------

TEST_CASE("pad: hostile pads in every mode", "[nn][hostile_sizes][padding]") {
  for (const std::string mode : {"constant", "reflect", "replicate", "circular"}) {
    for (int64_t batch : {1, 0}) {
      const Tensor x = tg::randn({batch, 2, 4});
      for (const auto& c : sweep({1, 1})) {
        INFO("mode " << mode << ", batch " << batch << "; pads " << describe(c));
        expect_shape_or_error({"pad"}, pad_expected(x.shape(), c[0], c[1], mode),
                              [&] { return F::pad(x, {c[0], c[1]}, {.mode = mode}); });
      }
    }
  }
  // Two padded dims, each hostile on its own: the output's size is checked as a whole.
  const Tensor x = tg::randn({1, 1, 4, 4});
  for (int64_t value : kHostile) {
    INFO("pads " << value << " on both dims");
    Expected expected;
    const Wide out = 4 + Wide{value};
    if (value >= -4) expected = std::vector<Wide>{1, 1, out, out};
    expect_shape_or_error({"pad"}, expected, [&] { return F::pad(x, {value, 0, value, 0}); });
  }
}

TEST_CASE("interpolate and Upsample: hostile sizes and scale factors", "[nn][hostile_sizes][upsampling]") {
  for (const std::string mode : {"nearest", "bilinear"}) {
    for (int64_t batch : {1, 0}) {
      const Tensor x = tg::randn({batch, 2, 4, 4});
      for (const auto& c : sweep({8, 8})) {
        INFO("mode " << mode << ", batch " << batch << "; size " << describe(c));
        const Expected expected = c[0] > 0 && c[1] > 0 ? Expected(std::vector<Wide>{batch, 2, c[0], c[1]}) : std::nullopt;
        expect_shape_or_error({"interpolate"}, expected, [&] {
          return F::interpolate(x, {.size = std::vector<int64_t>{c[0], c[1]}, .mode = mode});
        });
      }
      for (double scale : {0.0, -1.0, 0x1p31, 0x1p62, 0x1p63, 0x1p1023, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), 0.1}) {
        INFO("mode " << mode << ", batch " << batch << "; scale_factor " << scale);
        Expected expected;
        const double out = std::floor(4 * scale);
        if (std::isfinite(scale) && scale > 0 && out > 0 && out < 0x1p63)
          expected = std::vector<Wide>{batch, 2, static_cast<Wide>(out), static_cast<Wide>(out)};
        expect_shape_or_error({"interpolate"}, expected, [&] {
          return F::interpolate(x, {.scale_factor = std::vector<double>{scale}, .mode = mode});
        });
        expect_shape_or_error({"interpolate"}, expected, [&] {
          tg::nn::Upsample upsample({.scale_factor = std::vector<double>{scale}, .mode = mode});
          return upsample.forward(x);
        });
      }
    }
  }
  const Tensor x = tg::randn({1, 2, 4});
  for (int64_t size : kHostile) {
    INFO("1-D nearest, size " << size);
    const Expected expected = size > 0 ? Expected(std::vector<Wide>{1, 2, size}) : std::nullopt;
    expect_shape_or_error({"interpolate"}, expected,
                          [&] { return F::interpolate(x, {.size = std::vector<int64_t>{size}}); });
  }
}

// --- RandomCrop ------------------------------------------------------------------------------

TEST_CASE("RandomCrop: hostile size and padding", "[nn][hostile_sizes][data]") {
  namespace T = tg::data::transforms;
  const Tensor image = tg::randn({1, 4, 4});
  tg::Generator generator(1);
  for (bool pad_if_needed : {false, true}) {
    for (const auto& c : sweep({3, 1})) {  // size, padding
      INFO("pad_if_needed " << pad_if_needed << "; size, padding " << describe(c));
      const Wide size = c[0], padding = c[1];
      Expected expected;
      if (size >= 1 && padding >= 0) {
        Wide padded = 4 + 2 * padding;
        if (pad_if_needed && padded < size) padded += 2 * (size - padded);
        if (padded >= size) expected = std::vector<Wide>{1, size, size};
      }
      expect_shape_or_error({"RandomCrop"}, expected, [&] {
        const T::RandomCrop crop(c[0], c[1], {.pad_if_needed = pad_if_needed, .generator = &generator});
        return crop(image);
      });
    }
  }
  // The padded image is RandomCrop's own ("empty:" before): too many elements, or too little memory.
  CHECK_THROWS_WITH(T::RandomCrop(3, int64_t{1} << 40)(image), StartsWith("RandomCrop: shape [1, 2199023255556, "));
  CHECK_THROWS_WITH(T::RandomCrop(3, int64_t{1} << 20)(image), StartsWith("RandomCrop: cannot allocate"));
}

}  // namespace
