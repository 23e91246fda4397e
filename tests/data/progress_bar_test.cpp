// ProgressBar: the lines it prints, derived by hand with an injected clock, on a string stream, a
// pipe and a real pseudo-terminal (openpty), and its errors.
#include <pty.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <sstream>

#include "data_test_util.hpp"
#include "tapegrad/data/progress_bar.hpp"

using namespace tg;

namespace {

// A clock the test moves by hand.
struct FakeClock {
  double now = 10.0;
  std::function<double()> function() {
    return [this] { return now; };
  }
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

// Runs `body` in a child process whose stdout is `write_fd`; returns what the parent reads from
// `read_fd` until the child's side is closed. The child exits with body's status (0: fine).
std::string run_with_stdout(int read_fd, int write_fd, const std::function<int()>& body) {
  std::cout.flush();
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(read_fd);
    dup2(write_fd, STDOUT_FILENO);
    close(write_fd);
    int status = 4;
    try {
      status = body();
    } catch (...) {
      status = 5;
    }
    std::cout.flush();
    _exit(status);
  }
  close(write_fd);  // so that the read below ends when the child is done
  std::string output;
  char buffer[4096];
  // A pipe reads 0 at its end; a pty's master fails with EIO once the slave is closed.
  for (ssize_t n; (n = read(read_fd, buffer, sizeof buffer)) > 0;) output.append(buffer, static_cast<size_t>(n));
  close(read_fd);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return output;
}

// Runs `body` in a child process whose stdout is a fresh 60-column pseudo-terminal, with none of
// the variables an MPI launcher sets (the test itself may run under one); returns what the
// terminal received.
std::string run_on_pty(const std::function<int()>& body) {
  int master = -1, slave = -1;
  termios raw{};
  cfmakeraw(&raw);  // bytes as written: no "\n" → "\r\n" on the way to the master
  winsize size{};
  size.ws_col = 60;
  size.ws_row = 24;
  REQUIRE(openpty(&master, &slave, nullptr, &raw, &size) == 0);
  return run_with_stdout(master, slave, [&body] {
    for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) unsetenv(name);
    return body();
  });
}

}  // namespace

TEST_CASE("ProgressBar prints one line at finish() when not on a terminal", "[data][progress_bar]") {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(30, "epoch 1/2", out, {.unit = "samples", .clock = clock.function()});
  REQUIRE_FALSE(bar.terminal());  // a string stream never is
  clock.now = 11.0;
  bar.update(10, {{"loss", 0.5}});
  clock.now = 12.0;
  bar.update(30, {{"loss", 0.25}, {"acc", 0.75}});
  REQUIRE(out.str().empty());
  // 30 samples in 3 s: 10 samples/s. The extra metric comes after the last update's.
  clock.now = 13.0;
  bar.finish({{"test_acc", 0.71875}});
  REQUIRE(out.str() == "epoch 1/2 30/30  loss 0.25  acc 0.75  test_acc 0.7188  10 samples/s  in 3.0s\n");
  bar.finish();  // once only
  REQUIRE(out.str() == "epoch 1/2 30/30  loss 0.25  acc 0.75  test_acc 0.7188  10 samples/s  in 3.0s\n");
}

TEST_CASE("ProgressBar's destructor finishes the line; durations read 4.7s, 3m05s, 2h07m", "[data][progress_bar]") {
  FakeClock clock;
  std::ostringstream out;
  {
    ProgressBar bar(1000, "fit", out, {.clock = clock.function()});
    bar.update(500);
    clock.now += 185.0;
  }
  // 500 in 185 s: 2.70 it/s, three significant digits below 100.
  REQUIRE(out.str() == "fit 500/1000  2.7 it/s  in 3m05s\n");
  out.str("");
  {
    ProgressBar bar(10, "long", out, {.clock = clock.function()});
    bar.update(10);
    clock.now += 7620.0;
  }
  REQUIRE(out.str() == "long 10/10  0.00131 it/s  in 2h07m\n");
  out.str("");
  {
    ProgressBar bar(0, "empty", out, {.clock = clock.function()});
  }
  REQUIRE(out.str() == "empty 0/0  ? it/s  in 0.0s\n");  // no time passed: no rate
}

TEST_CASE("ProgressBar on a terminal redraws its line in place at most ten times a second", "[data][progress_bar]") {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar(30, "epoch 1/2", out, {.terminal = true, .unit = "samples", .clock = clock.function()});
  REQUIRE(bar.width() == 80);  // a stream without a terminal width
  clock.now = 11.0;
  bar.update(10, {{"loss", 0.5}});
  // 79 columns: the text takes 9 + 6 + 34, " [" and "]" 3, so the bar gets 27; a third of it is
  // 9 '=' and the head.
  const std::string first = "epoch 1/2 [" + std::string(9, '=') + ">" + std::string(17, ' ') +
                            "] 10/30  loss 0.5  10 samples/s  ETA 2.0s";
  REQUIRE(first.size() == 79);
  REQUIRE(out.str() == "\r" + first);

  clock.now = 11.05;  // too soon: no redraw
  bar.update(15, {{"loss", 0.4}});
  REQUIRE(out.str() == "\r" + first);

  clock.now = 11.5;  // metrics too long to leave room for a bar: the line without it, padded
  bar.update(15, {{"loss", 0.4}, {"accuracy", 0.5}, {"lr", 0.1}});
  const std::string second = "epoch 1/2 15/30  loss 0.4  accuracy 0.5  lr 0.1  10 samples/s  ETA 1.5s";
  REQUIRE(second.size() == 71);
  REQUIRE(out.str() == "\r" + first + "\r" + second + std::string(8, ' '));

  clock.now = 13.0;
  bar.update(30);
  bar.finish();
  const std::vector<std::string> frames = split(out.str(), '\r');
  // "", then the lines of 11, 11.5, 13 and finish(): only the update at 11.05 was skipped.
  REQUIRE(frames.size() == 5);
  REQUIRE(frames.back() == "epoch 1/2 [" + std::string(38, '=') + "] 30/30  10 samples/s  in 3.0s\n");
}

TEST_CASE("ProgressBar on a pipe is not a terminal: one line, no carriage return", "[data][progress_bar]") {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const std::string output = run_with_stdout(pipe_fds[0], pipe_fds[1], [] {
    FakeClock clock;
    ProgressBar bar(4, "epoch 2/3", {.clock = clock.function()});  // std::cout
    if (bar.terminal()) return 3;
    for (int64_t done = 1; done <= 4; ++done) {
      clock.now += 0.5;
      bar.update(done, {{"loss", 1.0 / static_cast<double>(done)}});
    }
    bar.finish();
    return 0;
  });
  REQUIRE(output == "epoch 2/3 4/4  loss 0.25  2 it/s  in 2.0s\n");
}

TEST_CASE("ProgressBar on a pseudo-terminal takes its width and redraws with \\r", "[data][progress_bar]") {
  const std::string output = run_on_pty([] {
    FakeClock clock;
    ProgressBar bar(100, "pty", {.clock = clock.function()});  // std::cout: the slave
    if (!bar.terminal()) return 2;
    if (bar.width() != 60) return 3;
    for (int64_t done = 25; done <= 100; done += 25) {
      clock.now += 0.25;
      bar.update(done, {{"loss", 0.1}});
    }
    bar.finish();
    return 0;
  });
  const std::vector<std::string> frames = split(output, '\r');
  // Nothing before the first '\r'; the four updates and finish() each drew a line.
  REQUIRE(frames.size() == 6);
  REQUIRE(frames[0].empty());
  for (size_t i = 1; i < frames.size(); ++i) {
    INFO(frames[i]);
    REQUIRE(frames[i].rfind("pty [", 0) == 0);
    REQUIRE(frames[i].find("it/s") != std::string::npos);
  }
  for (size_t i = 1; i + 1 < frames.size(); ++i) REQUIRE(frames[i].size() == 59);  // one column spare
  REQUIRE(frames[1].find("25/100  loss 0.1  100 it/s  ETA 0.8s") != std::string::npos);
  REQUIRE(frames.back() == "pty [" + std::string(16, '=') + "] 100/100  loss 0.1  100 it/s  in 1.0s\n");
}

TEST_CASE("ProgressBar in a rank of an MPI launch prints one line per bar on the terminal mpirun gives it",
          "[data][progress_bar]") {
  // Open MPI's, PMIx's and MPICH/Hydra's marks of a rank: `mpirun ... > log` must get lines, not
  // redraws, although each rank's stdout is a pseudo-terminal.
  const char* variable = GENERATE("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK");
  INFO(variable);
  const auto two_updates = [variable](std::optional<bool> terminal) {
    return [variable, terminal] {
      setenv(variable, "0", 1);
      FakeClock clock;
      ProgressBar bar(100, "epoch 1/1", {.terminal = terminal, .clock = clock.function()});  // std::cout: a pty
      for (int64_t done = 50; done <= 100; done += 50) {
        clock.now += 0.5;
        bar.update(done, {{"loss", 0.5}});
      }
      bar.finish();
      return bar.terminal() == terminal.value_or(false) ? 0 : 3;
    };
  };
  // By default: one line at finish(), without a bar or a carriage return.
  REQUIRE(run_on_pty(two_updates(std::nullopt)) == "epoch 1/1 100/100  loss 0.5  100 it/s  in 1.0s\n");
  // Asked for, the bar redraws all the same: two updates and finish(), each after a '\r'. Of the
  // 59 columns, the text takes 9 + 8 + 29 and " []" 3, which leaves the bar 10.
  const std::vector<std::string> frames = split(run_on_pty(two_updates(true)), '\r');
  REQUIRE(frames.size() == 4);
  REQUIRE(frames.back() == "epoch 1/1 [" + std::string(10, '=') + "] 100/100  loss 0.5  100 it/s  in 1.0s\n");
}

TEST_CASE("ProgressBar rejects a negative total, done outside [0, total] and updates after finish",
          "[data][progress_bar][errors]") {
  std::ostringstream out;
  REQUIRE_TG_ERROR(ProgressBar(-1, "x", out), Catch::Contains("ProgressBar") && Catch::Contains("total >= 0, got -1"));
  ProgressBar bar(5, "x", out);
  REQUIRE_TG_ERROR(bar.update(6), Catch::Contains("ProgressBar::update") &&
                                      Catch::Contains("expected 0 <= done <= total = 5, got 6"));
  REQUIRE_TG_ERROR(bar.update(-1), Catch::Contains("got -1"));
  bar.finish();
  REQUIRE_TG_ERROR(bar.update(5), Catch::Contains("ProgressBar::update") && Catch::Contains("'x' is already finished"));
}
