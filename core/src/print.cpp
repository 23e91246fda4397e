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
#include "out_of_memory.hpp"
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
      measure();
      return;
    }
    std::vector<double> finite;
    collect(finite);
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
    measure();
  }

  // Calls visit(offset) for every visible element, in row-major order. Iterative, like render:
  // a tensor may have 100,000 dims of size 1, too many to recurse over.
  template <typename Visit>
  void for_each_visible(const Visit& visit) const {
    std::vector<size_t> position(shape.size(), 0);  // into visible[d]
    while (true) {
      int64_t offset = 0;
      bool summarized = false;
      for (size_t d = 0; d < shape.size(); ++d) {
        const int64_t index = visible[d][position[d]];
        summarized |= index < 0;
        offset += index * strides[d];
      }
      if (!summarized) visit(offset);
      size_t d = shape.size();
      while (d > 0 && ++position[d - 1] == visible[d - 1].size()) position[--d] = 0;
      if (d == 0) return;
    }
  }

  void collect(std::vector<double>& out) const {
    for_each_visible([&](int64_t offset) {
      if (std::isfinite(values[offset])) out.push_back(values[offset]);
    });
  }

  // Like PyTorch, only nonzero finite floats set the width (at least 1): "nan", "inf" and "-0.0000"
  // may stick out of the column. Every int64 and bool value counts.
  void measure() {
    for_each_visible([&](int64_t offset) {
      const double v = values[offset];
      const bool counts = mode == Mode::Int64 || mode == Mode::Bool || (std::isfinite(v) && v != 0);
      if (counts) width = std::max(width, text(offset).size());
    });
  }

  std::string text(int64_t offset) const {
    return mode == Mode::Int64 ? std::to_string(integers[offset]) : format_value(values[offset], mode);
  }

  std::string element(int64_t offset) const {
    const std::string value = text(offset);
    return std::string(width - std::min(width, value.size()), ' ') + value;
  }

  // The innermost dim: "[a, b, c]", wrapping at the line width, continuation lines indented.
  std::string row(size_t dim, int64_t offset, size_t indent) const {
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

  // PyTorch's _tensor_str_with_formatter: innermost rows wrap at the line width; outer dims
  // separate their slices with ",", dim-1 newlines, and an indent. Walks the dims with an explicit
  // stack instead of recursion (see for_each_visible); `indent` is the column of the first '['.
  std::string render(size_t indent) const {
    const size_t ndim = shape.size();
    if (ndim == 1) return row(0, 0, indent);
    struct Slice {
      size_t dim;
      int64_t offset;
      size_t next;  // the next entry of visible[dim] to print
    };
    std::vector<Slice> stack{{0, 0, 0}};
    std::string out = "[";
    while (!stack.empty()) {
      const Slice slice = stack.back();
      if (slice.next == visible[slice.dim].size()) {
        out += "]";
        stack.pop_back();
        continue;
      }
      ++stack.back().next;
      if (slice.next > 0) out.append(",").append(ndim - slice.dim - 1, '\n').append(indent + slice.dim + 1, ' ');
      const int64_t i = visible[slice.dim][slice.next];
      const int64_t child_offset = slice.offset + i * strides[slice.dim];
      if (i < 0) {
        out += "...";
      } else if (slice.dim + 2 == ndim) {
        out += row(slice.dim + 1, child_offset, indent + slice.dim + 1);
      } else {
        out += "[";
        stack.push_back({slice.dim + 1, child_offset, 0});
      }
    }
    return out;
  }
};

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& t) try {
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
    body = t.dim() == 0 ? printer.element(0) : printer.render(prefix.size());
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
} catch (...) {
  detail::rethrow_out_of_memory_as("print");
}

}  // namespace tg
