#include "json_header.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "tapegrad/error.hpp"

namespace tg::detail {

namespace {

using nlohmann::json;

// Receives the parser's events and keeps only what a safetensors header may hold. Nesting:
// depth 1 is the top object, 2 a tensor entry or __metadata__, 3 a shape or data_offsets list.
class HeaderReader : public nlohmann::json_sax<json> {
 public:
  HeaderReader(const std::string& source, const char* op) : source_(source), op_(op) {}

  Header header;
  std::string syntax_error;  // set when the parser reported one

  bool start_object(std::size_t) override {
    if (depth_ == 0 || (depth_ == 1 && !in_metadata())) {
      if (depth_ == 1) header.entries.push_back({key_, "", {}, {}});
      ++depth_;
      return true;
    }
    if (depth_ == 1) {  // __metadata__
      ++depth_;
      return true;
    }
    return wrong_value();
  }
  bool end_object() override {
    if (depth_ == 2 && !in_metadata()) {
      const HeaderEntry& entry = header.entries.back();
      if (fields_.size() != 3) fail("tensor '", entry.name, "' needs dtype, shape and data_offsets");
      fields_.clear();
    }
    --depth_;
    return true;
  }
  bool key(std::string& name) override {
    if (depth_ == 1) {
      if (!keys_.insert(name).second) fail("the key '", name, "' appears twice");
      key_ = name;
    } else if (in_metadata()) {
      if (header.metadata.count(name) > 0) fail("metadata '", name, "' appears twice");
      metadata_key_ = name;
    } else {
      const HeaderEntry& entry = header.entries.back();
      if (name != "dtype" && name != "shape" && name != "data_offsets")
        fail("tensor '", entry.name, "' has an unexpected field '", name, "'");
      if (!fields_.insert(name).second) fail("tensor '", entry.name, "' has '", name, "' twice");
      field_ = name;
    }
    return true;
  }
  bool string(std::string& value) override {
    if (depth_ == 2 && in_metadata()) {
      header.metadata[metadata_key_] = value;
      return true;
    }
    if (depth_ == 2 && field_ == "dtype") {
      header.entries.back().dtype = value;
      return true;
    }
    return wrong_value();
  }
  bool start_array(std::size_t) override {
    if (depth_ == 2 && !in_metadata() && field_ != "dtype") {
      ++depth_;
      return true;
    }
    return wrong_value();
  }
  bool end_array() override {
    --depth_;
    if (field_ == "data_offsets" && header.entries.back().data_offsets.size() != 2) return wrong_value();
    return true;
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ != 3) return wrong_value();
    HeaderEntry& entry = header.entries.back();
    if (field_ == "shape") entry.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(value, uint64_t{1} << 62)));
    else entry.data_offsets.push_back(value);
    return true;
  }
  bool number_integer(number_integer_t) override { return wrong_value(); }  // only negative ones arrive here
  bool number_float(number_float_t, const string_t&) override { return wrong_value(); }
  bool boolean(bool) override { return wrong_value(); }
  bool null() override { return wrong_value(); }
  bool binary(binary_t&) override { return wrong_value(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    syntax_error = error.what();
    return false;
  }

 private:
  bool in_metadata() const { return key_ == "__metadata__"; }

  template <typename... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw Error(concat(op_, ": '", source_, "' has a malformed header: ", parts...));
  }

  // A value of a type its place does not allow: say what the place needs.
  [[noreturn]] bool wrong_value() const {
    if (depth_ == 0) fail("expected a JSON object");
    if (depth_ == 1 && in_metadata()) fail("__metadata__ must be an object");
    if (depth_ == 1) fail("tensor '", key_, "' needs dtype, shape and data_offsets");
    if (in_metadata()) fail("metadata '", metadata_key_, "' is not a string");
    const std::string& name = header.entries.back().name;
    if (field_ == "dtype") fail("tensor '", name, "' has a non-string dtype");
    if (field_ == "shape" && depth_ == 2) fail("tensor '", name, "' has a shape that is not a list");
    if (field_ == "shape") fail("tensor '", name, "' has a shape entry that is not a non-negative integer");
    fail("tensor '", name, "' needs data_offsets [begin, end]");
  }

  const std::string& source_;
  const char* op_;
  int depth_ = 0;
  std::set<std::string> keys_;    // the top object's keys so far
  std::string key_;               // the current key of the top object
  std::string metadata_key_;      // the current key inside __metadata__
  std::set<std::string> fields_;  // the current entry's fields so far
  std::string field_;             // the current entry's current field
};

}  // namespace

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

std::string json_string(const std::string& text, const char* what, const char* op) {
  try {
    return json(text).dump();
  } catch (const json::type_error&) {
    throw Error(concat(op, ": ", what, " '", printable(text), "' is not valid UTF-8"));
  }
}

Header parse_header(std::string_view text, const std::string& source, const char* op) {
  HeaderReader reader(source, op);
  if (!json::sax_parse(text.begin(), text.end(), &reader))
    throw Error(concat(op, ": '", source, "' has a malformed header: ", reader.syntax_error));
  return std::move(reader.header);
}

}  // namespace tg::detail
