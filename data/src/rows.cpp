#include "rows.hpp"

#include <cstring>

#include "dispatch.hpp"

namespace tg::data::detail {

namespace {

// The bytes of a contiguous tensor (every tapegrad tensor is), whatever its dtype.
const char* bytes_of(const Tensor& tensor) {
  return tg::detail::dispatch_all("copy_row", tensor.dtype(),
                                  [&]<typename T>() { return reinterpret_cast<const char*>(tensor.data<T>()); });
}
char* mutable_bytes_of(Tensor& tensor) {
  return tg::detail::dispatch_all("copy_row", tensor.dtype(),
                                  [&]<typename T>() { return reinterpret_cast<char*>(tensor.mutable_data<T>()); });
}

}  // namespace

Tensor copy_row(const Tensor& tensor, int64_t index) {
  const Shape row_shape(tensor.shape().begin() + 1, tensor.shape().end());
  Tensor row = empty(row_shape, tensor.dtype());
  const size_t row_bytes = static_cast<size_t>(row.numel()) * element_size(tensor.dtype());
  if (row_bytes > 0) std::memcpy(mutable_bytes_of(row), bytes_of(tensor) + static_cast<size_t>(index) * row_bytes, row_bytes);
  return row;
}

Tensor gather_rows(const Tensor& tensor, const std::vector<int64_t>& indices) {
  Shape batch_shape = tensor.shape();
  batch_shape[0] = static_cast<int64_t>(indices.size());
  Tensor batch = empty(batch_shape, tensor.dtype());
  const size_t row_bytes = tensor.size(0) > 0 ? static_cast<size_t>(tensor.numel() / tensor.size(0)) * element_size(tensor.dtype()) : 0;
  if (row_bytes == 0) return batch;
  const char* rows = bytes_of(tensor);
  char* out = mutable_bytes_of(batch);
  for (size_t i = 0; i < indices.size(); ++i)
    std::memcpy(out + i * row_bytes, rows + static_cast<size_t>(indices[i]) * row_bytes, row_bytes);
  return batch;
}

Tensor stack_rows(const std::vector<Tensor>& tensors, const char* op, const char* what) {
  check(!tensors.empty(), op, "no samples to stack");
  const Tensor& first = tensors.front();
  for (size_t i = 0; i < tensors.size(); ++i) {
    check(tensors[i].defined(), op, "the ", what, " of sample ", i, " is undefined");
    check(tensors[i].shape() == first.shape() && tensors[i].dtype() == first.dtype(), op, "every sample's ", what,
          " must have one shape and dtype: sample 0 has ", first.shape(), " ", first.dtype(), ", sample ", i, " has ",
          tensors[i].shape(), " ", tensors[i].dtype());
  }
  Shape batch_shape{static_cast<int64_t>(tensors.size())};
  batch_shape.insert(batch_shape.end(), first.shape().begin(), first.shape().end());
  Tensor batch = empty(batch_shape, first.dtype());
  const size_t row_bytes = static_cast<size_t>(first.numel()) * element_size(first.dtype());
  if (row_bytes == 0) return batch;
  char* out = mutable_bytes_of(batch);
  for (size_t i = 0; i < tensors.size(); ++i) std::memcpy(out + i * row_bytes, bytes_of(tensors[i]), row_bytes);
  return batch;
}

}  // namespace tg::data::detail
