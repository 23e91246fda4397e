// Index kernels shared by the core's indexing ops and nn's Embedding. Private to the library.
#pragma once

#include <cstdint>

#include "ops/along_dim.hpp"

namespace tg::detail {

// tg::Error naming `op` for the first of the n indices outside [0, size): "index 7 is out of range
// for dim 0 of size 5".
void check_indices(const int64_t* index, int64_t n, int64_t size, int64_t dim, const char* op);

// src: [outer, n, inner], index: [n] in [0, dst.size) -> out: [outer, n, inner],
// out[o, k, :] = src[o, index[k], :] (index_select, embedding).
template <typename T>
void index_rows(const T* src, const AlongDim& src_layout, const int64_t* index, int64_t n, T* out);

// dst: [outer, size, inner] += src: [outer, n, inner] at rows index[k]; rows equal to `skip` (or
// none when skip < 0) get nothing. Deterministic without atomics: the indices are bucketed by
// destination row (a stable counting sort), then destination rows run in parallel, each adding its
// contributions in increasing k.
template <typename T>
void index_add(T* dst, const AlongDim& dst_layout, const int64_t* index, int64_t n, const T* src, int64_t skip = -1);

}  // namespace tg::detail
