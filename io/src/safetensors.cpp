#include "safetensors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "convert.hpp"
#include "crc32c.hpp"
#include "dispatch.hpp"
#include "json_header.hpp"
#include "tensor_impl.hpp"

namespace tg::detail {

namespace {

constexpr size_t kLengthBytes = 8;
constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the limit the reference implementation sets
constexpr const char* kChecksumPlaceholder = "00000000";
constexpr size_t kChecksumDigits = 8;

// safetensors' names for tapegrad's dtypes (BOOL is one byte per element, as in PyTorch; BF16 the
// upper 16 bits of a float32, little-endian, torch.bfloat16's bytes).
constexpr std::pair<DType, const char*> kDTypeNames[] = {
    {kFloat32, "F32"}, {kFloat64, "F64"}, {kInt64, "I64"}, {kBool, "BOOL"}, {kBFloat16, "BF16"}};

const char* dtype_name(DType dtype) {
  for (const auto& [type, name] : kDTypeNames)
    if (type == dtype) return name;
  throw Error(concat("save: no safetensors dtype for ", dtype));
}

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const auto& [type, known] : kDTypeNames)
    if (name == known) return type;
  return std::nullopt;
}

std::string hex(uint32_t value) {
  char text[kChecksumDigits + 1];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

// Where the 8 digits of the file checksum start in `header` (the file up to its data), or npos
// unless the key is written exactly once and followed by a string value. A JSON string cannot
// contain an unescaped quote, so the quoted key occurs only where the key itself is written.
size_t checksum_digits_at(std::string_view header) {
  const std::string key = std::string("\"") + kFileChecksumKey + "\"";  // not concat(): see encode
  const size_t at = header.find(key, kLengthBytes);
  if (at == std::string_view::npos || header.find(key, at + 1) != std::string_view::npos) return std::string_view::npos;
  constexpr std::string_view kJsonSpace = " \t\n\r";
  size_t pos = header.find_first_not_of(kJsonSpace, at + key.size());
  if (pos == std::string_view::npos || header[pos] != ':') return std::string_view::npos;
  pos = header.find_first_not_of(kJsonSpace, pos + 1);
  if (pos == std::string_view::npos || header[pos] != '"') return std::string_view::npos;
  return pos + 1;
}

std::string encode(const NamedTensors& tensors, Metadata metadata, const char* op) {
  // {"<name>":{"dtype":"F32","shape":[2, 3],"data_offsets":[0,24]},...,"__metadata__":{...}}
  std::string text = "{";
  size_t data_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    const size_t nbytes = static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype());
    // Plain appends, not concat(): a stream that runs out of memory drops text silently.
    text += json_string(name, "the tensor name", op);
    text += ":{\"dtype\":\"";
    text += dtype_name(tensor.dtype());
    text += "\",\"shape\":[";
    for (size_t d = 0; d < tensor.shape().size(); ++d) text += (d ? "," : "") + std::to_string(tensor.shape()[d]);
    text += "],\"data_offsets\":[" + std::to_string(data_bytes) + "," + std::to_string(data_bytes + nbytes) + "]},";
    data_bytes += nbytes;
  }
  metadata[kFileChecksumKey] = kChecksumPlaceholder;
  text += "\"__metadata__\":{";
  for (const auto& [key, value] : metadata) {
    if (text.back() != '{') text += ',';
    text += json_string(key, "the metadata key", op) + ":" + json_string(value, "the metadata value", op);
  }
  text += "}}";
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as safetensors does

  std::string bytes;
  bytes.reserve(kLengthBytes + text.size() + data_bytes);
  for (size_t i = 0; i < kLengthBytes; ++i) bytes += static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  bytes += text;
  for (const auto& [name, tensor] : tensors)
    bytes.append(static_cast<const char*>(tg::detail::impl_of(tensor)->storage->data),
                 static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype()));
  // The checksum of the file as it stands, placeholder included, replaces the placeholder.
  const size_t value_at = checksum_digits_at(std::string_view(bytes).substr(0, kLengthBytes + text.size()));
  bytes.replace(value_at, kChecksumDigits, hex(crc32c(bytes.data(), bytes.size())));
  return bytes;
}

// Verifies the checksums `metadata` records over `bytes`, whose first `data_begin` bytes are the
// length and the header.
void verify_checksums(const std::string& bytes, size_t data_begin, const Metadata& metadata, const std::string& source,
                      const char* op) {
  if (auto it = metadata.find(kDataChecksumKey); it != metadata.end()) {
    const std::string actual = hex(crc32c(bytes.data() + data_begin, bytes.size() - data_begin));
    check(actual == it->second, op, "'", source, "' is corrupted: the data section's CRC-32C is ", actual,
          " but the header records ", printable(it->second));
  }
  if (auto it = metadata.find(kFileChecksumKey); it != metadata.end()) {
    const std::string_view header(bytes.data(), data_begin);
    const size_t value_at = checksum_digits_at(header);
    check(value_at != std::string_view::npos, op, "'", source, "' is corrupted: its header does not hold '",
          kFileChecksumKey, "' exactly once, with a string value");
    check(header.substr(value_at, kChecksumDigits + 1) == it->second + "\"", op, "'", source,
          "' is corrupted: its checksum is written as \"", printable(it->second), "\" (8 hex digits expected)");
    uint32_t crc = crc32c(bytes.data(), value_at);
    crc = crc32c(kChecksumPlaceholder, kChecksumDigits, crc);
    crc = crc32c(bytes.data() + value_at + kChecksumDigits, bytes.size() - value_at - kChecksumDigits, crc);
    check(hex(crc) == it->second, op, "'", source, "' is corrupted: the file's CRC-32C is ", hex(crc),
          " but the header records ", it->second);
  }
}

// One tensor entry of the header, validated but not yet read.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  size_t begin, end;  // byte offsets in the data section
};

// The meaning of an entry: a dtype tapegrad reads, offsets inside the data section that span
// exactly the bytes of its shape.
Entry checked_entry(const HeaderEntry& entry, size_t data_bytes, const std::string& source, const char* op) {
  const std::string& name = entry.name;
  const std::optional<DType> known = dtype_from_name(entry.dtype);
  check(known.has_value(), op, "'", source, "': tensor '", name, "' has dtype ", entry.dtype,
        "; tapegrad reads F32, F64, BF16, I64 and BOOL");
  const DType type = *known;
  const uint64_t begin = entry.data_offsets[0], end = entry.data_offsets[1];
  const int64_t numel = checked_numel(entry.shape, op);
  check(begin <= end && end <= data_bytes, op, "'", source, "': tensor '", name, "' has data_offsets [", begin, ", ",
        end, "] outside the ", data_bytes, "-byte data section (truncated file?)");
  check(end - begin == static_cast<uint64_t>(numel) * element_size(type), op, "'", source, "': tensor '", name,
        "' of shape ", entry.shape, " and dtype ", entry.dtype, " needs ",
        static_cast<uint64_t>(numel) * element_size(type), " bytes, its data_offsets span ", end - begin);
  return {name, type, entry.shape, static_cast<size_t>(begin), static_cast<size_t>(end)};
}

SafetensorsContents decode(const std::string& bytes, const std::string& source, const char* op) {
  check(bytes.size() >= kLengthBytes, op, "'", source, "' is truncated: ", bytes.size(),
        " bytes, shorter than the 8-byte header length");
  uint64_t header_bytes = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) header_bytes |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  check(header_bytes <= kMaxHeaderBytes, op, "'", source, "' claims a ", header_bytes,
        "-byte header (corrupted length, or not a safetensors file)");
  check(header_bytes <= bytes.size() - kLengthBytes, op, "'", source, "' is truncated: the header claims ",
        header_bytes, " bytes but only ", bytes.size() - kLengthBytes, " follow");
  const size_t data_begin = kLengthBytes + static_cast<size_t>(header_bytes);
  const size_t data_bytes = bytes.size() - data_begin;

  Header header = parse_header(std::string_view(bytes).substr(kLengthBytes, header_bytes), source, op);
  SafetensorsContents contents;
  contents.metadata = std::move(header.metadata);
  std::vector<Entry> entries;
  for (const HeaderEntry& entry : header.entries) entries.push_back(checked_entry(entry, data_bytes, source, op));
  // The tensors must tile the data section: no gaps, no overlaps, nothing after the last one.
  // Ties by end: a zero-byte tensor (a dim of size 0) shares its begin with the tensor after it.
  std::vector<const Entry*> by_offset;
  for (const Entry& entry : entries) by_offset.push_back(&entry);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  size_t expected = 0;
  for (const Entry* entry : by_offset) {
    check(entry->begin == expected, op, "'", source, "': tensor '", entry->name, "' starts at byte ", entry->begin,
          " of the data section, expected ", expected, " (gap or overlap)");
    expected = entry->end;
  }
  check(expected == data_bytes, op, "'", source, "' has ", data_bytes - expected, " unexpected bytes after its data");

  // Only bytes that passed their checksum become tensors.
  verify_checksums(bytes, data_begin, contents.metadata, source, op);
  for (const Entry& entry : entries) {
    Tensor tensor = make_tensor(entry.shape, entry.dtype, op);
    if (entry.end > entry.begin)
      std::memcpy(tg::detail::impl_of(tensor)->storage->data, bytes.data() + data_begin + entry.begin, entry.end - entry.begin);
    if (entry.dtype == kBool) normalize_bools(tensor);
    contents.tensors[entry.name] = tensor;
  }
  return contents;
}

}  // namespace

std::string encode_safetensors(const NamedTensors& tensors, Metadata metadata, const char* op) {
  try {
    return encode(tensors, std::move(metadata), op);
  } catch (const std::bad_alloc&) {
    size_t data_bytes = 0;
    for (const auto& entry : tensors) data_bytes += static_cast<size_t>(entry.second.numel()) * element_size(entry.second.dtype());
    throw Error(concat(op, ": out of memory while encoding ", tensors.size(), " tensors (", data_bytes,
                       " bytes of data) as safetensors"));
  }
}

SafetensorsContents decode_safetensors(const std::string& bytes, const std::string& source, const char* op) {
  try {
    return decode(bytes, source, op);
  } catch (const std::bad_alloc&) {
    throw Error(concat(op, ": out of memory while decoding the ", bytes.size(), "-byte file '", source, "'"));
  }
}

}  // namespace tg::detail
