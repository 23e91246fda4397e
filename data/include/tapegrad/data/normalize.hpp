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
///
/// A table [N, F] is standardised per feature (per column), as scikit-learn's StandardScaler or
/// torch's (x - x.mean(0)) / x.std(0): the moments of the training split, applied to both splits.
///
/// @code
///   const tg::data::TensorMoments columns = tg::data::moments(train_x, {0});  // mean, stddev: [F]
///   tg::data::normalize_(train_x, columns.mean, columns.stddev);
///   tg::data::normalize_(test_x, columns.mean, columns.stddev);              // the training split's
/// @endcode
///
/// Images [N, C, H, W] per channel: moments(images, {0, 2, 3}, 1, true) gives [1, C, 1, 1].
/// StandardScaler divides by the population std: pass correction 0 for its numbers.
#pragma once

#include <vector>

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

/// The mean and standard deviation of a tensor along some of its dims, as torch.std_mean returns
/// them (in the other order): one value per position of the dims that are kept.
struct TensorMoments {
  Tensor mean;    ///< x.mean(dims, keepdim), in x's dtype
  Tensor stddev;  ///< x.std(dims, correction, keepdim), in x's dtype
};

/// torch.std_mean(x, dim=dims, correction=correction, keepdim=keepdim) of a float32 or float64
/// tensor, without a temporary of x's size: each result in double, in two passes over x (the
/// second sums (x - mean)², free of the cancellation of E[x²] - E[x]²), then rounded to x's dtype.
/// The divisor of the variance is max(n - correction, 0) for n elements per result (correction 1:
/// unbiased, torch's default; 0: the population std of scikit-learn's StandardScaler), so a
/// result of no elements is NaN, and so is the unbiased std of one. `dims` may be negative; an
/// empty list reduces every dim, as torch's. The same bits at any thread count. tg::Error for an
/// undefined or non-floating tensor, a dim out of range or listed twice, and a NaN correction.
TensorMoments moments(const Tensor& x, const std::vector<int64_t>& dims, double correction = 1, bool keepdim = false);

/// x = (x - mean) / stddev, elementwise and in place, in x's dtype: mean and stddev are rounded to it
/// first, as torch's x.sub_(mean).div_(std) does with Python numbers. Not recorded on the tape.
/// tg::Error for an undefined or non-floating tensor, one that requires grad while grad mode is on
/// (as Tensor::fill_), and a mean or stddev that is not finite or a stddev that is 0 in x's dtype
/// (torchvision's "std evaluated to zero").
Tensor& normalize_(Tensor& x, double mean, double stddev);

/// x = (x - mean) / stddev in place, with `mean` and `stddev` float tensors that broadcast to x's
/// shape (NumPy's rules: [F] against [N, F] is per column, [1, C, 1, 1] against [N, C, H, W] per
/// channel), such as moments(x, dims) returns; their values are rounded to x's dtype first, as the
/// scalar overload does. Not recorded on the tape. tg::Error as the scalar overload (an undefined
/// or non-floating x, one that requires grad while grad mode is on), for a mean or stddev of a
/// shape that does not broadcast to x's, and for a mean or stddev element that is not finite or a
/// stddev element that is 0 in x's dtype, naming its index (a constant feature: drop it, or
/// replace its stddev by 1 as StandardScaler does).
Tensor& normalize_(Tensor& x, const Tensor& mean, const Tensor& stddev);

}  // namespace tg::data
