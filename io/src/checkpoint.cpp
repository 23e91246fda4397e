// tg::save / tg::load: checkpoints on the safetensors format (core/src/io/safetensors.cpp).
#include "tapegrad/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "io/file.hpp"
#include "safetensors.hpp"
#include "tapegrad/autograd.hpp"

namespace tg {

namespace {

constexpr const char* kVersionKey = "tapegrad.format_version";
constexpr const char* kOptimizerKey = "tapegrad.optimizer";
constexpr const char* kBufferPrefix = "optimizer.momentum_buffer.";

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

double parse_number(const std::string& text, const std::string& key, const std::string& path) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  check(!text.empty() && end == text.c_str() + text.size() && errno == 0, "load", "'", path, "' has a malformed '",
        key, "': \"", text, "\"");
  return value;
}

detail::SafetensorsContents read_checkpoint(const std::string& path) {
  detail::SafetensorsContents contents = detail::decode_safetensors(detail::read_file(path, "load"), path, "load");
  // Files written elsewhere (PyTorch's safetensors) carry no version: they are plain weights.
  if (auto it = contents.metadata.find(kVersionKey); it != contents.metadata.end()) {
    const double version = parse_number(it->second, kVersionKey, path);
    check(version <= kCheckpointFormatVersion, "load", "'", path, "' was written in checkpoint format version ",
          it->second, ", newer than the version ", kCheckpointFormatVersion, " this tapegrad reads; update tapegrad");
  }
  return contents;
}

// The model's parameters as stored in the file, converted to each parameter's dtype; validated
// completely (missing, unexpected and wrong-shape tensors) before anything is changed.
std::vector<Tensor> matching_values(nn::Module& model, const detail::SafetensorsContents& contents,
                                    const std::string& path) {
  std::set<std::string> known;
  std::vector<Tensor> values;
  for (const auto& [name, parameter] : model.named_parameters()) {
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

}  // namespace

void save(nn::Module& model, const std::string& path) {
  detail::write_file_atomically(
      path, detail::encode_safetensors(model.named_parameters(), {{kVersionKey, std::to_string(kCheckpointFormatVersion)}}),
      "save");
}

void load(nn::Module& model, const std::string& path) {
  const detail::SafetensorsContents contents = read_checkpoint(path);
  assign(model, matching_values(model, contents, path));
}

void save(nn::Module& model, const optim::SGD& optimizer, const std::string& path) {
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
  detail::write_file_atomically(path, detail::encode_safetensors(tensors, metadata), "save");
}

void load(nn::Module& model, optim::SGD& optimizer, const std::string& path) {
  const detail::SafetensorsContents contents = read_checkpoint(path);
  const std::vector<Tensor> values = matching_values(model, contents, path);
  const std::string optimizer_name = required(contents.metadata, kOptimizerKey, path);
  check(optimizer_name == "SGD", "load", "'", path, "' holds the state of a ", optimizer_name, " optimizer, not SGD");
  const auto option = [&](const char* key) { return parse_number(required(contents.metadata, key, path), key, path); };
  optim::SGDOptions options{.lr = option("tapegrad.sgd.lr"),
                            .momentum = option("tapegrad.sgd.momentum"),
                            .dampening = option("tapegrad.sgd.dampening"),
                            .weight_decay = option("tapegrad.sgd.weight_decay"),
                            .nesterov = required(contents.metadata, "tapegrad.sgd.nesterov", path) == "true"};
  const double steps = option("tapegrad.sgd.step_count");
  check(steps >= 0 && steps < 9e18 && steps == std::floor(steps), "load", "'", path, "' has an invalid step count ",
        steps);

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
  optimizer.load_state(static_cast<int64_t>(steps), std::move(buffers));
}

}  // namespace tg
