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
constexpr const char* kChecksumKey = "tapegrad.crc32c";

const char* dtype_name(DType dtype) { return dtype == kFloat32 ? "F32" : "F64"; }

std::string hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

}  // namespace

std::string encode_safetensors(const NamedTensors& tensors, Metadata metadata) {
  json header = json::object();
  std::string data;
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;
    const Tensor& tensor = entry.second;  // a named variable, not a binding: lambdas capture it
    const size_t begin = data.size();
    dispatch_all("save", tensor.dtype(), [&]<typename T>() {
      data.append(reinterpret_cast<const char*>(tensor.data<T>()), static_cast<size_t>(tensor.numel()) * sizeof(T));
    });
    header[name] = {{"dtype", dtype_name(tensor.dtype())}, {"shape", tensor.shape()}, {"data_offsets", {begin, data.size()}}};
  }
  metadata[kChecksumKey] = hex(crc32c(data.data(), data.size()));
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as safetensors does

  std::string bytes(kLengthBytes, '\0');
  for (size_t i = 0; i < kLengthBytes; ++i) bytes[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  return bytes + text + data;
}

SafetensorsContents decode_safetensors(const std::string& bytes, const std::string& source, const char* op) {
  check(bytes.size() >= kLengthBytes, op, "'", source, "' is truncated: ", bytes.size(),
        " bytes, shorter than the 8-byte header length");
  uint64_t header_bytes = 0;
  for (size_t i = 0; i < kLengthBytes; ++i) header_bytes |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  check(header_bytes <= kMaxHeaderBytes, op, "'", source, "' claims a ", header_bytes,
        "-byte header (corrupted length, or not a safetensors file)");
  check(header_bytes <= bytes.size() - kLengthBytes, op, "'", source, "' is truncated: the header claims ",
        header_bytes, " bytes but only ", bytes.size() - kLengthBytes, " follow");
  const std::string_view data(bytes.data() + kLengthBytes + header_bytes, bytes.size() - kLengthBytes - header_bytes);

  json header;
  try {
    header = json::parse(bytes.begin() + kLengthBytes, bytes.begin() + kLengthBytes + static_cast<std::ptrdiff_t>(header_bytes));
  } catch (const json::exception& error) {
    throw Error(concat(op, ": '", source, "' has a malformed header: ", error.what()));
  }
  check(header.is_object(), op, "'", source, "' has a malformed header: expected a JSON object");

  SafetensorsContents contents;
  struct Extent {
    size_t begin, end;
    std::string name;
  };
  std::vector<Extent> extents;
  for (const auto& item : header.items()) {
    const std::string& name = item.key();
    const json& entry = item.value();
    if (name == "__metadata__") {
      check(entry.is_object(), op, "'", source, "' has a malformed header: __metadata__ must be an object");
      for (const auto& [key, value] : entry.items()) {
        check(value.is_string(), op, "'", source, "' has a malformed header: metadata '", key, "' is not a string");
        contents.metadata[key] = value.get<std::string>();
      }
      continue;
    }
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
    check(begin <= end && end <= data.size(), op, "'", source, "': tensor '", name, "' has data_offsets [", begin, ", ",
          end, "] outside the ", data.size(), "-byte data section (truncated file?)");
    check(end - begin == static_cast<uint64_t>(numel) * element_size(type), op, "'", source, "': tensor '", name,
          "' of shape ", shape, " and dtype ", dtype_text, " needs ", static_cast<uint64_t>(numel) * element_size(type),
          " bytes, its data_offsets span ", end - begin);
    Tensor tensor = make_tensor(shape, type, op);
    if (end > begin) std::memcpy(tensor.impl()->storage->data, data.data() + begin, end - begin);
    contents.tensors[name] = tensor;
    extents.push_back({begin, end, name});
  }
  // The tensors must tile the data section: no gaps, no overlaps, nothing after the last one.
  // Ties by end: a zero-byte tensor (a dim of size 0) shares its begin with the tensor after it.
  std::sort(extents.begin(), extents.end(),
            [](const Extent& a, const Extent& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  size_t expected = 0;
  for (const Extent& extent : extents) {
    check(extent.begin == expected, op, "'", source, "': tensor '", extent.name, "' starts at byte ", extent.begin,
          " of the data section, expected ", expected, " (gap or overlap)");
    expected = extent.end;
  }
  check(expected == data.size(), op, "'", source, "' has ", data.size() - expected, " unexpected bytes after its data");

  if (auto it = contents.metadata.find(kChecksumKey); it != contents.metadata.end()) {
    const std::string actual = hex(crc32c(data.data(), data.size()));
    check(actual == it->second, op, "'", source, "' is corrupted: the data section's CRC-32C is ", actual,
          " but the header records ", it->second);
  }
  return contents;
}

}  // namespace tg::detail
