// Scratch files and tensor helpers shared by the tg::data tests.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "support/fixtures.hpp"

namespace tg::data_test {

// A file the test may create, in the build tree.
inline std::string scratch_path(const std::string& name) { return std::string(TG_DATA_SCRATCH_DIR) + "/" + name; }

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// `bytes` as a gzip file, written by zlib's own gzip writer (not the library's reader).
inline void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 0, 1, ..., n − 1 as int64.
inline Tensor arange(int64_t n) {
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<double>(i);
  return tensor(values, {n}, kInt64);
}

}  // namespace tg::data_test
