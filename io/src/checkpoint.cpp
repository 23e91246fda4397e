// tg::save / tg::load: checkpoints on the safetensors format (core/src/io/safetensors.cpp).
#include "tapegrad/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "io/file.hpp"
#include "optimizer_state.hpp"
#include "safetensors.hpp"
#include "tapegrad/autograd.hpp"

namespace tg {

namespace {

constexpr const char* kVersionKey = "tapegrad.format_version";

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
    check(known.count(name) > 0 || detail::is_optimizer_tensor(name), "load", "'", path, "' has a tensor '", name,
          "' (shape ", tensor.shape(), ") that the model has no parameter for");
  return values;
}

void assign(nn::Module& model, const std::vector<Tensor>& values) {
  NoGradGuard no_grad;
  size_t i = 0;
  for (auto& [name, parameter] : model.named_parameters()) parameter.copy_(values[i++]);
}

// A tg::Error of an optimizer's or scheduler's load_state_dict, naming the file as well.
template <typename Check>
void check_naming_file(const std::string& path, Check check_state) {
  try {
    check_state();
  } catch (const Error& error) {
    throw Error(detail::concat("load: '", path, "': ", error.what()));
  }
}

void save_checkpoint(nn::Module& model, const optim::Optimizer* optimizer, const optim::LRScheduler* scheduler,
                     const std::string& path) {
  detail::NamedTensors tensors = model.named_parameters();
  detail::Metadata metadata = {{kVersionKey, std::to_string(kCheckpointFormatVersion)}};
  if (optimizer) detail::encode_optimizer_state(model, *optimizer, tensors, metadata);
  if (scheduler) detail::encode_scheduler_state(*scheduler, metadata);
  detail::write_file_atomically(path, detail::encode_safetensors(tensors, metadata), "save");
}

// Checks the model's, the optimizer's and the scheduler's part of the file before changing any of them.
void load_checkpoint(nn::Module& model, optim::Optimizer* optimizer, optim::LRScheduler* scheduler,
                     const std::string& path) {
  const detail::SafetensorsContents contents = read_checkpoint(path);
  const std::vector<Tensor> values = matching_values(model, contents, path);
  optim::OptimizerStateDict optimizer_state;
  if (optimizer) {
    optimizer_state = detail::decode_optimizer_state(model, *optimizer, contents, path);
    check_naming_file(path, [&] { optimizer->check_state_dict(optimizer_state); });
  }
  optim::SchedulerStateDict scheduler_state;
  if (scheduler) {
    scheduler_state = detail::decode_scheduler_state(*scheduler, contents, path);
    check_naming_file(path, [&] { scheduler->check_state_dict(scheduler_state); });
  }
  assign(model, values);
  if (optimizer) optimizer->load_state_dict(optimizer_state);
  if (scheduler) scheduler->load_state_dict(scheduler_state);
}

}  // namespace

void save(nn::Module& model, const std::string& path) { save_checkpoint(model, nullptr, nullptr, path); }

void load(nn::Module& model, const std::string& path) { load_checkpoint(model, nullptr, nullptr, path); }

void save(nn::Module& model, const optim::Optimizer& optimizer, const std::string& path) {
  save_checkpoint(model, &optimizer, nullptr, path);
}

void load(nn::Module& model, optim::Optimizer& optimizer, const std::string& path) {
  load_checkpoint(model, &optimizer, nullptr, path);
}

void save(nn::Module& model, const optim::Optimizer& optimizer, const optim::LRScheduler& scheduler,
          const std::string& path) {
  save_checkpoint(model, &optimizer, &scheduler, path);
}

void load(nn::Module& model, optim::Optimizer& optimizer, optim::LRScheduler& scheduler, const std::string& path) {
  load_checkpoint(model, &optimizer, &scheduler, path);
}

}  // namespace tg
