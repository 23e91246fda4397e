// torchvision's tensor transforms (data/transforms.hpp). Each random one makes torchvision's draws
// in torchvision's order through tg's random functions (PyTorch's algorithms on a tg::Generator);
// the pixel work is plain loops over planes [H, W] (the leading dims of [..., H, W] are planes).
#include "tapegrad/data/transforms.hpp"

#include <algorithm>
#include <cmath>

#include "dispatch.hpp"
#include "out_of_memory.hpp"
#include "tensor_impl.hpp"

namespace tg::data::transforms {

namespace {

// The generator a transform draws from: its own when given, else the loader's batch generator.
Generator& generator_of(Generator* generator) { return generator != nullptr ? *generator : transform_generator(); }

// torch.randint(low, high, (1,), generator=g).item()
int64_t randint_one(int64_t low, int64_t high, Generator& generator) {
  return randint(low, high, {1}, kInt64, &generator).item<int64_t>();
}

// torch.rand(1, generator=g): a float32 in [0, 1).
float rand_one(Generator& generator) { return rand({1}, generator).item<float>(); }

// torch.empty(1).uniform_(low, high, generator=g).item(): a float32 in [low, high).
float uniform_one(double low, double high, Generator& generator) {
  Tensor value = empty({1});
  value.uniform_(low, high, &generator);
  return value.item<float>();
}

void check_image(const Tensor& image, const char* op, int64_t min_dims, const char* layout) {
  check(image.defined(), op, "called on an undefined tensor");
  check(image.dim() >= min_dims, op, "expected a tensor image of shape ", layout, ", got shape ",
        image.shape());
  check(!image.requires_grad(), op, "is not recorded on the tape: got an image that requires grad (shape ",
        image.shape(), "); detach() it first");
}

void check_finite(double value, const char* op, const char* what) {
  check(std::isfinite(value), op, what, " should be finite, got ", value);
}

// The shape of `image` with its last two dims replaced by height and width.
Shape with_plane(const Shape& shape, int64_t height, int64_t width) {
  Shape out = shape;
  out[out.size() - 2] = height;
  out[out.size() - 1] = width;
  return out;
}

enum class PadMode { Constant, Edge, Reflect, Symmetric };

PadMode pad_mode_of(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "edge") return PadMode::Edge;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "symmetric") return PadMode::Symmetric;
  check(false, "RandomCrop", "padding_mode should be \"constant\", \"edge\", \"reflect\" or \"symmetric\", got \"",
        mode, "\"");
  return PadMode::Constant;
}

// The source index of padded position s (−before ≤ s < n + after) along a side of length n, or −1
// for a constant pixel.
//   edge:      clamp(s, 0, n − 1)
//   reflect:   −s for s < 0, 2(n − 1) − s for s ≥ n     (the edge pixel not repeated)
//   symmetric: −s − 1 for s < 0, 2n − 1 − s for s ≥ n   (the edge pixel repeated)
int64_t source_index(int64_t s, int64_t n, PadMode mode) {
  if (s >= 0 && s < n) return s;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return std::clamp<int64_t>(s, 0, n - 1);
    case PadMode::Reflect: return s < 0 ? -s : 2 * (n - 1) - s;
    case PadMode::Symmetric: return s < 0 ? -s - 1 : 2 * n - 1 - s;
  }
  return -1;
}

// The paddings a mode can make along a side of length n: reflect needs padding < n (torch's
// reflection pad), symmetric padding ≤ n, edge n ≥ 1.
void check_side(int64_t before, int64_t after, int64_t n, PadMode mode, const char* side, const Shape& shape) {
  const int64_t most = std::max(before, after);
  if (most == 0) return;
  if (mode == PadMode::Reflect)
    check(most < n, "RandomCrop", "padding_mode \"reflect\" needs a padding smaller than the ", side, " (", n,
          "), got ", most, " for an image of shape ", shape);
  if (mode == PadMode::Symmetric)
    check(most <= n, "RandomCrop", "padding_mode \"symmetric\" needs a padding no larger than the ", side, " (",
          n, "), got ", most, " for an image of shape ", shape);
  if (mode == PadMode::Edge) check(n >= 1, "RandomCrop", "padding_mode \"edge\" needs a ", side, " of at least 1");
}

// image [..., H, W] → [..., H + top + bottom, W + left + right], padded as `mode` says.
Tensor pad(const Tensor& image, int64_t left, int64_t top, int64_t right, int64_t bottom, PadMode mode,
           double fill) {
  if (left == 0 && top == 0 && right == 0 && bottom == 0) return image;
  const int64_t height = image.size(-2), width = image.size(-1);
  check_side(top, bottom, height, mode, "height", image.shape());
  check_side(left, right, width, mode, "width", image.shape());
  // The paddings are ≥ 0; near 2^63 their sums must not wrap around.
  int64_t out_height = 0, out_width = 0;
  check(!__builtin_add_overflow(height, top, &out_height) && !__builtin_add_overflow(out_height, bottom, &out_height) &&
            !__builtin_add_overflow(width, left, &out_width) && !__builtin_add_overflow(out_width, right, &out_width),
        "RandomCrop", "padding an image of shape ", image.shape(), " by (left ", left, ", top ", top, ", right ",
        right, ", bottom ", bottom, ") overflows int64");
  Tensor out = make_tensor(with_plane(image.shape(), out_height, out_width), image.dtype(), "RandomCrop");
  const int64_t planes = height * width > 0 ? image.numel() / (height * width) : 0;
  // The source of each output row and column, shared by every plane.
  std::vector<int64_t> rows(static_cast<size_t>(out_height)), columns(static_cast<size_t>(out_width));
  for (int64_t y = 0; y < out_height; ++y) rows[static_cast<size_t>(y)] = source_index(y - top, height, mode);
  for (int64_t x = 0; x < out_width; ++x) columns[static_cast<size_t>(x)] = source_index(x - left, width, mode);
  tg::detail::dispatch<tg::detail::AllDTypes>("RandomCrop", image.dtype(), [&]<typename T>() {
    const T fill_value = full({1}, fill, image.dtype()).template item<T>();
    const T* source = image.data<T>();
    T* target = out.mutable_data<T>();
    for (int64_t p = 0; p < planes; ++p) {
      const T* plane = source + p * height * width;
      for (int64_t y = 0; y < out_height; ++y) {
        const int64_t row = rows[static_cast<size_t>(y)];
        T* out_row = target + (p * out_height + y) * out_width;
        for (int64_t x = 0; x < out_width; ++x) {
          const int64_t column = columns[static_cast<size_t>(x)];
          out_row[x] = row < 0 || column < 0 ? fill_value : plane[row * width + column];
        }
      }
    }
  });
  return out;
}

// image[..., top : top + height, left : left + width]
Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t height, int64_t width) {
  const int64_t in_height = image.size(-2), in_width = image.size(-1);
  Tensor out = make_tensor(with_plane(image.shape(), height, width), image.dtype(), "RandomCrop");
  const int64_t planes = image.numel() / (in_height * in_width);
  tg::detail::dispatch<tg::detail::AllDTypes>("RandomCrop", image.dtype(), [&]<typename T>() {
    const T* source = image.data<T>();
    T* target = out.mutable_data<T>();
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t y = 0; y < height; ++y) {
        const T* row = source + (p * in_height + top + y) * in_width + left;
        std::copy(row, row + width, target + (p * height + y) * width);
      }
  });
  return out;
}

}  // namespace

std::function<Example(Example)> sample_transform(Transform transform) {
  check(static_cast<bool>(transform), "sample_transform", "the transform is empty");
  return [transform = std::move(transform)](Example sample) {
    return Example{transform(sample.data), std::move(sample.target)};
  };
}

// --- Compose ---

Compose::Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {
  for (size_t i = 0; i < transforms_.size(); ++i)
    check(static_cast<bool>(transforms_[i]), "Compose", "transform ", i, " is empty");
}

Tensor Compose::operator()(const Tensor& image) const {
  Tensor result = image;
  for (const Transform& transform : transforms_) result = transform(result);
  return result;
}

// --- Normalize ---

Normalize::Normalize(std::vector<double> mean, std::vector<double> stddev)
    : mean_(std::move(mean)), stddev_(std::move(stddev)) {
  check(!mean_.empty() && !stddev_.empty(), "Normalize", "mean and std should hold at least one value, got ",
        mean_.size(), " and ", stddev_.size());
  for (const double m : mean_) check_finite(m, "Normalize", "mean");
  for (const double s : stddev_) {
    check_finite(s, "Normalize", "std");
    check(s != 0, "Normalize", "std evaluated to zero, leading to division by zero");
  }
}

Tensor Normalize::operator()(const Tensor& image) const {
  check(image.defined(), "Normalize", "called on an undefined tensor");
  check(is_floating_point(image.dtype()), "Normalize", "expected a float32 or float64 image, got ", image.dtype());
  check(image.dim() >= 3, "Normalize", "expected a tensor image of shape [..., C, H, W], got shape ",
        image.shape());
  const int64_t channels = image.size(-3);
  for (const std::vector<double>* values : {&mean_, &stddev_}) {
    const auto n = static_cast<int64_t>(values->size());
    check(n == 1 || n == channels, "Normalize", "mean and std should hold 1 or C = ", channels,
          " values for an image of shape ", image.shape(), ", got ", mean_.size(), " and ",
          stddev_.size());
  }
  // As torchvision: the values as tensors of the image's dtype, viewed [C, 1, 1], then
  // image.sub(mean).div(std), recorded on the tape like any op.
  const Tensor mean = tensor(mean_, {static_cast<int64_t>(mean_.size()), 1, 1}, image.dtype());
  const Tensor stddev = tensor(stddev_, {static_cast<int64_t>(stddev_.size()), 1, 1}, image.dtype());
  for (const double s : stddev.to(kFloat64).to_vector<double>())
    check(s != 0, "Normalize", "std evaluated to zero after conversion to ", image.dtype(),
          ", leading to division by zero");
  return (image - mean) / stddev;
}

// --- the sizes ---

ImageSize::ImageSize(std::initializer_list<int64_t> sizes) {
  check(sizes.size() == 1 || sizes.size() == 2, "ImageSize", "expected {size} or {height, width}, got ",
        sizes.size(), " values");
  height_ = *sizes.begin();
  width_ = *(sizes.end() - 1);
}

ImagePadding::ImagePadding(std::initializer_list<int64_t> padding) {
  const std::vector<int64_t> p(padding);
  check(p.size() == 1 || p.size() == 2 || p.size() == 4, "ImagePadding",
        "expected {all}, {left/right, top/bottom} or {left, top, right, bottom}, got ", p.size(), " values");
  if (p.size() == 1) {
    left_ = top_ = right_ = bottom_ = p[0];
  } else if (p.size() == 2) {
    left_ = right_ = p[0];
    top_ = bottom_ = p[1];
  } else {
    left_ = p[0], top_ = p[1], right_ = p[2], bottom_ = p[3];
  }
}

// --- RandomCrop ---

RandomCrop::RandomCrop(ImageSize size, ImagePadding padding, RandomCropOptions options)
    : size_(size), padding_(padding), options_(std::move(options)) {
  check(size_.height() >= 1 && size_.width() >= 1, "RandomCrop", "size should be >= 1, got (", size_.height(), ", ",
        size_.width(), ")");
  check(padding_.left() >= 0 && padding_.top() >= 0 && padding_.right() >= 0 && padding_.bottom() >= 0,
        "RandomCrop", "padding should be >= 0, got (left ", padding_.left(), ", top ", padding_.top(), ", right ",
        padding_.right(), ", bottom ", padding_.bottom(), ")");
  pad_mode_of(options_.padding_mode);  // refuses an unknown mode now rather than at the first image
  check_finite(options_.fill, "RandomCrop", "fill");
}

Tensor RandomCrop::operator()(const Tensor& image) const try {
  check_image(image, "RandomCrop", 2, "[..., H, W]");
  check(image.numel() > 0, "RandomCrop", "got an image with no elements, of shape ", image.shape());
  const PadMode mode = pad_mode_of(options_.padding_mode);
  Tensor padded = pad(image, padding_.left(), padding_.top(), padding_.right(), padding_.bottom(), mode,
                      options_.fill);
  const int64_t crop_height = size_.height(), crop_width = size_.width();
  // torchvision pads the width, then the height, each on both sides by the whole shortfall.
  if (options_.pad_if_needed && padded.size(-1) < crop_width) {
    const int64_t shortfall = crop_width - padded.size(-1);
    padded = pad(padded, shortfall, 0, shortfall, 0, mode, options_.fill);
  }
  if (options_.pad_if_needed && padded.size(-2) < crop_height) {
    const int64_t shortfall = crop_height - padded.size(-2);
    padded = pad(padded, 0, shortfall, 0, shortfall, mode, options_.fill);
  }
  const int64_t height = padded.size(-2), width = padded.size(-1);
  check(height >= crop_height && width >= crop_width, "RandomCrop", "Required crop size (", crop_height, ", ",
        crop_width, ") is larger than input image size (", height, ", ", width, ") (image of shape ",
        image.shape(), " padded by (left ", padding_.left(), ", top ", padding_.top(), ", right ",
        padding_.right(), ", bottom ", padding_.bottom(), "))");
  if (height == crop_height && width == crop_width) return padded;  // no draw, as torchvision
  Generator& generator = generator_of(options_.generator);
  const int64_t top = randint_one(0, height - crop_height + 1, generator);
  const int64_t left = randint_one(0, width - crop_width + 1, generator);
  return crop(padded, top, left, crop_height, crop_width);
} catch (...) {
  tg::detail::rethrow_out_of_memory_as("RandomCrop");
}

// --- RandomHorizontalFlip ---

RandomHorizontalFlip::RandomHorizontalFlip(double p, Generator* generator) : p_(p), generator_(generator) {
  check(p >= 0 && p <= 1, "RandomHorizontalFlip", "p should be between 0 and 1, got ", p);
}

Tensor RandomHorizontalFlip::operator()(const Tensor& image) const {
  check_image(image, "RandomHorizontalFlip", 2, "[..., H, W]");
  // torch.rand(1) < p compares in float32, the rand's dtype.
  if (!(rand_one(generator_of(generator_)) < static_cast<float>(p_))) return image;
  const int64_t width = image.size(-1);
  Tensor out = empty(image.shape(), image.dtype());
  const int64_t rows = width > 0 ? image.numel() / width : 0;
  tg::detail::dispatch<tg::detail::AllDTypes>("RandomHorizontalFlip", image.dtype(), [&]<typename T>() {
    const T* source = image.data<T>();
    T* target = out.mutable_data<T>();
    for (int64_t r = 0; r < rows; ++r) std::reverse_copy(source + r * width, source + (r + 1) * width, target + r * width);
  });
  return out;
}

// --- RandomErasing ---

RandomErasing::RandomErasing(RandomErasingOptions options) : options_(std::move(options)) {
  const auto& [scale_low, scale_high] = options_.scale;
  const auto& [ratio_low, ratio_high] = options_.ratio;
  check(options_.p >= 0 && options_.p <= 1, "RandomErasing", "Random erasing probability should be between 0 and 1, got ",
        options_.p);
  check(scale_low >= 0 && scale_high <= 1, "RandomErasing", "Scale should be between 0 and 1, got (", scale_low,
        ", ", scale_high, ")");
  check(scale_low <= scale_high, "RandomErasing", "scale should be of kind (min, max), got (", scale_low, ", ",
        scale_high, ")");
  check(std::isfinite(ratio_low) && std::isfinite(ratio_high) && ratio_low > 0 && ratio_low <= ratio_high,
        "RandomErasing", "ratio should be of kind (min, max) with 0 < min <= max, got (", ratio_low, ", ", ratio_high,
        ")");
  if (!options_.random_value) {
    check(!options_.value.empty(), "RandomErasing", "value should hold one number, or one per channel; got none");
    for (const double v : options_.value) check_finite(v, "RandomErasing", "value");
  }
}

Tensor RandomErasing::operator()(const Tensor& image) const {
  check_image(image, "RandomErasing", 3, "[..., C, H, W]");
  check(is_floating_point(image.dtype()), "RandomErasing", "expected a float32 or float64 image, got ", image.dtype());
  const int64_t channels = image.size(-3), height = image.size(-2), width = image.size(-1);
  const auto values = static_cast<int64_t>(options_.value.size());
  check(options_.random_value || values == 1 || values == channels, "RandomErasing",
        "If value is a sequence, it should have either a single value or ", channels,
        " (number of input channels); got ", values, " for an image of shape ", image.shape());

  Generator& generator = generator_of(options_.generator);
  if (!(rand_one(generator) < static_cast<float>(options_.p))) return image;

  // torchvision's get_params: log_ratio = torch.log(torch.tensor(ratio)) in float32, then up to 10
  // attempts, each with two float32 draws; Python's round() is half-to-even, as nearbyint.
  const double area = static_cast<double>(height * width);
  const float log_ratio_low = std::log(static_cast<float>(options_.ratio.first));
  const float log_ratio_high = std::log(static_cast<float>(options_.ratio.second));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * static_cast<double>(uniform_one(options_.scale.first, options_.scale.second, generator));
    const double aspect_ratio = static_cast<double>(std::exp(uniform_one(log_ratio_low, log_ratio_high, generator)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area * aspect_ratio)));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(erase_area / aspect_ratio)));
    if (!(h < height && w < width)) continue;
    // The erased values, [C, h, w]: N(0, 1) in float32 drawn before the place, or the given ones.
    const Tensor noise = options_.random_value ? randn({channels, h, w}, generator) : Tensor();
    const int64_t top = randint_one(0, height - h + 1, generator);
    const int64_t left = randint_one(0, width - w + 1, generator);
    Tensor out = empty(image.shape(), image.dtype());
    out.copy_(image);
    const int64_t planes = image.numel() / (height * width);  // [..., C] planes; plane p is channel p % C
    tg::detail::dispatch<tg::detail::FloatingDTypes>("RandomErasing", image.dtype(), [&]<typename T>() {
      T* target = out.mutable_data<T>();
      const float* random = options_.random_value ? noise.data<float>() : nullptr;
      for (int64_t p = 0; p < planes; ++p) {
        const int64_t c = p % channels;
        // torchvision's torch.tensor(value): float32 first, whatever the image's dtype.
        const T fixed = static_cast<T>(static_cast<float>(options_.value[static_cast<size_t>(values == 1 ? 0 : c)]));
        for (int64_t y = 0; y < h; ++y) {
          T* row = target + (p * height + top + y) * width + left;
          for (int64_t x = 0; x < w; ++x)
            row[x] = random != nullptr ? static_cast<T>(random[(c * h + y) * w + x]) : fixed;
        }
      }
    });
    return out;
  }
  return image;  // no attempt fitted: torchvision returns the image as it is
}

}  // namespace tg::data::transforms
