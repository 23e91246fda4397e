// The JSON values inside a checkpoint's metadata (the optimizer's parameter groups, a scheduler's
// base learning rates and counters), read and written without nlohmann's document tree.
//
// Why: nlohmann::json's destructor moves an array's or object's children onto a heap vector before
// freeing them, and it is noexcept, so dropping a tree while memory is short calls std::terminate
// (json_header.hpp reads the safetensors header the same way, for the same reason). JsonValue is
// plain vectors and strings, whose destructors only free; it is filled by nlohmann's SAX parser,
// and text is written with nlohmann's serializer of scalars, so numbers keep its round-trip format.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tg::detail {

struct JsonField;

struct JsonValue {
  enum class Kind { Null, Boolean, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<JsonValue> items;   // an array's values
  std::vector<JsonField> fields;  // an object's members, in the text's order, keys unique

  bool is_number() const { return kind == Kind::Number; }
  bool is_array_of_numbers() const;
  // The member named `key` of an object, or null when there is none.
  const JsonValue* find(const std::string& key) const;
  // The value as compact JSON text, for error messages.
  std::string dump() const;
};

struct JsonField {
  std::string key;
  JsonValue value;
};

// Parses `text` strictly (one JSON value, no duplicate keys). tg::Error naming `op`, the file and
// the metadata key when it is not.
JsonValue parse_json_value(std::string_view text, const char* op, const std::string& path, const std::string& key);

// "[a,b,c]": the JSON texts to_json(element) of the range's elements, as a JSON array.
template <typename Range, typename ToJson>
std::string json_array(const Range& range, ToJson to_json) {
  std::string text = "[";
  for (const auto& element : range) {
    if (text.size() > 1) text += ',';
    text += to_json(element);
  }
  return text += ']';
}

// JSON text of a number, as nlohmann writes it (the shortest text that reads back to the same double).
std::string json_number(double value);

}  // namespace tg::detail
