#include "io/file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "tapegrad/error.hpp"

namespace tg::detail {

namespace {

// Throws tg::Error("<op>: <parts>: <strerror(error)>"). The caller passes errno straight from the
// failed call: reading it later would report whatever a cleanup call left there instead.
template <typename... Parts>
[[noreturn]] void throw_system_error(int error, const char* op, const Parts&... parts) {
  throw Error(concat(op, ": ", parts..., ": ", std::strerror(error)));
}

// Closes a descriptor when it goes out of scope.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace

std::string read_file(const std::string& path, const char* op) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer before fstat can refuse it.
  Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (file.fd < 0) throw_system_error(errno, op, "cannot open '", path, "'");
  struct stat status {};
  if (::fstat(file.fd, &status) != 0) throw_system_error(errno, op, "cannot stat '", path, "'");
  check(S_ISREG(status.st_mode), op, "'", path, "' is ", kind_of(status.st_mode),
        "; only regular files are read");
  const size_t size = static_cast<size_t>(status.st_size);
  std::string bytes;
  try {
    bytes.resize(size);
  } catch (const std::bad_alloc&) {
    throw Error(concat(op, ": cannot allocate ", size, " bytes to read '", path, "'"));
  } catch (const std::length_error&) {
    throw Error(concat(op, ": cannot allocate ", size, " bytes to read '", path, "'"));
  }
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::read(file.fd, bytes.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_system_error(errno, op, "reading '", path, "' failed after ", done, " of ", size, " bytes");
    check(n > 0, op, "'", path, "' shrank from ", size, " to ", done, " bytes while being read");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// Where the bytes go: `path`, or the final target when `path` is a symbolic link, and the status
// of the file there now (exists == false for a new file).
struct Destination {
  std::string path;
  bool exists = false;
  struct stat status {};
};

// lstat of a name that another save (a thread or a process) may be renaming a new file onto at
// this very moment. The kernel looks the name up, then reads the inode it found; a rename in
// between unlinks that inode, and its status comes back with st_nlink == 0: the status of a file
// that no name holds any more (over NFS, the same race is ESTALE). Looking again finds the file
// that replaced it, whose mode and owner are the ones to keep. A name replaced faster than it can
// be looked at still leaves nlink == 0, which means "no other names" all the same. Returns 0 or
// the errno of the last lookup.
int current_status(const char* name, struct stat& status) {
  constexpr int kLookups = 100;
  int error = 0;
  for (int lookup = 0; lookup < kLookups; ++lookup) {
    error = ::lstat(name, &status) == 0 ? 0 : errno;
    if (error == ESTALE) continue;
    if (error != 0 || status.st_nlink != 0) return error;
  }
  return error;
}

Destination destination_of(const std::string& path, const char* op) {
  Destination destination{path};
  if (const int error = current_status(path.c_str(), destination.status)) {
    if (error != ENOENT) throw_system_error(error, op, "cannot stat '", path, "'");
    return destination;
  }
  if (S_ISLNK(destination.status.st_mode)) {
    char target[PATH_MAX];
    if (::realpath(path.c_str(), target) == nullptr)
      throw_system_error(errno, op, "cannot follow the symbolic link '", path, "' to its target");
    destination.path = target;
    if (const int error = current_status(target, destination.status))
      throw_system_error(error, op, "cannot stat '", target, "', the target of '", path, "'");
  }
  destination.exists = true;
  const std::string& file = destination.path;
  const mode_t mode = destination.status.st_mode;
  check(S_ISREG(mode), op, "'", file, "' is ", kind_of(mode), "; save only replaces regular files");
  // Root passes every access check, so a file without any write bit counts as read-only too.
  if ((mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0) {
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode & 07777));
    throw Error(concat(op, ": '", file, "' is read-only (mode ", octal, "); make it writable to replace it"));
  }
  if (::faccessat(AT_FDCWD, file.c_str(), W_OK, AT_EACCESS) != 0)
    throw_system_error(errno, op, "'", file, "' is not writable by this process");
  // Other names would keep the old data; nlink 0 (see current_status) is a file with none at all.
  check(destination.status.st_nlink <= 1, op, "'", file, "' has ", destination.status.st_nlink,
        " hard links; replacing it would leave the other names with the old data (remove them, or save to a new "
        "path)");
  return destination;
}

// A temporary file beside the destination: removed unless the write was committed.
struct TemporaryFile {
  std::string path;
  Descriptor file;
  bool committed = false;
  ~TemporaryFile() {
    if (!committed && !path.empty()) ::unlink(path.c_str());
  }
};

// Creates the temporary file under a short name of its own (not "<name>.tmp-XXXXXX", which
// would exceed NAME_MAX for a valid 250-byte name). O_EXCL makes a name collision a retry, never
// a shared file. A new file is created 0666 so that the kernel applies the umask (and a default
// ACL); a replacement starts private and then takes the old file's owner and mode.
void create_temporary(TemporaryFile& temp, const Destination& destination, const char* op) {
  static std::atomic<unsigned> counter{0};
  const std::string directory = directory_of(destination.path);
  const mode_t initial_mode = destination.exists ? 0600 : 0666;
  for (int attempt = 0;; ++attempt) {
    temp.path = concat(directory, "/.tapegrad-", ::getpid(), "-", counter++, ".tmp");
    temp.file.fd = ::open(temp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, initial_mode);
    if (temp.file.fd >= 0) break;
    const int error = errno;
    temp.path.clear();  // not ours: the destructor must not remove it
    if (error != EEXIST || attempt == 100)
      throw_system_error(error, op, "cannot create a temporary file in '", directory, "' to save '", destination.path,
                         "'");
  }
  if (!destination.exists) return;
  // The owner first: chown clears set-id bits, which the mode then restores. Only root may give a
  // file away, so failing to is expected and harmless; failing to set the mode is not.
  [[maybe_unused]] const int owned = ::fchown(temp.file.fd, destination.status.st_uid, destination.status.st_gid);
  if (::fchmod(temp.file.fd, destination.status.st_mode & 07777) != 0)
    throw_system_error(errno, op, "cannot give the temporary file '", temp.path, "' the mode of '", destination.path,
                       "'");
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes, const char* op) {
  const Destination destination = destination_of(path, op);
  const std::string& target = destination.path;
  TemporaryFile temp;
  create_temporary(temp, destination, op);
  for (size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(temp.file.fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw_system_error(n < 0 ? errno : ENOSPC, op, "writing '", target, "' failed after ", written, " of ",
                         bytes.size(), " bytes; the previous file is unchanged");
    written += static_cast<size_t>(n);
  }
  if (::fsync(temp.file.fd) != 0) throw_system_error(errno, op, "fsync of '", temp.path, "' failed");
  const int fd = temp.file.fd;
  temp.file.fd = -1;
  if (::close(fd) != 0) throw_system_error(errno, op, "closing '", temp.path, "' failed");
  if (::rename(temp.path.c_str(), target.c_str()) != 0)
    throw_system_error(errno, op, "cannot rename '", temp.path, "' to '", target, "'");
  temp.committed = true;
  // Persist the rename itself: without this a power loss could still bring the old entry back.
  const Descriptor directory{::open(directory_of(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (directory.fd >= 0) ::fsync(directory.fd);
}

}  // namespace tg::detail
