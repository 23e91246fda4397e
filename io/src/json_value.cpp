#include "json_value.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "json_header.hpp"
#include "tapegrad/error.hpp"

namespace tg::detail {

namespace {

using nlohmann::json;

// Receives the parser's events and builds the JsonValue: `open_` holds the arrays and objects not
// yet closed, innermost last. A parent is not appended to while its last child is open, so the
// pointers stay valid.
class ValueBuilder : public nlohmann::json_sax<json> {
 public:
  JsonValue root;
  std::string error;  // set when the text is not what parse_json_value accepts

  bool null() override { return add(JsonValue{}); }
  bool boolean(bool value) override {
    JsonValue flag = of_kind(JsonValue::Kind::Boolean);
    flag.boolean = value;
    return add(std::move(flag));
  }
  bool number_integer(number_integer_t value) override { return add_number(static_cast<double>(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add_number(static_cast<double>(value)); }
  bool number_float(number_float_t value, const string_t&) override { return add_number(value); }
  bool string(string_t& value) override {
    JsonValue text = of_kind(JsonValue::Kind::String);
    text.string = std::move(value);
    return add(std::move(text));
  }
  bool binary(binary_t&) override { return add(JsonValue{}); }  // the text parser never reports one
  bool start_object(std::size_t) override { return open(JsonValue::Kind::Object); }
  bool key(string_t& name) override {
    const std::vector<JsonField>& fields = open_.back()->fields;
    if (std::any_of(fields.begin(), fields.end(), [&](const JsonField& field) { return field.key == name; })) {
      error = concat("the key \"", printable(name), "\" appears twice");
      return false;
    }
    key_ = std::move(name);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(JsonValue::Kind::Array); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& exception) override {
    error = exception.what();
    return false;
  }

 private:
  static JsonValue of_kind(JsonValue::Kind kind) {
    JsonValue value;
    value.kind = kind;
    return value;
  }
  bool add_number(double value) {
    JsonValue number = of_kind(JsonValue::Kind::Number);
    number.number = value;
    return add(std::move(number));
  }

  // Places `value` in the innermost open container (or as the root) and returns where it went.
  JsonValue* place(JsonValue&& value) {
    if (open_.empty()) {
      root = std::move(value);
      return &root;
    }
    JsonValue& parent = *open_.back();
    if (parent.kind == JsonValue::Kind::Array) {
      parent.items.push_back(std::move(value));
      return &parent.items.back();
    }
    parent.fields.push_back({std::move(key_), std::move(value)});
    return &parent.fields.back().value;
  }
  bool add(JsonValue&& value) {
    place(std::move(value));
    return true;
  }
  bool open(JsonValue::Kind kind) {
    open_.push_back(place(of_kind(kind)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  std::vector<JsonValue*> open_;
  std::string key_;  // the key of the member whose value comes next
};

void append_dump(const JsonValue& value, std::string& text) {
  switch (value.kind) {
    case JsonValue::Kind::Null: text += "null"; return;
    case JsonValue::Kind::Boolean: text += value.boolean ? "true" : "false"; return;
    case JsonValue::Kind::Number: text += json_number(value.number); return;
    case JsonValue::Kind::String: text += '"' + printable(value.string) + '"'; return;
    case JsonValue::Kind::Array:
      text += '[';
      for (size_t i = 0; i < value.items.size(); ++i) {
        if (i > 0) text += ',';
        append_dump(value.items[i], text);
      }
      text += ']';
      return;
    case JsonValue::Kind::Object:
      text += '{';
      for (size_t i = 0; i < value.fields.size(); ++i) {
        if (i > 0) text += ',';
        text += '"' + printable(value.fields[i].key) + "\":";
        append_dump(value.fields[i].value, text);
      }
      text += '}';
      return;
  }
}

}  // namespace

bool JsonValue::is_array_of_numbers() const {
  return kind == Kind::Array && std::all_of(items.begin(), items.end(), [](const JsonValue& v) { return v.is_number(); });
}

const JsonValue* JsonValue::find(const std::string& key) const {
  auto it = std::find_if(fields.begin(), fields.end(), [&](const JsonField& field) { return field.key == key; });
  return it == fields.end() ? nullptr : &it->value;
}

std::string JsonValue::dump() const {
  std::string text;
  append_dump(*this, text);
  return text;
}

JsonValue parse_json_value(std::string_view text, const char* op, const std::string& path, const std::string& key) {
  ValueBuilder builder;
  if (!json::sax_parse(text.begin(), text.end(), &builder))
    throw Error(concat(op, ": '", path, "' has a malformed '", key, "': ", builder.error, ": \"", printable(std::string(text)), "\""));
  return std::move(builder.root);
}

std::string json_number(double value) { return json(value).dump(); }

}  // namespace tg::detail
