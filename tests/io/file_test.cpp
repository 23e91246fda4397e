// What save and load do with the file system: which files a save may replace and how (mode,
// owner, symbolic links, hard links, read-only files), which files a load refuses before reading
// (FIFOs, devices), the error text of failed system calls, and long file names.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "io_test_util.hpp"

using tg::io_test::read_bytes;
using tg::io_test::scratch_path;
using tg::io_test::write_bytes;

namespace {

// A fresh path in the scratch directory: whatever a previous run left there is removed.
std::string fresh_path(const std::string& name) {
  const std::string path = scratch_path(name);
  std::remove(path.c_str());
  ::rmdir(path.c_str());
  return path;
}

struct stat status_of(const std::string& path) {
  struct stat status {};
  REQUIRE(::lstat(path.c_str(), &status) == 0);
  return status;
}

// A model whose saved bytes change with `value`, so a replaced file is told from the old one.
tg::nn::Linear model_filled_with(double value) {
  tg::nn::Linear model(3, 2);
  tg::NoGradGuard no_grad;
  model.weight.fill_(value);
  model.bias.fill_(value);
  return model;
}

double loaded_value(const std::string& path) {
  tg::nn::Linear model(3, 2);
  tg::load(model, path);
  return model.bias.to_vector<float>()[0];
}

// Runs `body` in a child process that is killed after 10 s, and returns its exit status, or -1
// when it was killed: a load that blocks on a FIFO or reads /dev/zero forever fails the test
// instead of hanging the suite.
template <typename Body>
int exit_status_within_10s(Body&& body) {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(10);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// 0 when `load` throws tg::Error whose message contains `expected`, 1 otherwise.
template <typename Load>
int refuses_with(Load&& load, const char* expected) {
  try {
    load();
  } catch (const tg::Error& error) {
    return std::strstr(error.what(), expected) != nullptr ? 0 : 1;
  }
  return 1;
}

}  // namespace

TEST_CASE("save refuses to replace a directory or a FIFO, and leaves it as it was", "[io][file]") {
  tg::nn::Linear model = model_filled_with(1.0);
  const std::string directory = fresh_path("save_onto_dir");
  REQUIRE(::mkdir(directory.c_str(), 0755) == 0);
  REQUIRE_THROWS_WITH(tg::save(model, directory), Catch::Contains("is a directory") &&
                                                      Catch::Contains("only replaces regular files"));
  REQUIRE(S_ISDIR(status_of(directory).st_mode));

  const std::string fifo = fresh_path("save_onto_fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  REQUIRE_THROWS_WITH(tg::save_npy(tg::ones({2}), fifo), Catch::Contains("is a FIFO"));
  REQUIRE_THROWS_WITH(tg::save(model, fifo), Catch::Contains("is a FIFO"));
  REQUIRE(S_ISFIFO(status_of(fifo).st_mode));
}

TEST_CASE("save writes through a symbolic link to its target and keeps the link", "[io][file]") {
  const std::string target = fresh_path("link_target.safetensors"), link = fresh_path("link.safetensors");
  tg::nn::Linear first = model_filled_with(1.0);
  tg::save(first, target);
  REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);

  tg::nn::Linear second = model_filled_with(2.0);
  tg::save(second, link);
  REQUIRE(S_ISLNK(status_of(link).st_mode));
  REQUIRE(loaded_value(target) == 2.0);
  REQUIRE(loaded_value(link) == 2.0);

  // A link to nothing: refused, and nothing is created at its target.
  const std::string missing = fresh_path("missing_target.safetensors"), dangling = fresh_path("dangling.safetensors");
  REQUIRE(::symlink(missing.c_str(), dangling.c_str()) == 0);
  REQUIRE_THROWS_WITH(tg::save(second, dangling), Catch::Contains("symbolic link"));
  REQUIRE(::access(missing.c_str(), F_OK) != 0);
}

TEST_CASE("save keeps the mode of the file it replaces, and a new file gets the umask's", "[io][file]") {
  const std::string path = fresh_path("private.safetensors");
  tg::nn::Linear model = model_filled_with(1.0);
  for (const mode_t mode : {0600, 0640, 0664}) {
    tg::save(model, path);
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    tg::save(model, path);
    INFO("mode " << std::oct << mode);
    REQUIRE((status_of(path).st_mode & 07777) == mode);
  }

  // A new file: what open(..., 0666) gives under the current umask, as for any program.
  const mode_t umask_now = ::umask(022);
  ::umask(umask_now);
  const std::string fresh = fresh_path("fresh.safetensors");
  tg::save(model, fresh);
  REQUIRE((status_of(fresh).st_mode & 0777) == (0666 & ~umask_now));
}

TEST_CASE("save keeps the owner of the file it replaces where it may set it", "[io][file]") {
  if (::geteuid() != 0) {
    WARN("not root: only root may give a file to another owner, so there is nothing to check");
    return;
  }
  const std::string path = fresh_path("owned.safetensors");
  tg::nn::Linear model = model_filled_with(1.0);
  tg::save(model, path);
  REQUIRE(::chown(path.c_str(), 4321, 4322) == 0);
  tg::save(model, path);
  REQUIRE(status_of(path).st_uid == 4321);
  REQUIRE(status_of(path).st_gid == 4322);
}

TEST_CASE("save refuses a read-only file, even as root, and leaves it unchanged", "[io][file]") {
  const std::string path = fresh_path("read_only.safetensors");
  tg::nn::Linear model = model_filled_with(1.0);
  tg::save(model, path);
  REQUIRE(::chmod(path.c_str(), 0444) == 0);
  const std::string before = read_bytes(path);
  tg::nn::Linear other = model_filled_with(3.0);
  REQUIRE_THROWS_WITH(tg::save(other, path), Catch::Contains("read-only") && Catch::Contains("0444"));
  REQUIRE(read_bytes(path) == before);
  REQUIRE((status_of(path).st_mode & 07777) == 0444);
}

TEST_CASE("save refuses a file with other hard links instead of detaching it from them", "[io][file]") {
  const std::string path = fresh_path("linked.safetensors"), other_name = fresh_path("linked_too.safetensors");
  tg::nn::Linear model = model_filled_with(1.0);
  tg::save(model, path);
  REQUIRE(::link(path.c_str(), other_name.c_str()) == 0);
  tg::nn::Linear other = model_filled_with(3.0);
  REQUIRE_THROWS_WITH(tg::save(other, path), Catch::Contains("2 hard links"));
  REQUIRE(status_of(path).st_ino == status_of(other_name).st_ino);
  REQUIRE(loaded_value(other_name) == 1.0);
}

TEST_CASE("load and load_npy refuse a FIFO and a device before reading from them", "[io][file]") {
  const std::string fifo = fresh_path("load_from_fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // No writer ever opens the FIFO: a load that opened it for reading would wait forever.
  CHECK(exit_status_within_10s([&] {
          tg::nn::Linear model(3, 2);
          return refuses_with([&] { tg::load(model, fifo); }, "is a FIFO");
        }) == 0);
  CHECK(exit_status_within_10s([&] { return refuses_with([&] { tg::load_npy(fifo); }, "is a FIFO"); }) == 0);
  // /dev/zero never ends: a load that read it would fill memory.
  CHECK(exit_status_within_10s([&] {
          tg::nn::Linear model(3, 2);
          return refuses_with([&] { tg::load(model, "/dev/zero"); }, "is a character device");
        }) == 0);
  CHECK(exit_status_within_10s([&] { return refuses_with([&] { tg::load_npy("/dev/zero"); }, "character device"); }) ==
        0);
  tg::nn::Linear model(3, 2);
  REQUIRE_THROWS_WITH(tg::load(model, scratch_path("")), Catch::Contains("is a directory"));
}

TEST_CASE("a failed system call is reported with its own errno", "[io][file]") {
  tg::nn::Linear model = model_filled_with(1.0);
  const std::string file = fresh_path("plain_file");
  write_bytes(file, "x");
  // A path through a regular file: ENOTDIR, whichever call meets it first.
  REQUIRE_THROWS_WITH(tg::save(model, file + "/model.safetensors"), Catch::Contains(std::strerror(ENOTDIR)));
  REQUIRE_THROWS_WITH(tg::load(model, file + "/model.safetensors"), Catch::Contains(std::strerror(ENOTDIR)));
  REQUIRE_THROWS_WITH(tg::save_npy(tg::ones({1}), scratch_path("no_such_dir/x.npy")),
                      Catch::Contains(std::strerror(ENOENT)));
  REQUIRE_THROWS_WITH(tg::load_npy(scratch_path("no_such_file.npy")), Catch::Contains(std::strerror(ENOENT)));
}

TEST_CASE("save and load work with a 250-byte file name", "[io][file]") {
  // NAME_MAX is 255: a temporary name derived from this one ("<name>.tmp-XXXXXX") would not fit.
  const std::string name = std::string(238, 'n') + ".safetensors";
  REQUIRE(name.size() == 250);
  const std::string path = fresh_path(name);
  tg::nn::Linear model = model_filled_with(4.0);
  tg::save(model, path);
  tg::save(model, path);  // and replace it
  REQUIRE(loaded_value(path) == 4.0);

  const std::string npy = fresh_path(std::string(246, 'n') + ".npy");
  tg::save_npy(tg::full({2}, 5.0), npy);
  REQUIRE(tg::load_npy(npy).to_vector<float>() == std::vector<float>{5, 5});
}
