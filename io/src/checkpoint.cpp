// tg::save / tg::load: checkpoints on the safetensors format (core/src/io/safetensors.cpp).
#include "tapegrad/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <set>
#include <string_view>

#include "io/file.hpp"
#include "safetensors.hpp"
#include "tapegrad/autograd.hpp"

namespace tg {

namespace {

constexpr const char* kVersionKey = "tapegrad.format_version";
constexpr const char* kOptimizerKey = "tapegrad.optimizer";
constexpr const char* kBufferPrefix = "optimizer.momentum_buffer.";
constexpr const char* kTapegradPrefix = "tapegrad.";

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);  // round-trips every double exactly
  return text;
}

// A metadata value, or tg::Error naming the file and the key.
std::string required(const detail::Metadata& metadata, const std::string& key, const std::string& path) {
  auto it = metadata.find(key);
  check(it != metadata.end(), "load", "'", path, "' has no '", key, "' in its metadata");
  return it->second;
}

[[noreturn]] void malformed(const std::string& text, const std::string& key, const std::string& path,
                            const char* expected) {
  throw Error(detail::concat("load: '", path, "' has a malformed '", key, "': \"", text, "\" (expected ", expected,
                             ")"));
}

// Strict parsers: they accept what save writes (and JSON spells numbers the same way), nothing
// looser. strtod alone would read "0x10", " 1" or "inf".
bool is_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// -?digits(.digits)?([eE][+-]?digits)?
bool is_decimal(std::string_view text) {
  if (text.starts_with('-')) text.remove_prefix(1);
  const size_t exponent = text.find_first_of("eE");
  if (exponent != std::string_view::npos) {
    std::string_view power = text.substr(exponent + 1);
    if (power.starts_with('+') || power.starts_with('-')) power.remove_prefix(1);
    if (!is_digits(power)) return false;
    text = text.substr(0, exponent);
  }
  const size_t point = text.find('.');
  if (point != std::string_view::npos && !is_digits(text.substr(point + 1))) return false;
  return is_digits(text.substr(0, point));
}

double parse_number(const std::string& text, const std::string& key, const std::string& path) {
  if (!is_decimal(text)) malformed(text, key, path, "a decimal number");
  errno = 0;
  const double value = std::strtod(text.c_str(), nullptr);
  if (errno != 0 || !std::isfinite(value)) malformed(text, key, path, "a finite number");
  return value;
}

int64_t parse_count(const std::string& text, const std::string& key, const std::string& path) {
  // At most 18 digits: every such number fits int64_t. No leading zeros: one spelling per value.
  if (!is_digits(text) || text.size() > 18 || (text.size() > 1 && text[0] == '0'))
    malformed(text, key, path, "a non-negative integer");
  return std::stoll(text);
}

bool parse_bool(const std::string& text, const std::string& key, const std::string& path) {
  if (text != "true" && text != "false") malformed(text, key, path, "true or false");
  return text == "true";
}

detail::SafetensorsContents read_checkpoint(const std::string& path) {
  detail::SafetensorsContents contents = detail::decode_safetensors(detail::read_file(path, "load"), path, "load");
  auto it = contents.metadata.find(kVersionKey);
  if (it == contents.metadata.end()) {
    // Files written elsewhere (PyTorch's safetensors) carry no version: they are plain weights.
    // tapegrad's keys without a version are a damaged checkpoint, not such a file.
    for (const auto& [key, value] : contents.metadata)
      check(!key.starts_with(kTapegradPrefix), "load", "'", path, "' has the tapegrad metadata '", key, "' but no '",
            kVersionKey, "' (corrupted?)");
    return contents;
  }
  const int64_t version = parse_count(it->second, kVersionKey, path);
  check(version <= kCheckpointFormatVersion, "load", "'", path, "' was written in checkpoint format version ",
        version, ", newer than the version ", kCheckpointFormatVersion, " this tapegrad reads; update tapegrad");
  check(version >= 1, "load", "'", path, "' has checkpoint format version 0, which never existed (corrupted?)");
  // Version 1 checksummed the data, version 2 the whole file; decode_safetensors verified
  // whichever is present, and a checkpoint must carry the one of its version.
  const char* checksum = version == 1 ? detail::kDataChecksumKey : detail::kFileChecksumKey;
  check(contents.metadata.count(checksum) > 0, "load", "'", path, "' has no '", checksum,
        "', which every checkpoint of format version ", version, " records (corrupted?)");
  return contents;
}

// Parameter and buffer names are the file's keys: they must be unique, and "__metadata__" is
// the safetensors header's own. Checked before anything is written or changed.
void check_names(const detail::NamedTensors& tensors, const char* op) {
  std::set<std::string_view> seen;
  for (const auto& [name, tensor] : tensors) {
    check(name != "__metadata__", op, "a tensor may not be named '__metadata__': safetensors reserves it");
    check(seen.insert(name).second, op, "two tensors are named '", name,
          "'; rename a parameter or child module so that every dotted name is unique");
  }
}

// The model's parameters as stored in the file, converted to each parameter's dtype; validated
// completely (missing, unexpected and wrong-shape tensors) before anything is changed.
std::vector<Tensor> matching_values(nn::Module& model, const detail::SafetensorsContents& contents,
                                    const std::string& path) {
  const detail::NamedTensors named = model.named_parameters();
  check_names(named, "load");
  std::set<std::string> known;
  std::vector<Tensor> values;
  for (const auto& [name, parameter] : named) {
    auto it = contents.tensors.find(name);
    check(it != contents.tensors.end(), "load", "'", path, "' has no tensor for the parameter '", name, "'");
    check(it->second.shape() == parameter.shape(), "load", "'", path, "': parameter '", name, "' has shape ",
          it->second.shape(), " in the file but ", parameter.shape(), " in the model");
    values.push_back(it->second.to(parameter.dtype()));
    known.insert(name);
  }
  // As PyTorch's strict load_state_dict: a tensor the model has no place for is an error.
  for (const auto& [name, tensor] : contents.tensors)
    check(known.count(name) > 0 || name.rfind(kBufferPrefix, 0) == 0, "load", "'", path, "' has a tensor '", name,
          "' (shape ", tensor.shape(), ") that the model has no parameter for");
  return values;
}

void assign(nn::Module& model, const std::vector<Tensor>& values) {
  NoGradGuard no_grad;
  size_t i = 0;
  for (auto& [name, parameter] : model.named_parameters()) parameter.copy_(values[i++]);
}

// The name of each optimizer parameter in the model, matched by identity.
std::vector<std::string> optimizer_parameter_names(nn::Module& model, const optim::SGD& optimizer, const char* op) {
  const auto named = model.named_parameters();
  std::vector<std::string> names;
  for (size_t i = 0; i < optimizer.parameters().size(); ++i) {
    const Tensor& p = optimizer.parameters()[i];
    auto it = std::find_if(named.begin(), named.end(), [&](const auto& entry) { return entry.second.impl() == p.impl(); });
    check(it != named.end(), op, "the optimizer's parameter ", i, " (shape ", p.shape(),
          ") is not a parameter of the model (was the optimizer built before model.to()?)");
    names.push_back(it->first);
  }
  return names;
}

// Memory exhaustion leaves a public save or load as tg::Error, like every other failure.
[[noreturn]] void out_of_memory(const char* op, const std::string& path) {
  throw Error(detail::concat(op, ": out of memory while working on '", path, "'"));
}

}  // namespace

void save(nn::Module& model, const std::string& path) try {
  const detail::NamedTensors tensors = model.named_parameters();
  check_names(tensors, "save");
  detail::write_file_atomically(
      path, detail::encode_safetensors(tensors, {{kVersionKey, std::to_string(kCheckpointFormatVersion)}}, "save"),
      "save");
} catch (const std::bad_alloc&) {
  out_of_memory("save", path);
}

void load(nn::Module& model, const std::string& path) try {
  const detail::SafetensorsContents contents = read_checkpoint(path);
  assign(model, matching_values(model, contents, path));
} catch (const std::bad_alloc&) {
  out_of_memory("load", path);
}

void save(nn::Module& model, const optim::SGD& optimizer, const std::string& path) try {
  detail::NamedTensors tensors = model.named_parameters();
  const std::vector<std::string> names = optimizer_parameter_names(model, optimizer, "save");
  for (size_t i = 0; i < names.size(); ++i)
    if (optimizer.momentum_buffers()[i].defined()) tensors.emplace_back(kBufferPrefix + names[i], optimizer.momentum_buffers()[i]);
  const optim::SGDOptions& options = optimizer.options();
  detail::Metadata metadata = {
      {kVersionKey, std::to_string(kCheckpointFormatVersion)},
      {kOptimizerKey, "SGD"},
      {"tapegrad.sgd.lr", number(options.lr)},
      {"tapegrad.sgd.momentum", number(options.momentum)},
      {"tapegrad.sgd.dampening", number(options.dampening)},
      {"tapegrad.sgd.weight_decay", number(options.weight_decay)},
      {"tapegrad.sgd.nesterov", options.nesterov ? "true" : "false"},
      {"tapegrad.sgd.step_count", std::to_string(optimizer.step_count())},
  };
  check_names(tensors, "save");
  detail::write_file_atomically(path, detail::encode_safetensors(tensors, metadata, "save"), "save");
} catch (const std::bad_alloc&) {
  out_of_memory("save", path);
}

void load(nn::Module& model, optim::SGD& optimizer, const std::string& path) try {
  const detail::SafetensorsContents contents = read_checkpoint(path);
  const std::vector<Tensor> values = matching_values(model, contents, path);
  const std::string optimizer_name = required(contents.metadata, kOptimizerKey, path);
  check(optimizer_name == "SGD", "load", "'", path, "' holds the state of a ", optimizer_name, " optimizer, not SGD");
  const auto option = [&](const char* key) { return parse_number(required(contents.metadata, key, path), key, path); };
  optim::SGDOptions options{.lr = option("tapegrad.sgd.lr"),
                            .momentum = option("tapegrad.sgd.momentum"),
                            .dampening = option("tapegrad.sgd.dampening"),
                            .weight_decay = option("tapegrad.sgd.weight_decay"),
                            .nesterov = parse_bool(required(contents.metadata, "tapegrad.sgd.nesterov", path),
                                                   "tapegrad.sgd.nesterov", path)};
  const int64_t steps = parse_count(required(contents.metadata, "tapegrad.sgd.step_count", path),
                                    "tapegrad.sgd.step_count", path);

  const std::vector<std::string> names = optimizer_parameter_names(model, optimizer, "load");
  std::vector<Tensor> buffers;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = contents.tensors.find(kBufferPrefix + names[i]);
    if (it == contents.tensors.end()) {
      buffers.emplace_back();
      continue;
    }
    const Tensor& parameter = optimizer.parameters()[i];
    check(it->second.shape() == parameter.shape(), "load", "'", path, "': the momentum buffer of '", names[i],
          "' has shape ", it->second.shape(), ", the parameter ", parameter.shape());
    buffers.push_back(it->second.to(parameter.dtype()));
  }
  optimizer.set_options(options);  // validates before changing anything
  assign(model, values);
  optimizer.load_state(steps, std::move(buffers));
} catch (const std::bad_alloc&) {
  out_of_memory("load", path);
}

}  // namespace tg
