/// @file
/// tg::nn::init — PyTorch's torch.nn.init: fill a tensor (usually a parameter) in place with the
/// values PyTorch's function of the same name draws for the same seed.
///
/// @code
///   tg::nn::Linear layer(128, 64);
///   tg::nn::init::kaiming_normal_(layer.weight, 0.0, tg::nn::init::FanMode::FanOut,
///                                 tg::nn::init::Nonlinearity::ReLU);
///   tg::nn::init::zeros_(layer.bias);
/// @endcode
///
/// Each function runs without recording on the tape (as PyTorch's run under torch.no_grad()), so it
/// works on parameters that require grad, and returns its argument. The random ones draw from
/// `generator`, or from the default generator (tg::manual_seed) when it is null.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "tapegrad/tensor.hpp"

/// torch.nn.init: in-place initialisers that draw PyTorch's values for the same seed.
namespace tg::nn::init {

/// Which fan kaiming_* scales by: fan_in keeps the forward pass's variance, fan_out the backward's.
enum class FanMode { FanIn, FanOut };

/// The nonlinearity that follows the layer, for calculate_gain.
enum class Nonlinearity {
  Linear, Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
  Sigmoid, Tanh, ReLU, LeakyReLU, SELU
};

/// The recommended gain for a nonlinearity: 1 for linear, conv and sigmoid, 5/3 for tanh, √2 for
/// relu, √(2 / (1 + slope²)) for leaky_relu (slope = param, 0.01 when absent), 3/4 for selu.
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);

/// {fan_in, fan_out} of a weight [out, in, k...]: in·Πk and out·Πk. tg::Error below 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

/// U(low, high).
Tensor& uniform_(Tensor& tensor, double low = 0.0, double high = 1.0, Generator* generator = nullptr);
/// N(mean, std²).
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
Tensor& constant_(Tensor& tensor, double value);  ///< every element value
Tensor& zeros_(Tensor& tensor);                   ///< every element 0
Tensor& ones_(Tensor& tensor);                    ///< every element 1

/// U(−b, b) and N(0, s²) with s = gain·√(2 / (fan_in + fan_out)), b = √3·s (Glorot & Bengio, 2010).
///@{
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0, Generator* generator = nullptr);
///@}

/// U(−b, b) and N(0, s²) with s = calculate_gain(nonlinearity, a) / √fan, b = √3·s (He et al., 2015);
/// `a` is the negative slope of a leaky_relu. A tensor without elements is left alone.
///@{
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU, Generator* generator = nullptr);
///@}

/// N(mean, std²) restricted to [a, b], by inverting the normal CDF of a uniform draw (PyTorch's
/// method: U(2Φ(α) − 1, 2Φ(β) − 1), then erfinv, scale, shift and clamp).
Tensor& trunc_normal_(Tensor& tensor, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                      Generator* generator = nullptr);

}  // namespace tg::nn::init
