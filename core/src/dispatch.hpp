// Runs a generic lambda for the C++ type behind a runtime dtype:
//   dispatch(t.dtype(), [&]<typename T>() { kernel<T>(t.data<T>(), ...); });
#pragma once

#include "tapegrad/dtype.hpp"

namespace tg::detail {

template <typename Fn>
decltype(auto) dispatch(DType dtype, Fn&& fn) {
  if (dtype == kFloat32) return fn.template operator()<float>();
  return fn.template operator()<double>();
}

}  // namespace tg::detail
