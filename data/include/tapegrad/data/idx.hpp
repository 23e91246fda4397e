/// @file
/// IDX files, the format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/): two zero
/// bytes, a type byte, the number of dims, each dim as a big-endian uint32, then the values in
/// row-major order, big-endian. Plain or gzip-compressed (recognised by its magic bytes 1f 8b, not
/// by the name). tapegrad has no 8-, 16- or 32-bit dtypes, so the types map to:
///
/// @code
///   type byte  stored               tensor
///   0x08       unsigned 8-bit       int64
///   0x09       signed 8-bit         int64
///   0x0B       signed 16-bit        int64
///   0x0C       signed 32-bit        int64
///   0x0D       float32              float32
///   0x0E       float64              float64
/// @endcode
///
/// @code
///   tg::Tensor images = tg::data::read_idx("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
///   // int64 [60000, 28, 28], values 0 ... 255
/// @endcode
#pragma once

#include <string>

#include "tapegrad/dtype.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::data {

/// The tensor in the IDX file at `path`. A missing, unreadable, corrupt or truncated file, or one
/// with bytes after its data, is a tg::Error naming the file and the byte offset where it breaks
/// (an offset in the decompressed bytes for a .gz file's contents).
Tensor read_idx(const std::string& path);
/// The same, converted to `dtype` as it is read (as .to(dtype), without the int64 tensor in
/// between): read_idx(path, tg::kFloat32) holds 60,000 images in 188 MB instead of 376.
Tensor read_idx(const std::string& path, DType dtype);

}  // namespace tg::data
