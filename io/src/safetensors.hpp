// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length, a JSON
// header {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"<key>": "<string>"}}, then the raw little-endian data. Private to the library;
// tg::save / tg::load build checkpoints on it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor_impl.hpp"

namespace tg::detail {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

// The bytes of a safetensors file holding `tensors` in order. `metadata` gains
// "tapegrad.crc32c": the CRC-32C of the data section, in hex.
std::string encode_safetensors(const NamedTensors& tensors, Metadata metadata);

struct SafetensorsContents {
  std::map<std::string, Tensor> tensors;
  Metadata metadata;
};

// Parses and validates the whole file before returning anything: header length and JSON, each
// entry's dtype, shape and offsets (which must tile the data section exactly), and the checksum
// when the file carries one. Any problem is a tg::Error naming `op`, `source` and what is wrong.
SafetensorsContents decode_safetensors(const std::string& bytes, const std::string& source, const char* op);

}  // namespace tg::detail
