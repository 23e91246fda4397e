/// @file
/// Exchanging tensors with NumPy and PyTorch through .npy files.
///
/// @code
///   tg::save_npy(t, "weights.npy");         // np.load("weights.npy") in Python
///   tg::Tensor u = tg::load_npy("x.npy");   // from np.save("x.npy", array)
/// @endcode
///
/// Supported: float32 ('<f4') and float64 ('<f8'), C order, format versions 1.0 and 2.0. Anything
/// else (Fortran order, other dtypes, big-endian data, a truncated file or a malformed header)
/// throws tg::Error saying what is wrong with which file.
#pragma once

#include <string>

#include "tapegrad/tensor.hpp"

namespace tg {

void save_npy(const Tensor& tensor, const std::string& path);  ///< writes tensor to the .npy file `path`
Tensor load_npy(const std::string& path);                      ///< reads the .npy file `path`

/// The same from and to memory (what the file functions use; handy for fuzzing and for tests).
///@{
std::string encode_npy(const Tensor& tensor);
Tensor decode_npy(const std::string& bytes, const std::string& source = "<memory>");
///@}

}  // namespace tg
