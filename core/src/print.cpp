// operator<< for tensors, following PyTorch's printer (torch/_tensor_str.py) so that a user can
// compare tapegrad's output with a notebook by eye: the same number format (4 decimals, or
// scientific notation when magnitudes span more than 1000x, or "1." for integral values), aligned
// columns, 80-column lines, and "..." summaries past 1000 elements.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "dispatch.hpp"
#include "tensor_impl.hpp"

namespace tg {

namespace {

constexpr int kLineWidth = 80;
constexpr int64_t kSummaryThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

// Integer, Fixed and Scientific format floats; Int64 and Bool print int64 and bool tensors the way
// PyTorch does ("-3", "True"), in columns as wide as their widest visible value.
enum class Mode { Integer, Fixed, Scientific, Int64, Bool };

std::string format_value(double v, Mode mode) {
  if (mode == Mode::Bool) return v != 0 ? "True" : "False";
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  switch (mode) {
    case Mode::Integer: std::snprintf(buffer, sizeof buffer, "%.0f.", v); break;
    case Mode::Fixed: std::snprintf(buffer, sizeof buffer, "%.4f", v); break;
    case Mode::Scientific: std::snprintf(buffer, sizeof buffer, "%.4e", v); break;
    case Mode::Int64:  // Printer::text formats the exact int64 values
    case Mode::Bool: break;
  }
  return buffer;
}

// Index lists per dim: every index, or the first and last kEdgeItems with -1 marking "...".
std::vector<std::vector<int64_t>> visible_indices(const Shape& shape, bool summarize) {
  std::vector<std::vector<int64_t>> visible;
  for (int64_t size : shape) {
    std::vector<int64_t> indices;
    if (summarize && size > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) indices.push_back(i);
      indices.push_back(-1);
      for (int64_t i = size - kEdgeItems; i < size; ++i) indices.push_back(i);
    } else {
      for (int64_t i = 0; i < size; ++i) indices.push_back(i);
    }
    visible.push_back(std::move(indices));
  }
  return visible;
}

struct Printer {
  const std::vector<double>& values;  // every element as a double (bool: 0 or 1)
  const int64_t* integers;            // an int64 tensor's exact values, else null
  const Shape& shape;
  std::vector<int64_t> strides;
  std::vector<std::vector<int64_t>> visible;
  Mode mode = Mode::Fixed;
  size_t width = 1;

  // Chooses the number format from the visible finite values, as PyTorch's _Formatter does.
  void choose_format(DType dtype) {
    if (!is_floating_point(dtype)) {
      mode = dtype == kBool ? Mode::Bool : Mode::Int64;
      measure(0, 0);
      return;
    }
    std::vector<double> finite;
    collect(0, 0, finite);
    bool integral = true;
    double max_abs = 0, min_abs = 0;
    bool any_nonzero = false;
    for (double v : finite) {
      integral &= std::ceil(v) == v;
      const double a = std::fabs(v);
      if (a == 0) continue;
      max_abs = any_nonzero ? std::max(max_abs, a) : a;
      min_abs = any_nonzero ? std::min(min_abs, a) : a;
      any_nonzero = true;
    }
    if (integral) {
      mode = any_nonzero && (max_abs / min_abs > 1000.0 || max_abs > 1e8) ? Mode::Scientific : Mode::Integer;
    } else {
      mode = any_nonzero && (max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4) ? Mode::Scientific
                                                                                            : Mode::Fixed;
    }
    measure(0, 0);
  }

  void collect(size_t dim, int64_t offset, std::vector<double>& out) const {
    if (dim == shape.size()) {
      if (std::isfinite(values[offset])) out.push_back(values[offset]);
      return;
    }
    for (int64_t i : visible[dim])
      if (i >= 0) collect(dim + 1, offset + i * strides[dim], out);
  }

  // Like PyTorch, only nonzero finite floats set the width (at least 1): "nan", "inf" and "-0.0000"
  // may stick out of the column. Every int64 and bool value counts.
  void measure(size_t dim, int64_t offset) {
    if (dim == shape.size()) {
      const double v = values[offset];
      const bool counts = mode == Mode::Int64 || mode == Mode::Bool || (std::isfinite(v) && v != 0);
      if (counts) width = std::max(width, text(offset).size());
      return;
    }
    for (int64_t i : visible[dim])
      if (i >= 0) measure(dim + 1, offset + i * strides[dim]);
  }

  std::string text(int64_t offset) const {
    return mode == Mode::Int64 ? std::to_string(integers[offset]) : format_value(values[offset], mode);
  }

  std::string element(int64_t offset) const {
    const std::string value = text(offset);
    return std::string(width - std::min(width, value.size()), ' ') + value;
  }

  // PyTorch's _tensor_str_with_formatter: innermost rows wrap at the line width; outer dims
  // separate their slices with ",", dim-1 newlines, and an indent.
  std::string render(size_t dim, int64_t offset, size_t indent) const {
    const size_t remaining = shape.size() - dim;
    if (remaining == 1) {
      const size_t per_line = std::max<size_t>(1, (kLineWidth - indent) / (width + 2));
      std::string out = "[";
      size_t on_line = 0;
      bool first = true;
      for (int64_t i : visible[dim]) {
        if (!first) {
          out += ",";
          if (on_line == per_line) {
            out.append("\n").append(indent + 1, ' ');
            on_line = 0;
          } else {
            out += " ";
          }
        }
        out += i < 0 ? std::string(" ...") : element(offset + i * strides[dim]);  // PyTorch's " ..."
        ++on_line;
        first = false;
      }
      return out + "]";
    }
    std::string separator = ",";
    separator.append(remaining - 1, '\n').append(indent + 1, ' ');
    std::string out = "[";
    bool first = true;
    for (int64_t i : visible[dim]) {
      if (!first) out += separator;
      out += i < 0 ? std::string("...") : render(dim + 1, offset + i * strides[dim], indent + 1);
      first = false;
    }
    return out + "]";
  }
};

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "[ undefined tensor ]";
  const std::string prefix = "tensor(";
  std::string body;
  std::vector<std::string> suffixes;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) {
      std::string dims;
      for (int64_t size : t.shape()) dims += (dims.empty() ? "" : ", ") + std::to_string(size);
      suffixes.push_back("size=(" + dims + ")");
    }
  } else {
    const std::vector<double> values =
        detail::dispatch_all("print", t.dtype(), [&]<typename T>() {
          const T* data = t.data<T>();
          return std::vector<double>(data, data + t.numel());
        });
    Printer printer{values, t.dtype() == kInt64 ? t.data<int64_t>() : nullptr, t.shape(),
                    std::vector<int64_t>(t.shape().size(), 1), visible_indices(t.shape(), t.numel() > kSummaryThreshold)};
    for (size_t d = t.shape().size(); d-- > 1;) printer.strides[d - 1] = printer.strides[d] * t.shape()[d];
    printer.choose_format(t.dtype());
    body = t.dim() == 0 ? printer.element(0) : printer.render(0, 0, prefix.size());
  }
  // PyTorch names the dtype unless it is the default float32 or, for a non-empty tensor, int64 or
  // bool (which the values already show).
  const bool dtype_is_evident = t.dtype() == kFloat32 || (t.numel() > 0 && !is_floating_point(t.dtype()));
  if (!dtype_is_evident) suffixes.push_back("dtype=" + std::string(name(t.dtype())));
  if (const char* fn = t.grad_fn_name()) suffixes.push_back("grad_fn=<" + std::string(fn) + ">");
  else if (t.requires_grad()) suffixes.push_back("requires_grad=True");
  // Suffixes follow on the last line, or on a new indented line when it would pass 80 columns.
  // The line length is counted as PyTorch's _add_suffixes counts it (two more than the characters
  // after the last newline), so that lines break where PyTorch breaks them.
  std::string text = prefix + body;
  const size_t newline = text.rfind('\n');
  size_t last_line = (newline == std::string::npos ? text.size() : text.size() - newline - 1) + 2;
  for (const std::string& suffix : suffixes) {
    if (last_line + suffix.size() + 2 > static_cast<size_t>(kLineWidth)) {
      text.append(",\n").append(prefix.size(), ' ');
      last_line = prefix.size() + suffix.size();
    } else {
      text.append(", ");
      last_line += suffix.size() + 2;
    }
    text += suffix;
  }
  return out << text << ")";
}

}  // namespace tg
