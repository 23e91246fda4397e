// The .npy format (numpy/lib/format.py): the magic "\x93NUMPY", a version (1.0: 2-byte header
// length, 2.0: 4-byte), a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), } padded with spaces to a multiple of 64 bytes and ended by '\n', then the
// raw little-endian data in C order.
#include <bit>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <utility>

#include "convert.hpp"
#include "dispatch.hpp"
#include "io/file.hpp"
#include "tapegrad/npy.hpp"
#include "tensor_impl.hpp"

namespace tg {

static_assert(std::endian::native == std::endian::little, "tapegrad's file formats assume a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kAlignment = 64;  // numpy aligns the data to 64 bytes since 1.14

// A reader for exactly the dict literal numpy writes, and nothing more permissive: every
// deviation is reported with its byte offset in the header.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    Shape shape;
  };

  Header parse() {
    Header header;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (true) {
      skip_spaces();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        header.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        header.shape = tuple();
        has_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      skip_spaces();
      if (peek() == ',') ++pos_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    ++pos_;
    if (!has_descr || !has_order || !has_shape) fail("the header needs the keys 'descr', 'fortran_order' and 'shape'");
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
    if (pos_ != text_.size()) fail("unexpected text after the dict");
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(detail::concat("load_npy: '", source_, "': malformed header at byte ", pos_, ": ", what));
  }
  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    skip_spaces();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_spaces();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string value = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return value;
  }
  bool boolean() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (text_.compare(pos_, std::strlen(word), word) == 0) {
        pos_ += std::strlen(word);
        return value;
      }
    fail("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (true) {
      skip_spaces();
      if (peek() == ')') break;
      shape.push_back(integer());
      skip_spaces();
      if (peek() == ',') ++pos_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;
    return shape;
  }
  int64_t integer() {
    if (peek() < '0' || peek() > '9') fail("expected a non-negative integer in the shape");
    int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) fail("dimension too large");
      value = value * 10 + (text_[pos_++] - '0');
    }
    return value;
  }

  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::string& bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

// The descr NumPy writes for each dtype: little-endian, and '|' (no byte order) for 1-byte bools.
constexpr std::pair<DType, std::string_view> kDescrs[] = {
    {kFloat32, "<f4"}, {kFloat64, "<f8"}, {kInt64, "<i8"}, {kBool, "|b1"}};

std::string_view descr_of(DType dtype) {
  for (const auto& [type, descr] : kDescrs)
    if (type == dtype) return descr;
  // NumPy has no bfloat16 (ml_dtypes' is an extension type that np.load cannot read back).
  check(dtype != kBFloat16, "save_npy",
        ".npy has no bfloat16 dtype; cast with .to(tg::kFloat32) first (exact), or save a checkpoint: "
        "safetensors has BF16");
  throw Error(detail::concat("save_npy: no .npy descr for dtype ", dtype));
}

std::optional<DType> dtype_from_descr(const std::string& descr) {
  for (const auto& [type, known] : kDescrs)
    if (descr == known) return type;
  return std::nullopt;
}

}  // namespace

std::string encode_npy(const Tensor& tensor) try {
  check(tensor.defined(), "save_npy", "undefined tensor");
  // Plain appends, not concat(): a stream that runs out of memory drops text silently.
  std::string dict = "{'descr': '";
  dict += descr_of(tensor.dtype());
  dict += "', 'fortran_order': False, 'shape': (";
  for (size_t d = 0; d < tensor.shape().size(); ++d) dict += std::to_string(tensor.shape()[d]) + ", ";
  if (tensor.dim() > 1) dict.resize(dict.size() - 2);  // (3,) keeps its comma, (2, 3) does not
  if (tensor.dim() == 1) dict.pop_back();
  dict += "), }";
  // Version 1.0 has a 2-byte header length; fall back to 2.0 (4 bytes) for very long shapes.
  const bool v2 = kMagicSize + 2 + 2 + dict.size() + 1 > std::numeric_limits<uint16_t>::max();
  const size_t prefix = kMagicSize + 2 + (v2 ? 4 : 2);
  const size_t header_size = ((prefix + dict.size() + 1 + kAlignment - 1) / kAlignment) * kAlignment - prefix;
  dict.append(header_size - dict.size() - 1, ' ');
  dict += '\n';

  std::string bytes(kMagic, kMagicSize);
  bytes += static_cast<char>(v2 ? 2 : 1);
  bytes += '\0';
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) bytes += static_cast<char>((header_size >> (8 * i)) & 0xff);
  bytes += dict;
  const size_t data_bytes = static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype());
  detail::dispatch_all("save_npy", tensor.dtype(), [&]<typename T>() {
    bytes.append(reinterpret_cast<const char*>(tensor.data<T>()), data_bytes);
  });
  return bytes;
} catch (const std::bad_alloc&) {
  const size_t data_bytes = tensor.defined() ? static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype()) : 0;
  throw Error(detail::concat("save_npy: out of memory while encoding a tensor with ", data_bytes, " bytes of data"));
}

Tensor decode_npy(const std::string& bytes, const std::string& source) try {
  check(bytes.size() >= kMagicSize + 4 && bytes.compare(0, kMagicSize, kMagic, kMagicSize) == 0, "load_npy", "'",
        source, "' is not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[kMagicSize]), minor = static_cast<unsigned char>(bytes[kMagicSize + 1]);
  check((major == 1 || major == 2) && minor == 0, "load_npy", "'", source, "' has format version ", major, ".", minor,
        "; supported are 1.0 and 2.0");
  const size_t length_width = major == 1 ? 2 : 4;
  const size_t prefix = kMagicSize + 2 + length_width;
  check(bytes.size() >= prefix, "load_npy", "'", source, "' is truncated inside its preamble");
  const size_t header_size = read_le(bytes, kMagicSize + 2, length_width);
  check(bytes.size() - prefix >= header_size, "load_npy", "'", source, "' is truncated: its header claims ",
        header_size, " bytes but only ", bytes.size() - prefix, " follow");
  const std::string header_text = bytes.substr(prefix, header_size);
  const HeaderParser::Header header = HeaderParser(header_text, source).parse();

  const std::optional<DType> dtype = dtype_from_descr(header.descr);
  // ml_dtypes writes bfloat16 arrays as 2-byte void records ('<V2' or '|V2'), the only way to put one in a .npy.
  check(header.descr != "<V2" && header.descr != "|V2" && header.descr.find("bfloat16") == std::string::npos,
        "load_npy", "'", source, "' holds dtype '", header.descr,
        "' (bfloat16?): .npy has no bfloat16; save it as float32 (astype(np.float32)) and cast after loading with "
        ".to(tg::kBFloat16)");
  check(dtype.has_value(), "load_npy", "'", source, "' holds dtype '", header.descr,
        "'; supported are float32 ('<f4'), float64 ('<f8'), int64 ('<i8') and bool ('|b1')");
  check(!header.fortran_order, "load_npy", "'", source,
        "' is in Fortran order; save a C-order array (np.ascontiguousarray) instead");
  const int64_t numel = checked_numel(header.shape, "load_npy");
  const size_t data_bytes = static_cast<size_t>(numel) * element_size(*dtype);
  const size_t available = bytes.size() - prefix - header_size;
  check(available == data_bytes, "load_npy", "'", source, "' with shape ", header.shape, " and dtype ", *dtype,
        " needs ", data_bytes, " data bytes but has ", available, available < data_bytes ? " (truncated)" : "");
  Tensor out = make_tensor(header.shape, *dtype, "load_npy");
  if (data_bytes > 0) std::memcpy(tg::detail::impl_of(out)->storage->data, bytes.data() + prefix + header_size, data_bytes);
  if (*dtype == kBool) detail::normalize_bools(out);
  return out;
} catch (const std::bad_alloc&) {
  throw Error(detail::concat("load_npy: out of memory while decoding the ", bytes.size(), "-byte file '", source, "'"));
}

void save_npy(const Tensor& tensor, const std::string& path) {
  detail::write_file_atomically(path, encode_npy(tensor), "save_npy");
}

Tensor load_npy(const std::string& path) { return decode_npy(detail::read_file(path, "load_npy"), path); }

}  // namespace tg
