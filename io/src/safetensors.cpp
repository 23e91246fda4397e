#include "safetensors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "dispatch.hpp"
#include "crc32c.hpp"

namespace tg::detail {

namespace {

using nlohmann::json;

constexpr size_t kLengthBytes = 8;
constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the limit the reference implementation sets
constexpr const char* kChecksumPlaceholder = "00000000";
constexpr size_t kChecksumDigits = 8;

const char* dtype_name(DType dtype) { return dtype == kFloat32 ? "F32" : "F64"; }

std::string hex(uint32_t value) {
  char text[kChecksumDigits + 1];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

// Where the 8 digits of the file checksum start in `header` (the file up to its data), or npos
// unless the key is written exactly once and followed by a string value. A JSON string cannot
// contain an unescaped quote, so the quoted key occurs only where the key itself is written.
size_t checksum_digits_at(std::string_view header) {
  const std::string key = concat("\"", kFileChecksumKey, "\"");
  const size_t at = header.find(key, kLengthBytes);
  if (at == std::string_view::npos || header.find(key, at + 1) != std::string_view::npos) return std::string_view::npos;
  constexpr std::string_view kJsonSpace = " \t\n\r";
  size_t pos = header.find_first_not_of(kJsonSpace, at + key.size());
  if (pos == std::string_view::npos || header[pos] != ':') return std::string_view::npos;
  pos = header.find_first_not_of(kJsonSpace, pos + 1);
  if (pos == std::string_view::npos || header[pos] != '"') return std::string_view::npos;
  return pos + 1;
}

// `text` with every byte outside printable ASCII shown as \xNN, for error messages.
std::string printable(const std::string& text) {
  std::string shown;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      shown += c;
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      shown += escaped;
    }
  }
  return shown;
}

// JSON text must be UTF-8: refuse a name that is not, before anything is written.
void check_utf8(const std::string& text, const char* what, const char* op) {
  try {
    (void)json(text).dump();
  } catch (const json::type_error&) {
    throw Error(concat(op, ": ", what, " '", printable(text), "' is not valid UTF-8"));
  }
}

std::string encode(const NamedTensors& tensors, Metadata metadata, const char* op) {
  json header = json::object();
  size_t data_bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    check_utf8(name, "the tensor name", op);
    const size_t nbytes = static_cast<size_t>(tensor.numel()) * element_size(tensor.dtype());
    header[name] = {{"dtype", dtype_name(tensor.dtype())},
                    {"shape", tensor.shape()},
                    {"data_offsets", {data_bytes, data_bytes + nbytes}}};
    data_bytes += nbytes;
  }
  for (const auto& [key, value] : metadata) {
    check_utf8(key, "the metadata key", op);
    check_utf8(value, "the metadata value", op);
  }
  metadata[kFileChecksumKey] = kChecksumPlaceholder;
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as safetensors does

  std::string bytes;
  bytes.reserve(kLengthBytes + text.size() + data_bytes);
  for (size_t i = 0; i < kLengthBytes; ++i) bytes += static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  bytes += text;
  for (const auto& entry : tensors) {
    const Tensor& tensor = entry.second;  // a named variable, not a binding: lambdas capture it
    dispatch(tensor.dtype(), [&]<typename T>() {
      bytes.append(reinterpret_cast<const char*>(tensor.data<T>()), static_cast<size_t>(tensor.numel()) * sizeof(T));
    });
  }
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

Entry parse_entry(const std::string& name, const json& entry, size_t data_bytes, const std::string& source,
                  const char* op) {
  const auto malformed = [&](const char* what) {
    return Error(concat(op, ": '", source, "' has a malformed header: tensor '", name, "' ", what));
  };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    throw malformed("needs dtype, shape and data_offsets");
  const json& dtype = entry["dtype"];
  const json& shape_json = entry["shape"];
  const json& offsets = entry["data_offsets"];
  if (!dtype.is_string()) throw malformed("has a non-string dtype");
  const std::string dtype_text = dtype.get<std::string>();
  check(dtype_text == "F32" || dtype_text == "F64", op, "'", source, "': tensor '", name, "' has dtype ", dtype_text,
        "; tapegrad reads F32 and F64");
  if (!shape_json.is_array()) throw malformed("has a shape that is not a list");
  Shape shape;
  for (const json& size : shape_json) {
    if (!size.is_number_unsigned()) throw malformed("has a shape entry that is not a non-negative integer");
    shape.push_back(static_cast<int64_t>(std::min<uint64_t>(size.get<uint64_t>(), uint64_t{1} << 62)));
  }
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    throw malformed("needs data_offsets [begin, end]");
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  const DType type = dtype_text == "F32" ? kFloat32 : kFloat64;
  const int64_t numel = checked_numel(shape, op);
  check(begin <= end && end <= data_bytes, op, "'", source, "': tensor '", name, "' has data_offsets [", begin, ", ",
        end, "] outside the ", data_bytes, "-byte data section (truncated file?)");
  check(end - begin == static_cast<uint64_t>(numel) * element_size(type), op, "'", source, "': tensor '", name,
        "' of shape ", shape, " and dtype ", dtype_text, " needs ", static_cast<uint64_t>(numel) * element_size(type),
        " bytes, its data_offsets span ", end - begin);
  return {name, type, std::move(shape), static_cast<size_t>(begin), static_cast<size_t>(end)};
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

  json header;
  try {
    header = json::parse(bytes.begin() + kLengthBytes, bytes.begin() + static_cast<std::ptrdiff_t>(data_begin));
  } catch (const json::exception& error) {
    throw Error(concat(op, ": '", source, "' has a malformed header: ", error.what()));
  }
  check(header.is_object(), op, "'", source, "' has a malformed header: expected a JSON object");

  SafetensorsContents contents;
  std::vector<Entry> entries;
  for (const auto& item : header.items()) {
    if (item.key() != "__metadata__") {
      entries.push_back(parse_entry(item.key(), item.value(), data_bytes, source, op));
      continue;
    }
    check(item.value().is_object(), op, "'", source, "' has a malformed header: __metadata__ must be an object");
    for (const auto& [key, value] : item.value().items()) {
      check(value.is_string(), op, "'", source, "' has a malformed header: metadata '", key, "' is not a string");
      contents.metadata[key] = value.get<std::string>();
    }
  }
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
      std::memcpy(tensor.impl()->storage->data, bytes.data() + data_begin + entry.begin, entry.end - entry.begin);
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
