// Paths and raw file access shared by the io tests.
#pragma once

#include <cstdint>
#include <cstdio>
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

// CRC-32C bit by bit, straight from the definition (reflected polynomial 0x82F63B78): an
// independent reference for the library's table and SSE4.2 versions.
inline uint32_t reference_crc32c(const std::string& bytes) {
  uint32_t crc = ~0u;
  for (const char c : bytes) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
  }
  return ~crc;
}

// Where the 8 hex digits of a checkpoint's whole-file checksum start (after the key, a colon and
// a quote, with or without JSON spaces between them), or npos.
inline size_t file_checksum_offset(const std::string& bytes) {
  const size_t key = bytes.find("\"tapegrad.file_crc32c\"");
  if (key == std::string::npos) return key;
  const size_t quote = bytes.find('"', bytes.find(':', key + 22));
  return quote == std::string::npos ? quote : quote + 1;
}

// The checkpoint `bytes` with its whole-file checksum recomputed, as a writer of the format
// would: the CRC-32C of the file with the 8 digits set to "00000000". Lets a test edit a header
// and still reach the checks behind the checksum.
inline std::string reseal(std::string bytes) {
  const size_t at = file_checksum_offset(bytes);
  if (at == std::string::npos) return bytes;
  bytes.replace(at, 8, "00000000");
  char digits[9];
  std::snprintf(digits, sizeof digits, "%08x", reference_crc32c(bytes));
  bytes.replace(at, 8, digits);
  return bytes;
}

}  // namespace tg::io_test
