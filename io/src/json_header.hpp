// The JSON header of a safetensors file, written and read without a JSON document tree.
//
// Why no tree: nlohmann::json's destructor moves the children of an array or object onto a heap
// vector before freeing them, and it is noexcept, so destroying a parsed header while memory is
// short calls std::terminate. Strings go through nlohmann's serializer (a string value's
// destructor does not allocate) and the reader is its SAX parser: nothing here builds a tree.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "safetensors.hpp"

namespace tg::detail {

// `text` with every byte outside printable ASCII shown as \xNN, for error messages.
std::string printable(const std::string& text);

// `text` as a quoted JSON string, escaped as JSON requires; tg::Error naming `op` and `what`
// ("the tensor name") when `text` is not valid UTF-8.
std::string json_string(const std::string& text, const char* what, const char* op);

// One tensor entry of the header as written: its fields checked for JSON type, not yet for
// meaning (decode_safetensors checks dtype names, sizes and offsets).
struct HeaderEntry {
  std::string name;
  std::string dtype;
  Shape shape;                         // each dim clamped to 2^62: checked_numel refuses those
  std::vector<uint64_t> data_offsets;  // [begin, end]
};

struct Header {
  std::vector<HeaderEntry> entries;  // in file order
  Metadata metadata;
};

// Parses `text`: one object of tensor entries {"dtype": string, "shape": [unsigned...],
// "data_offsets": [unsigned, unsigned]} and an optional "__metadata__" object of strings. A
// syntax error, a duplicate key, a missing or unexpected field or a value of the wrong type is a
// tg::Error naming `op` and `source`.
Header parse_header(std::string_view text, const std::string& source, const char* op);

}  // namespace tg::detail
