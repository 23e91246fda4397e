// Whole-file reads and crash-safe whole-file writes, shared by the .npy and checkpoint formats.
#pragma once

#include <string>

namespace tg::detail {

// The bytes of the regular file at `path`. Anything else (a FIFO, a device, a directory) is
// refused before a byte is read, so a load never blocks on a pipe or reads /dev/zero forever; the
// buffer is sized by the file's real size. tg::Error naming `op` and the path on any failure,
// including running out of memory (never a short read passed off as the file).
std::string read_file(const std::string& path, const char* op);

// Replaces `path` with `bytes` atomically: writes a temporary file in the same directory, flushes
// and fsyncs it, renames it over `path`, then fsyncs the directory. A crash or a full disk at any
// moment leaves either the old file or the new one, never a mix. Throws tg::Error naming `op`.
//
// What it replaces: only a regular file, which keeps its mode (and owner and group where the
// process may set them); a symbolic link is followed and its final target replaced, the link
// left as it is. Refused without touching anything: a directory, device, FIFO or socket, a
// dangling link, a read-only file (no write bit, or not writable by this process), and a file
// with other hard links (replacing one name would leave the others holding the old data). A new
// file gets the mode any new file gets (0666 minus the umask).
//
// Concurrent writes to one path, from threads or processes, all succeed: each has its own
// temporary file, the last rename wins, and a reader opens either the old file or one writer's
// whole new file. The file a concurrent write has just replaced (st_nlink == 0) counts as having
// no other names.
void write_file_atomically(const std::string& path, const std::string& bytes, const char* op);

}  // namespace tg::detail
