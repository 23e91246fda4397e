// CSV files of numbers (data/csv.hpp).
#include "tapegrad/data/csv.hpp"

#include <charconv>
#include <new>
#include <cmath>
#include <string_view>

#include "dispatch.hpp"
#include "io/file.hpp"

namespace tg::data {

namespace {

constexpr char kOp[] = "read_csv";

// One field of a line: its text (spaces trimmed) and where it starts in the file.
struct Field {
  std::string_view text;
  size_t offset;
};

// The fields of the line [begin, end) of `content`.
std::vector<Field> split(std::string_view content, size_t begin, size_t end, char delimiter) {
  std::vector<Field> fields;
  size_t start = begin;
  while (true) {
    size_t stop = content.find(delimiter, start);
    if (stop == std::string_view::npos || stop > end) stop = end;
    size_t first = start, last = stop;
    while (first < last && (content[first] == ' ' || content[first] == '\t')) ++first;
    while (last > first && (content[last - 1] == ' ' || content[last - 1] == '\t')) --last;
    fields.push_back({content.substr(first, last - first), first});
    if (stop == end) return fields;
    start = stop + 1;
  }
}

}  // namespace

CsvData read_csv(const std::string& path, const CsvOptions& options) try {
  tg::detail::check_dtype_argument<tg::detail::FloatingDTypes>("read_csv (features)", options.dtype);
  check(options.label_dtype != kBool, kOp, "labels can be int64, float32 or float64, not bool");
  check(options.delimiter != '\n' && options.delimiter != '\r' && options.delimiter != ' ', kOp,
        "the delimiter cannot be a line end or a space");
  const std::string file = tg::detail::read_file(path, kOp);
  const std::string_view content(file);

  std::vector<std::string> names;
  std::vector<double> features, labels;
  size_t columns = 0;          // fields per line, fixed by the first line
  size_t label = 0;            // the label's column, once `columns` is known
  bool header_pending = options.header;
  int64_t line_number = 0;
  auto fail = [&](size_t offset, size_t column, const auto&... what) {
    throw Error(detail::concat(kOp, ": '", path, "' line ", line_number, ", column ", column + 1, " (byte offset ",
                               offset, "): ", what...));
  };

  for (size_t begin = 0; begin < content.size();) {
    size_t end = content.find('\n', begin);
    if (end == std::string_view::npos) end = content.size();
    const size_t next = end + 1;
    if (end > begin && content[end - 1] == '\r') --end;
    ++line_number;
    if (content.substr(begin, end - begin).find_first_not_of(" \t") == std::string_view::npos) {
      begin = next;
      continue;  // an empty line
    }
    const std::vector<Field> fields = split(content, begin, end, options.delimiter);
    if (columns == 0) {
      columns = fields.size();
      if (options.label_column) {
        const int64_t n = static_cast<int64_t>(columns);
        const int64_t column = *options.label_column;
        check(column >= -n && column < n, kOp, "'", path, "': label_column ", column, " is out of range for ", n,
              " columns");
        label = static_cast<size_t>(column < 0 ? column + n : column);
      }
    } else if (fields.size() != columns) {
      fail(begin, std::min(fields.size(), columns), "expected ", columns, " fields as on the first line, got ",
           fields.size());
    }
    if (header_pending) {
      for (size_t c = 0; c < columns; ++c)
        if (!options.label_column || c != label) names.emplace_back(fields[c].text);
      header_pending = false;
      begin = next;
      continue;
    }
    for (size_t c = 0; c < columns; ++c) {
      std::string_view text = fields[c].text;
      if (text.empty()) fail(fields[c].offset, c, "empty field");
      if (text.front() == '+') text.remove_prefix(1);  // from_chars takes no plus sign
      double value = 0.0;
      const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error == std::errc::result_out_of_range) fail(fields[c].offset, c, "'", fields[c].text, "' is out of range");
      if (error != std::errc() || stop != text.data() + text.size())
        fail(fields[c].offset, c, "'", fields[c].text, "' is not a number");
      if (options.label_column && c == label) {
        if (options.label_dtype == kInt64 &&
            !(std::isfinite(value) && value == std::floor(value) && std::fabs(value) <= 9007199254740992.0))
          fail(fields[c].offset, c, "the label '", fields[c].text, "' is not an integer (label_dtype is int64)");
        labels.push_back(value);
      } else {
        features.push_back(value);
      }
    }
    begin = next;
  }

  const int64_t feature_columns = static_cast<int64_t>(columns) - (options.label_column && columns > 0 ? 1 : 0);
  const int64_t rows = feature_columns > 0 ? static_cast<int64_t>(features.size()) / feature_columns
                                           : static_cast<int64_t>(labels.size());
  CsvData data;
  data.features = tensor(features, {rows, feature_columns}, kFloat64).to(options.dtype);
  if (options.label_column) data.labels = tensor(labels, {rows}, kFloat64).to(options.label_dtype);
  data.columns = std::move(names);
  return data;
} catch (const std::bad_alloc&) {
  throw Error(detail::concat(kOp, ": out of memory while reading '", path, "'"));
}

}  // namespace tg::data
