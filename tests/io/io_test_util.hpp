// Paths and raw file access shared by the io tests.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "support/fixtures.hpp"

namespace tg::io_test {

// A committed input file in tests/io/fixtures.
inline std::string fixture_path(const std::string& name) { return std::string(TG_IO_FIXTURE_DIR) + "/" + name; }
// A file the test may create, in the build tree.
inline std::string scratch_path(const std::string& name) { return std::string(TG_IO_SCRATCH_DIR) + "/" + name; }

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace tg::io_test
