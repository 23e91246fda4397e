#include "io/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tapegrad/error.hpp"

namespace tg::detail {

std::string read_file(const std::string& path, const char* op) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), op, "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  check(!in.bad(), op, "error while reading '", path, "'");
  return bytes.str();
}

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// Closes the descriptor and removes the temporary file unless the write was committed.
struct TemporaryFile {
  std::string path;
  int fd = -1;
  bool committed = false;
  ~TemporaryFile() {
    if (fd >= 0) ::close(fd);
    if (!committed) ::unlink(path.c_str());
  }
};

// The permissions a plainly created file would get: 0666 minus the process umask. mkstemp makes
// its file 0600, which would turn every saved checkpoint private. The umask is read from
// /proc (umask() itself can only be read by changing it, which would race with other threads).
mode_t new_file_mode() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(0666 & ~std::stoul(line.substr(6), nullptr, 8));
  return 0644;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes, const char* op) {
  TemporaryFile temp{path + ".tmp-XXXXXX"};
  temp.fd = ::mkstemp(temp.path.data());
  check(temp.fd >= 0, op, "cannot create a temporary file next to '", path, "': ", std::strerror(errno));
  ::fchmod(temp.fd, new_file_mode());
  for (size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(temp.fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    check(n > 0, op, "writing '", path, "' failed after ", written, " of ", bytes.size(), " bytes: ",
          std::strerror(errno), "; the previous file is unchanged");
    written += static_cast<size_t>(n);
  }
  check(::fsync(temp.fd) == 0, op, "fsync of '", temp.path, "' failed: ", std::strerror(errno));
  check(::close(temp.fd) == 0, op, "closing '", temp.path, "' failed: ", std::strerror(errno));
  temp.fd = -1;
  check(::rename(temp.path.c_str(), path.c_str()) == 0, op, "cannot rename '", temp.path, "' to '", path,
        "': ", std::strerror(errno));
  temp.committed = true;
  // Persist the rename itself: without this a power loss could still bring the old entry back.
  const int dir = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace tg::detail
