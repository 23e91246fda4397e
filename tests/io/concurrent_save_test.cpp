// Saves to one path from many threads, and from many processes, at once: every save succeeds,
// the last rename wins, and every load in between reads one whole checkpoint that one of the
// writers wrote (the CRC-32C of the whole file is checked by each load).
//
// The race this guards: a save looks at the file it is about to replace (its mode, and that it
// has no other hard links) while another save renames a new file over the same name. The
// kernel's lstat has then found the old inode, which the rename unlinks before its status is
// read: st_nlink == 0, which is "no names at all", not "other names".
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>  // mkdtemp, getenv
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "io_test_util.hpp"

using tg::io_test::scratch_path;

extern char** environ;  // POSIX: the process's environment, for posix_spawn

namespace {

// Two writers and another program (Replacer) on the 2 cores of the CI machine: more writers only
// queue for the cores. The race is a window of a fraction of a microsecond per save, so it takes
// thousands of saves for a check that wants st_nlink == 1 to fail in nearly every run. On tmpfs
// (/dev/shm) when there is one: without a disk's fsync thousands of saves stay quick, and fsync
// has no part in the race.
constexpr int kWriters = 2;
constexpr int kSavesPerWriter = 4000;

// Writer w's model: every weight and the bias hold w + 1, so that a loaded file names its writer
// and shows whether it is whole (a mix of two writers would hold two values).
tg::nn::Linear model_of_writer(int writer) {
  tg::nn::Linear model(16, 8);
  tg::NoGradGuard no_grad;
  model.weight.fill_(writer + 1.0);
  model.bias.fill_(writer + 1.0);
  return model;
}

// The writer a file at `path` came from, or an explanation of why it is not one writer's whole
// checkpoint. A load that throws (tg::Error) is reported as its message.
std::string check_whole(tg::nn::Linear& reader, const std::string& path, int& writer) {
  tg::load(reader, path);
  const std::vector<float> weights = reader.weight.to_vector<float>();
  const std::vector<float> bias = reader.bias.to_vector<float>();
  const float value = bias[0];
  for (const float w : weights)
    if (w != value) return "a load saw weights of two writers";
  for (const float b : bias)
    if (b != value) return "a load saw biases of two writers";
  if (!(value >= 1 && value <= kWriters + 1)) return "a load saw the value " + std::to_string(value);
  writer = static_cast<int>(value) - 1;
  return "";
}

// Another program saving to the same path as fast as a file system allows: it writes a copy of a
// whole checkpoint (writer kWriters's) to a file of its own and renames it over `path`, again and
// again, without fsync, until stopped. Thousands of renames a second make the saves' race with a
// rename happen in every run, not one run in three.
class Replacer {
 public:
  explicit Replacer(const std::string& path) {
    tg::nn::Linear model = model_of_writer(kWriters);
    const std::string source = path + ".replacer-source";
    tg::save(model, source);
    bytes_ = tg::io_test::read_bytes(source);
    std::remove(source.c_str());
    thread_ = std::thread([this, path] {
      const std::string temporary = path + ".replacer-tmp";
      while (!stop_.load()) {
        const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) continue;
        const bool whole = ::write(fd, bytes_.data(), bytes_.size()) == static_cast<ssize_t>(bytes_.size());
        ::close(fd);
        if (whole && ::rename(temporary.c_str(), path.c_str()) == 0) ++renames_;
      }
    });
  }
  // The number of renames it made.
  int64_t stop() {
    stop_.store(true);
    thread_.join();
    return renames_;
  }

 private:
  std::string bytes_;
  std::atomic<bool> stop_{false};
  int64_t renames_ = 0;
  std::thread thread_;
};

// One writer's rounds: save, then load whatever is there now. Errors are collected, not thrown.
std::vector<std::string> save_and_load_rounds(int writer, const std::string& path) {
  std::vector<std::string> errors;
  tg::nn::Linear mine = model_of_writer(writer);
  tg::nn::Linear reader(16, 8);
  for (int round = 0; round < kSavesPerWriter; ++round) {
    try {
      tg::save(mine, path);
      int loaded_from = -1;
      const std::string problem = check_whole(reader, path, loaded_from);
      if (!problem.empty()) errors.push_back(problem);
    } catch (const tg::Error& error) {
      errors.push_back(error.what());
    }
  }
  return errors;
}

// A fresh directory for the race, on tmpfs when /dev/shm is writable, in the build tree otherwise;
// removed with what is in it when the test ends.
class RaceDirectory {
 public:
  RaceDirectory() {
    char shm[] = "/dev/shm/tapegrad-io-test-XXXXXX";
    if (::mkdtemp(shm) != nullptr) {
      path_ = shm;
      return;
    }
    path_ = scratch_path("race");
    ::mkdir(path_.c_str(), 0755);
  }
  ~RaceDirectory() {
    for (const char* name : {"same.safetensors", "same.safetensors.replacer-tmp"}) std::remove((path_ + "/" + name).c_str());
    ::rmdir(path_.c_str());  // fails, harmlessly, when a killed save left its temporary file
  }
  std::string file() const { return path_ + "/same.safetensors"; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("saves to one path from several threads all succeed, and every load reads one whole checkpoint",
          "[io][file][concurrency]") {
  const RaceDirectory directory;
  const std::string path = directory.file();
  Replacer replacer(path);
  std::mutex lock;
  std::vector<std::string> errors;
  std::vector<std::thread> writers;
  for (int writer = 0; writer < kWriters; ++writer)
    writers.emplace_back([&, writer] {
      const std::vector<std::string> mine = save_and_load_rounds(writer, path);
      const std::lock_guard<std::mutex> guard(lock);
      errors.insert(errors.end(), mine.begin(), mine.end());
    });
  for (std::thread& writer : writers) writer.join();
  REQUIRE(replacer.stop() > 0);
  INFO(errors.size() << " of " << kWriters * kSavesPerWriter << " saves failed; the first: "
                     << (errors.empty() ? std::string() : errors.front()));
  REQUIRE(errors.empty());
  // The last rename won: the file is one writer's whole checkpoint.
  tg::nn::Linear reader(16, 8);
  int last = -1;
  REQUIRE(check_whole(reader, path, last).empty());
  REQUIRE(last >= 0);
}

// The writer of the test below, in a process of its own: the test starts this binary again with
// this (hidden) test's name, and says which writer it is and where to save in the environment.
// A fresh program rather than a fork(): the test process has threads (the Replacer's, the
// sanitizers'), and a forked child can deadlock on a lock one of them held at the fork.
TEST_CASE("concurrent save writer process", "[.]") {
  const char* writer = std::getenv("TG_CONCURRENT_SAVE_WRITER");
  const char* path = std::getenv("TG_CONCURRENT_SAVE_PATH");
  REQUIRE(writer != nullptr);
  REQUIRE(path != nullptr);
  const std::vector<std::string> errors = save_and_load_rounds(std::atoi(writer), path);
  INFO("writer " << writer << ": " << errors.size() << " of " << kSavesPerWriter
                 << " saves failed; the first: " << (errors.empty() ? std::string() : errors.front()));
  REQUIRE(errors.empty());
}

TEST_CASE("saves to one path from several processes all succeed, and every load reads one whole checkpoint",
          "[io][file][concurrency]") {
  const RaceDirectory directory;
  const std::string path = directory.file();
  Replacer replacer(path);
  std::vector<pid_t> children;
  for (int writer = 0; writer < kWriters; ++writer) {
    // This binary, running only the hidden writer test, with its writer and path added to the
    // environment.
    std::vector<std::string> environment;
    for (char** variable = environ; *variable != nullptr; ++variable) environment.emplace_back(*variable);
    environment.push_back("TG_CONCURRENT_SAVE_WRITER=" + std::to_string(writer));
    environment.push_back("TG_CONCURRENT_SAVE_PATH=" + path);
    std::vector<char*> envp;
    for (std::string& variable : environment) envp.push_back(variable.data());
    envp.push_back(nullptr);
    std::string program = "/proc/self/exe", test_name = "concurrent save writer process";
    char* argv[] = {program.data(), test_name.data(), nullptr};
    std::fflush(nullptr);
    pid_t child = -1;
    REQUIRE(::posix_spawn(&child, program.c_str(), nullptr, nullptr, argv, envp.data()) == 0);
    children.push_back(child);
  }
  int failed = 0;
  for (const pid_t child : children) {
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  REQUIRE(replacer.stop() > 0);
  INFO(failed << " of " << kWriters << " processes had a save or load fail (their output says which)");
  REQUIRE(failed == 0);
  tg::nn::Linear reader(16, 8);
  int last = -1;
  REQUIRE(check_whole(reader, path, last).empty());
}
