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

// The checksum a file carries in its metadata, as 8 lowercase hex digits:
// - kFileChecksumKey: the CRC-32C of the whole file (length, header and data) as written with
//   this value set to "00000000". What encode_safetensors writes: any change to any byte,
//   header included, is detected, and the file stays plain safetensors for other readers.
// - kDataChecksumKey: the CRC-32C of the data section only, which checkpoint format version 1
//   wrote; still verified when present.
inline constexpr const char* kFileChecksumKey = "tapegrad.file_crc32c";
inline constexpr const char* kDataChecksumKey = "tapegrad.crc32c";

// The bytes of a safetensors file holding `tensors` in order; `metadata` gains kFileChecksumKey.
// tg::Error naming `op` for a name that is not valid UTF-8 or when memory runs out.
std::string encode_safetensors(const NamedTensors& tensors, Metadata metadata, const char* op);

struct SafetensorsContents {
  std::map<std::string, Tensor> tensors;
  Metadata metadata;
};

// Parses and validates the whole file before returning anything: header length and JSON, the
// checksums the file carries (before any tensor is allocated), each entry's dtype, shape and
// offsets (which must tile the data section exactly). Any problem, running out of memory
// included, is a tg::Error naming `op`, `source` and what is wrong.
SafetensorsContents decode_safetensors(const std::string& bytes, const std::string& source, const char* op);

}  // namespace tg::detail
