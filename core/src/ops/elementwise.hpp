// Broadcasting helpers shared by the core ops and by other kernels' backward passes (nn's losses);
// the plain elementwise loops map/map2 are one level down, in map.hpp.
#pragma once

#include "map.hpp"
#include "tensor_impl.hpp"

namespace tg::detail {

// Repeats x (times scale) along the dims where it has size 1 or is missing, to `shape`; the
// caller has checked that x broadcasts to `shape`. Not recorded.
Tensor broadcast_to(const Tensor& x, const Shape& shape, double scale = 1.0);

}  // namespace tg::detail
