// Whole-file reads and crash-safe whole-file writes, shared by the .npy and checkpoint formats.
#pragma once

#include <string>

namespace tg::detail {

// The file's bytes, or tg::Error naming `op` and the path.
std::string read_file(const std::string& path, const char* op);

// Replaces `path` with `bytes` atomically: writes a temporary file in the same directory, flushes
// and fsyncs it, renames it over `path`, then fsyncs the directory. A crash or a full disk at any
// moment leaves either the old file or the new one, never a mix. Throws tg::Error naming `op`.
void write_file_atomically(const std::string& path, const std::string& bytes, const char* op);

}  // namespace tg::detail
