/// @file
/// tg::data::transforms — torchvision's image transforms on tensors [..., C, H, W]: Compose,
/// Normalize, RandomCrop, RandomHorizontalFlip and RandomErasing, with torchvision's names,
/// defaults and random draws (torch.randint / torch.rand, in its order).
///
/// @code
///   namespace T = tg::data::transforms;
///   const T::Compose augment({T::RandomCrop(28, 2), T::RandomHorizontalFlip()});
///   tg::data::DataLoader loader(tg::data::TensorDataset(images, labels),   // images [N, 1, 28, 28]
///                               {.batch_size = 128, .shuffle = true, .generator = &generator,
///                                .prefetch = 2, .transform = T::sample_transform(augment)});
/// @endcode
///
/// A random transform draws from the generator in its options when one is given, else from
/// tg::data::transform_generator(): inside a DataLoader, a generator of the batch's own seeded from
/// the loader's generator, so that equal seeds give equal images with or without prefetching
/// (tapegrad/data/data_loader.hpp); elsewhere the default generator, as torchvision draws from
/// torch's. A transform never modifies its input: it returns a new tensor, or the input itself when
/// it leaves the image as it is (no flip, no erasing, no padding and a crop of the whole). Transforms are const and
/// hold no state that changes: one object may be called from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/data/data_loader.hpp"
#include "tapegrad/data/dataset.hpp"
#include "tapegrad/generator.hpp"
#include "tapegrad/tensor.hpp"

/// torchvision.transforms' tensor transforms: images [..., C, H, W] (crop and flip: [..., H, W]).
namespace tg::data::transforms {

/// One image in, one image out: what Compose chains (a transform object, or a lambda of one's own).
using Transform = std::function<Tensor(const Tensor& image)>;

/// A DataLoaderOptions::transform that passes each sample's data through `transform` and keeps
/// its target, as torchvision datasets' `transform` argument.
std::function<Example(Example)> sample_transform(Transform transform);

/// The transforms in order, each on the previous one's result (torchvision.transforms.Compose).
class Compose {
 public:
  /// tg::Error for an empty std::function among them.
  explicit Compose(std::vector<Transform> transforms);
  Tensor operator()(const Tensor& image) const;  ///< transforms[n−1](...transforms[0](image))
  const std::vector<Transform>& transforms() const { return transforms_; }  ///< as given

 private:
  std::vector<Transform> transforms_;
};

/// (image − mean[c]) / std[c] per channel c of a float32 or float64 image [..., C, H, W]
/// (torchvision's Normalize(mean, std)): mean and std hold one value, or C. As torchvision, each
/// is rounded to the image's dtype first, then the subtraction and the division are each rounded.
class Normalize {
 public:
  /// tg::Error for an empty mean or std, and a std with a 0 or a non-finite value, or a non-finite mean.
  Normalize(std::vector<double> mean, std::vector<double> stddev);
  /// tg::Error for an image that is not float32 or float64, has fewer than 3 dims, or has a number
  /// of channels (dim −3) other than 1 or the length of mean and std.
  Tensor operator()(const Tensor& image) const;
  const std::vector<double>& mean() const { return mean_; }  ///< per channel, or one for all
  const std::vector<double>& stddev() const { return stddev_; }  ///< torchvision's std: per channel, or one for all

 private:
  std::vector<double> mean_, stddev_;
};

/// An image's height and width: one number for a square (torchvision's int size), or {h, w}.
class ImageSize {
 public:
  ImageSize(int64_t size) : height_(size), width_(size) {}  ///< size × size
  /// {size} or {height, width}; tg::Error for another length.
  ImageSize(std::initializer_list<int64_t> sizes);
  int64_t height() const { return height_; }  ///< rows
  int64_t width() const { return width_; }    ///< columns

 private:
  int64_t height_, width_;
};

/// Padding on the four sides of an image, as torchvision's `padding`: one number for all four,
/// {left/right, top/bottom}, or {left, top, right, bottom}.
class ImagePadding {
 public:
  ImagePadding(int64_t all = 0) : left_(all), top_(all), right_(all), bottom_(all) {}  ///< the same on each side
  /// {all}, {left/right, top/bottom} or {left, top, right, bottom}; tg::Error for another length.
  ImagePadding(std::initializer_list<int64_t> padding);
  int64_t left() const { return left_; }      ///< columns added before the first
  int64_t top() const { return top_; }        ///< rows added above the first
  int64_t right() const { return right_; }    ///< columns added after the last
  int64_t bottom() const { return bottom_; }  ///< rows added below the last

 private:
  int64_t left_, top_, right_, bottom_;
};

/// RandomCrop's options beside size and padding: torchvision's, with its defaults.
struct RandomCropOptions {
  /// Pads the height and then the width, on both sides, by what the (padded) image lacks of
  /// `size`, instead of refusing an image smaller than the crop.
  bool pad_if_needed = false;
  double fill = 0;  ///< the value of padded pixels, for padding_mode "constant" (converted to the image's dtype)
  /// "constant" (fill), "edge" (the last pixel repeated), "reflect" (mirrored without repeating the
  /// edge: 2 1 | 1 2 3 → 3 2 | ..., padding < the side's length) or "symmetric" (mirrored with the
  /// edge: 1 2 3 → 2 1 | 1 2 3, padding ≤ the side's length).
  std::string padding_mode = "constant";
  Generator* generator = nullptr;  ///< null: transform_generator() (not owned)
};

/// A crop of `size` at a random place of the image padded by `padding` (torchvision's
/// RandomCrop(size, padding, pad_if_needed, fill, padding_mode)): the image [..., H, W] is padded,
/// then the top row i = torch.randint(0, H' − h + 1) and the left column j = torch.randint(0,
/// W' − w + 1) are drawn, in that order, one draw each; an image exactly of the crop's size is
/// returned as it is, with no draw.
class RandomCrop {
 public:
  /// tg::Error for a size < 1, a negative padding, or an unknown padding_mode.
  RandomCrop(ImageSize size, ImagePadding padding = 0, RandomCropOptions options = {});
  /// tg::Error for an image with fewer than 2 dims or no elements, a padding that its mode cannot
  /// make ("reflect": not less than the side; "symmetric": longer than the side), or a padded image
  /// smaller than the crop (torchvision's "Required crop size ... is larger than input image size").
  Tensor operator()(const Tensor& image) const;

 private:
  ImageSize size_;
  ImagePadding padding_;
  RandomCropOptions options_;
};

/// The image [..., H, W] mirrored left to right with probability p (torchvision's
/// RandomHorizontalFlip(p)): one draw, torch.rand(1) < p.
class RandomHorizontalFlip {
 public:
  /// tg::Error unless 0 <= p <= 1 (torchvision takes any p; one outside [0, 1] is surely a mistake).
  explicit RandomHorizontalFlip(double p = 0.5, Generator* generator = nullptr);
  Tensor operator()(const Tensor& image) const;  ///< tg::Error for an image with fewer than 2 dims

 private:
  double p_;
  Generator* generator_;
};

/// RandomErasing's options: torchvision's, with its defaults.
struct RandomErasingOptions {
  double p = 0.5;  ///< the probability of erasing a rectangle at all
  std::pair<double, double> scale = {0.02, 0.33};  ///< the range of the erased area, as a fraction of H·W
  std::pair<double, double> ratio = {0.3, 3.3};    ///< the range of its aspect ratio h / w (drawn log-uniformly)
  /// The erased pixels' value: one for every channel, or one per channel. Ignored when random_value.
  std::vector<double> value = {0};
  bool random_value = false;  ///< torchvision's value="random": each erased pixel from N(0, 1)
  Generator* generator = nullptr;  ///< null: transform_generator() (not owned)
};

/// Erases a random rectangle of a float image [..., C, H, W] with probability p (torchvision's
/// RandomErasing; the same rectangle in every image of a batch). The draws, as torchvision's:
/// torch.rand(1) < p; then up to 10 attempts, each drawing the area fraction U(scale) and
/// log(h / w) ~ U(log ratio) (float32), h = round(√(area·ratio)), w = round(√(area / ratio)),
/// until h < H and w < W; then (random_value) the [C, h, w] normal values, the top row
/// torch.randint(0, H − h + 1) and the left column torch.randint(0, W − w + 1). When no attempt
/// fits the image is returned unchanged.
class RandomErasing {
 public:
  /// tg::Error unless 0 <= p <= 1, 0 <= scale.first <= scale.second <= 1, 0 < ratio.first <=
  /// ratio.second (all finite), and value holds at least one finite number.
  explicit RandomErasing(RandomErasingOptions options = {});
  /// tg::Error for an image that is not float32 or float64, has fewer than 3 dims, or (value of
  /// several numbers) has a number of channels other than value's length.
  Tensor operator()(const Tensor& image) const;

 private:
  RandomErasingOptions options_;
};

}  // namespace tg::data::transforms
