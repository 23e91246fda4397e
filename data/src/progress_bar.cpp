// tg::ProgressBar (data/progress_bar.hpp).
#include "tapegrad/data/progress_bar.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tapegrad/error.hpp"

namespace tg {

namespace {

constexpr double kRedrawInterval = 0.1;  // seconds: at most ten redraws a second
constexpr int kDefaultWidth = 80;        // columns, when the terminal does not say
constexpr int kMinBarWidth = 10;         // a narrower bar is left out

// The file descriptor behind the standard streams; -1 for any other stream.
int file_descriptor_of(const std::ostream& out) {
  if (&out == &std::cout) return STDOUT_FILENO;
  if (&out == &std::cerr || &out == &std::clog) return STDERR_FILENO;
  return -1;
}

int terminal_width(int fd) {
  winsize size{};
  if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return kDefaultWidth;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <typename... Args>
std::string printed(const char* format, Args... args) {
  char text[64];
  std::snprintf(text, sizeof text, format, args...);
  return text;
}

// 4.7s, 3m05s, 2h07m.
std::string duration_text(double seconds) {
  if (seconds < 59.95) return printed("%.1fs", seconds);
  const auto whole = static_cast<int64_t>(std::llround(seconds));
  if (whole < 3600) return printed("%lldm%02llds", static_cast<long long>(whole / 60), static_cast<long long>(whole % 60));
  return printed("%lldh%02lldm", static_cast<long long>(whole / 3600), static_cast<long long>(whole / 60 % 60));
}

// Whole numbers from 100 on, three significant digits below.
std::string rate_text(double rate) { return rate >= 100 ? printed("%.0f", rate) : printed("%.3g", rate); }

// Is this process a rank started by an MPI launcher? Open MPI sets OMPI_COMM_WORLD_RANK;
// PMIx-based launchers (Open MPI 5, prrte, Slurm's PMIx plugin) PMIX_RANK; MPICH's Hydra, Intel
// MPI and other PMI-1/2 launchers PMI_RANK.
bool launched_as_mpi_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

}  // namespace

ProgressBar::ProgressBar(int64_t total, std::string label, std::ostream& out, ProgressBarOptions options)
    : total_(total), label_(std::move(label)), out_(&out), options_(std::move(options)) {
  check(total >= 0, "ProgressBar", "expected a total >= 0, got ", total);
  if (!options_.clock) options_.clock = steady_seconds;
  const int fd = file_descriptor_of(out);
  // An MPI rank's terminal is mpirun's, not the user's: its output may well end in a file.
  terminal_ = options_.terminal.value_or(fd >= 0 && isatty(fd) == 1 && !launched_as_mpi_rank());
  width_ = terminal_ ? terminal_width(fd) : kDefaultWidth;
  start_ = options_.clock();
}

ProgressBar::~ProgressBar() {
  try {
    finish();
  } catch (...) {
    // A destructor must not throw (it may run while an exception unwinds the training loop);
    // losing the last line of progress is the lesser harm.
  }
}

void ProgressBar::update(int64_t done, std::vector<ProgressMetric> metrics) {
  check(!finished_, "ProgressBar::update", "the bar '", label_, "' is already finished");
  check(done >= 0 && done <= total_, "ProgressBar::update", "expected 0 <= done <= total = ", total_, ", got ", done);
  done_ = done;
  metrics_ = std::move(metrics);
  if (!terminal_) return;  // a log gets the final line only
  const double now = options_.clock();
  if (!drawn_ || now - last_draw_ >= kRedrawInterval) draw(now, false);
}

void ProgressBar::finish(const std::vector<ProgressMetric>& extra_metrics) {
  if (finished_) return;
  finished_ = true;
  metrics_.insert(metrics_.end(), extra_metrics.begin(), extra_metrics.end());
  draw(options_.clock(), true);
}

// "label [====>    ] done/total  name value ...  rate unit/s  ETA t" (or "in t" when final); the bar
// only on a terminal, and only as wide as the terminal leaves room for.
std::string ProgressBar::line(double now, bool final) const {
  const double elapsed = now - start_;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  const std::string counts = printed(" %lld/%lld", static_cast<long long>(done_), static_cast<long long>(total_));
  std::string tail;
  for (const ProgressMetric& metric : metrics_) tail += "  " + metric.name + " " + printed("%.4g", metric.value);
  tail += "  " + (elapsed > 0 ? rate_text(rate) : std::string("?")) + " " + options_.unit + "/s";
  if (final) tail += "  in " + duration_text(elapsed);
  else tail += "  ETA " + (rate > 0 ? duration_text(static_cast<double>(total_ - done_) / rate) : std::string("?"));

  if (!terminal_) return label_ + counts + tail;
  // One column stays free: writing the last one makes some terminals wrap.
  const auto room = static_cast<int64_t>(width_) - 1;
  const int64_t bar_width = room - static_cast<int64_t>(label_.size() + counts.size() + tail.size()) - 3;  // " []"
  std::string text = label_;
  if (bar_width >= kMinBarWidth) {
    const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
    const auto filled = static_cast<size_t>(fraction * static_cast<double>(bar_width));
    const bool head = filled < static_cast<size_t>(bar_width) && done_ > 0;  // '>' where the bar grows
    text += " [";
    text.append(filled, '=');
    if (head) text += '>';
    text.append(static_cast<size_t>(bar_width) - filled - head, ' ');
    text += ']';
  }
  text += counts + tail;
  if (static_cast<int64_t>(text.size()) > room) text.resize(static_cast<size_t>(room));
  return text;
}

void ProgressBar::draw(double now, bool final) {
  std::string text = line(now, final);
  if (terminal_) {
    // Over the previous line: blank what a shorter line would leave of it.
    const size_t length = text.size();
    if (length < drawn_length_) text.append(drawn_length_ - length, ' ');
    *out_ << '\r' << text;
    drawn_ = true;
    drawn_length_ = length;
    last_draw_ = now;
  } else {
    *out_ << text;
  }
  if (final) *out_ << '\n';
  out_->flush();
}

}  // namespace tg
