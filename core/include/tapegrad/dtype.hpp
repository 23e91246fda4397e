// Element types and shapes.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>
#include <vector>

namespace tg {

using Shape = std::vector<int64_t>;

enum class DType : uint8_t { Float32, Float64 };
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;

constexpr std::string_view name(DType dtype) { return dtype == DType::Float32 ? "float32" : "float64"; }
constexpr size_t element_size(DType dtype) { return dtype == DType::Float32 ? 4 : 8; }
inline std::ostream& operator<<(std::ostream& out, DType dtype) { return out << name(dtype); }

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return kFloat32; }
template <>
constexpr DType dtype_of<double>() { return kFloat64; }

}  // namespace tg
