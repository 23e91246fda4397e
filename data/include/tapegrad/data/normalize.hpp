/// @file
/// Standardising a whole data set once, in place: its mean and standard deviation measured without
/// a temporary of its size, then (x - mean) / std written over x, as torchvision's
/// Normalize(mean, std, inplace=True) does per sample.
///
/// @code
///   tg::Tensor images = tg::data::read_idx("train-images-idx3-ubyte.gz", tg::kFloat32);  // 0 ... 255
///   const tg::data::Moments moments = tg::data::moments(images);  // images.mean(), images.std()
///   tg::data::normalize_(images, moments.mean, moments.stddev);      // mean 0, std 1
/// @endcode
///
/// For 60,000 Fashion-MNIST images (188 MB of float32) the out-of-place way, (x - x.mean()) / x.std(),
/// makes four more tensors of that size (std's x - mean and its square, then the two results), and
/// the kernel clears every fresh page of them: most of the time spent reading the data.
#pragma once

#include "tapegrad/tensor.hpp"

namespace tg::data {

/// What moments() returns.
struct Moments {
  double mean;    ///< the mean of every element
  double stddev;  ///< unbiased (correction 1), as torch's x.std()
};

/// x.mean() and x.std() of every element of a float32 or float64 tensor, computed in double in two
/// passes over x (the second sums (x - mean)², free of the cancellation of E[x²] - E[x]²). The same
/// bits at any thread count. As torch's, the mean of no elements is NaN, and so is the std of fewer
/// than two. tg::Error for an undefined or non-floating tensor.
Moments moments(const Tensor& x);

/// x = (x - mean) / stddev, elementwise and in place, in x's dtype: mean and stddev are rounded to it
/// first, as torch's x.sub_(mean).div_(std) does with Python numbers. Not recorded on the tape.
/// tg::Error for an undefined or non-floating tensor, one that requires grad while grad mode is on
/// (as Tensor::fill_), and a mean or stddev that is not finite or a stddev that is 0 in x's dtype
/// (torchvision's "std evaluated to zero").
Tensor& normalize_(Tensor& x, double mean, double stddev);

}  // namespace tg::data
