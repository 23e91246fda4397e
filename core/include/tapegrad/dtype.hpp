/// @file
/// Element types and shapes.
///
/// Five dtypes, as in PyTorch: float32 (the default), float64 and bfloat16 for values that take
/// part in autograd, int64 for class indices and counts, and bool for masks. Integer and bool
/// tensors never require grad. Each dtype has one C++ element type:
///
/// @code
///   DType      C++ type       bytes  PyTorch          .npy   safetensors
///   kFloat32   float          4      torch.float32    <f4    F32
///   kFloat64   double         8      torch.float64    <f8    F64
///   kBFloat16  tg::BFloat16   2      torch.bfloat16   —      BF16
///   kInt64     int64_t        8      torch.int64      <i8    I64
///   kBool      bool           1      torch.bool       |b1    BOOL
/// @endcode
///
/// bfloat16 (bfloat16.hpp) keeps float32's exponent range with 8 significant bits. Its ops compute
/// as PyTorch's CPU kernels do: the inputs widened to float32 (exactly), the float32 kernel, the
/// result rounded once to bfloat16. .npy has no bfloat16: cast with .to(tg::kFloat32) to save one.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>
#include <vector>

#include "tapegrad/bfloat16.hpp"

namespace tg {

using Shape = std::vector<int64_t>;  ///< the size of each dim of a tensor, outermost first

// Adding a dtype: add it here, to kDTypeCount, to the switches below and to detail::dispatch
// (core/src/dispatch.hpp), whose static_assert on kDTypeCount stops the build until it is listed.
/// The element type of a tensor (the table above).
enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16 };
inline constexpr int kDTypeCount = 5;  ///< the number of dtypes
inline constexpr DType kFloat32 = DType::Float32;  ///< float, torch.float32 (the default)
inline constexpr DType kFloat64 = DType::Float64;  ///< double, torch.float64
inline constexpr DType kInt64 = DType::Int64;      ///< int64_t, torch.int64
inline constexpr DType kBool = DType::Bool;        ///< bool, torch.bool
inline constexpr DType kBFloat16 = DType::BFloat16;  ///< tg::BFloat16, torch.bfloat16

/// "float32", "float64", "int64", "bool" or "bfloat16".
constexpr std::string_view name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
  }
  return "invalid dtype";  // only for a value cast from outside the enum
}

/// Bytes per element: 4, 8, 8, 1 or 2.
constexpr size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
  }
  return 0;
}

/// float32, float64 and bfloat16: the dtypes that arithmetic, reductions and autograd support.
constexpr bool is_floating_point(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16;
}

inline std::ostream& operator<<(std::ostream& out, DType dtype) { return out << name(dtype); }  ///< prints name(dtype)

/// The dtype of the C++ element type T: dtype_of<float>() is kFloat32, and so on.
///@{
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return kFloat32; }
template <>
constexpr DType dtype_of<double>() { return kFloat64; }
template <>
constexpr DType dtype_of<int64_t>() { return kInt64; }
template <>
constexpr DType dtype_of<bool>() { return kBool; }
template <>
constexpr DType dtype_of<BFloat16>() { return kBFloat16; }
///@}

}  // namespace tg
