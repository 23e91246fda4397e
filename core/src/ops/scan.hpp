// The scans along one dim (ops/scan.cpp), for the ops whose gradients are built on them (prod).
// Private to core.
#pragma once

#include "tensor_impl.hpp"

namespace tg::detail {

// Running products along dim d (normalised), from the end when reverse: cumprod, recorded.
Tensor scan_prod(const Tensor& x, int64_t d, bool reverse);

// The product of each element's predecessors along d in the scan's direction (Π_{j<k} x[j], or
// Π_{j>k} x[j] when reverse), 1 for the first: recorded, and exact with zeros in x.
Tensor exclusive_scan_prod(const Tensor& x, int64_t d, bool reverse);

}  // namespace tg::detail
