/// @file
/// tg::ProgressBar — one line of progress for a loop: label, bar, done/total, metrics, rate, ETA.
///
/// @code
///   tg::ProgressBar bar(train_size, "epoch 3/10", std::cout, {.unit = "samples"});
///   for (...) {
///     ...
///     bar.update(seen, {{"loss", loss}, {"acc", accuracy}});
///   }
///   bar.finish({{"test_acc", test_accuracy}});
/// @endcode
///
/// On a terminal it redraws its line in place (`\r`) at most ten times a second:
///
/// @code
///   epoch 3/10 [=========>          ] 28160/60000  loss 0.4123  acc 0.87  31250 samples/s  ETA 1.0s
/// @endcode
///
/// and finish() ends the line. Anywhere else (a pipe, a file, CI's log) it prints nothing until
/// finish(), then exactly one line without the bar, so a log holds one line per bar (per epoch):
///
/// @code
///   epoch 3/10 60000/60000  loss 0.4123  acc 0.87  test_acc 0.89  31250 samples/s  in 1.9s
/// @endcode
///
/// A rank of an MPI job writes lines too, terminal or not: mpirun hands each rank a
/// pseudo-terminal (Open MPI does) even when its own output goes to a file, so `mpirun ... > log`
/// would otherwise fill the log with redrawn lines. ProgressBarOptions::terminal overrides both rules.
///
/// Not thread-safe: one thread updates a bar.
#pragma once

#include <cstdint>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tg {

/// A named number shown after done/total: {"loss", 0.41} prints as "loss 0.41" (4 significant digits).
struct ProgressMetric {
  std::string name;  ///< printed before the value
  double value;      ///< printed with 4 significant digits
};

/// How a ProgressBar prints; every member has a default, so `{}` or `{.unit = "samples"}` will do.
struct ProgressBarOptions {
  /// The mode: true redraws one line in place (`\r`, at most ten times a second), false prints one
  /// line at finish() only. Default (nullopt): redraw when the stream is std::cout (std::cerr,
  /// std::clog), its file descriptor is a terminal (isatty), and the process is not a rank of an
  /// MPI launch (none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK is set: Open MPI, PMIx,
  /// MPICH/Hydra and Intel MPI set them), since mpirun gives ranks a terminal even when their
  /// output goes to a file. Set it to force either mode.
  std::optional<bool> terminal{};
  /// What `done` counts, for the rate: "samples" prints "… samples/s". Default "it".
  std::string unit = "it";
  /// Seconds on a monotonic clock; by default std::chrono::steady_clock. Tests inject their own.
  std::function<double()> clock{};
};

/// A training loop's line of progress: label, done/total, rate, time left and the latest metrics.
class ProgressBar {
 public:
  /// `total` >= 0 (tg::Error otherwise). The line is as wide as the terminal (TIOCGWINSZ), or 80
  /// columns when that is unknown. The clock starts now.
  ProgressBar(int64_t total, std::string label, std::ostream& out = std::cout, ProgressBarOptions options = {});
  /// The same, on std::cout.
  ProgressBar(int64_t total, std::string label, ProgressBarOptions options)
      : ProgressBar(total, std::move(label), std::cout, std::move(options)) {}
  /// Finishes the bar if finish() was not called; never throws.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// `done` of `total` are done (0 <= done <= total, else tg::Error); `metrics` replace the ones shown.
  /// On a terminal, redraws the line unless it was drawn less than 0.1 s ago. tg::Error after finish().
  void update(int64_t done, std::vector<ProgressMetric> metrics = {});
  /// Prints the final line, with the metrics of the last update followed by `extra_metrics`, and a
  /// newline. Later calls do nothing.
  void finish(const std::vector<ProgressMetric>& extra_metrics = {});

  int64_t total() const { return total_; }     ///< as constructed
  int64_t done() const { return done_; }       ///< as last updated
  bool terminal() const { return terminal_; }  ///< whether it redraws in place
  int width() const { return width_; }  ///< columns of the line

 private:
  std::string line(double now, bool final) const;
  void draw(double now, bool final);

  int64_t total_;
  std::string label_;
  std::ostream* out_;
  ProgressBarOptions options_;
  bool terminal_;
  int width_;
  double start_;                         // clock at construction
  double last_draw_ = 0.0;               // clock at the last redraw
  bool drawn_ = false;                   // a line is on the terminal
  size_t drawn_length_ = 0;              // its length, to blank what a shorter line leaves over
  bool finished_ = false;
  int64_t done_ = 0;
  std::vector<ProgressMetric> metrics_;
};

}  // namespace tg
