// Copying whole rows (slices along dim 0) between tensors: what a dataset's get and the collate
// need, for every dtype, without recording anything on the tape.
#pragma once

#include <cstdint>
#include <vector>

#include "tapegrad/tensor.hpp"

namespace tg::data::detail {

// tensor[index] as a new tensor of shape tensor.shape()[1:]; 0 <= index < tensor.size(0).
Tensor copy_row(const Tensor& tensor, int64_t index);

// The rows of `tensor` at `indices` (each 0 <= index < tensor.size(0)), in that order, as one new
// tensor [indices.size(), tensor.shape()[1:]...].
Tensor gather_rows(const Tensor& tensor, const std::vector<int64_t>& indices);

// The tensors, all of one shape S and dtype, as rows of one new tensor [n, S...]. tg::Error naming
// `op`, `what` ("data" or "target") and the first tensor that differs from the first one.
Tensor stack_rows(const std::vector<Tensor>& tensors, const char* op, const char* what);

}  // namespace tg::data::detail
