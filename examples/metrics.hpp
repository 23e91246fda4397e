// What the training examples (fashion_mnist, char_gpt) leave behind besides the checkpoint:
// metrics.csv, one row per evaluation, and metrics.png, its curves drawn by gnuplot.
//
//   examples::MetricsCsv metrics(out / "metrics.csv", "iter,train_loss,val_loss");
//   if (resumed) metrics.keep_previous(rows_in_checkpoint);   // a resumed run keeps the earlier rows
//   metrics.add(examples::csv_row(250, {1.71, 1.84}));        // after each evaluation
//   examples::plot(metrics.path(), out / "metrics.png", "plot ...");
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace examples {

// Whether `program` is an executable file in a directory of PATH.
inline bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream directories(path != nullptr ? path : "");
  std::string directory;
  while (std::getline(directories, directory, ':'))
    if (!directory.empty() && ::access((std::filesystem::path(directory) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// "<key>,<v1>,<v2>..." with 17 significant digits, so that two runs compare bit for bit.
inline std::string csv_row(int64_t key, const std::vector<double>& values) {
  std::string row = std::to_string(key);
  char number[32];
  for (const double value : values) {
    std::snprintf(number, sizeof number, ",%.17g", value);
    row += number;
  }
  return row;
}

// metrics.csv: a header and one row per evaluation, rewritten whole after each, so that a run
// stopped at any point and resumed ends with the file an uninterrupted run writes.
class MetricsCsv {
 public:
  MetricsCsv(std::filesystem::path path, std::string header) : path_(std::move(path)), header_(std::move(header)) {}

  // Keeps the first `rows` rows of an earlier run (a run may have written its row and stopped
  // before its checkpoint); says so on `log` when the file holds fewer.
  void keep_previous(int64_t rows, std::ostream& log = std::cerr) {
    std::ifstream in(path_);
    std::string line;
    std::getline(in, line);  // the header
    while (static_cast<int64_t>(rows_.size()) < rows && std::getline(in, line)) rows_.push_back(line);
    if (static_cast<int64_t>(rows_.size()) < rows)
      log << path_.string() << " holds " << rows_.size() << " of the " << rows
          << " rows the checkpoint has seen; the curves will miss the others\n";
  }

  void add(std::string row) {
    rows_.push_back(std::move(row));
    // Written beside and renamed over: a reader never sees half a file.
    const std::filesystem::path temporary = path_.string() + ".tmp";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << header_ << '\n';
      for (const std::string& r : rows_) out << r << '\n';
      if (!out.flush()) throw std::runtime_error("cannot write " + temporary.string());
    }
    std::filesystem::rename(temporary, path_);
  }

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::string header_;
  std::vector<std::string> rows_;
};

// gnuplot's single-quoted string: a quote inside is written twice.
inline std::string gnuplot_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

// Draws `png` (1100 × 420) from `csv` through gnuplot (popen: no library), or says why not.
// `commands` plots with the variable `data`, the csv's quoted path; the terminal, the output,
// the separator and column-head titles are set before them.
inline void plot(const std::filesystem::path& csv, const std::filesystem::path& png, const std::string& commands,
                 std::ostream& log = std::cout) {
  if (!on_path("gnuplot")) {
    log << "gnuplot not found: metrics.png skipped (the numbers are in " << csv.string() << ")\n";
    return;
  }
  FILE* gnuplot = ::popen("gnuplot", "w");
  if (gnuplot == nullptr) {
    log << "cannot start gnuplot: metrics.png skipped\n";
    return;
  }
  const std::string script = "set terminal pngcairo size 1100,420\nset output " + gnuplot_quoted(png.string()) +
                             "\nset datafile separator ','\nset key autotitle columnhead\ndata = " +
                             gnuplot_quoted(csv.string()) + "\n" + commands;
  std::fputs(script.c_str(), gnuplot);
  if (::pclose(gnuplot) != 0 || !std::filesystem::exists(png))
    log << "gnuplot failed: " << png.string() << " not written\n";
  else
    log << "plotted " << png.string() << "\n";
}

}  // namespace examples
