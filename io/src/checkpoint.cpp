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
#include "generator_state.hpp"
#include "optimizer_state.hpp"
#include "safetensors.hpp"
#include "tapegrad/autograd.hpp"

namespace tg {

namespace {

constexpr const char* kVersionKey = "tapegrad.format_version";
constexpr const char* kTapegradPrefix = "tapegrad.";

// A count as tapegrad writes it: decimal digits, no sign, no leading zero, no spaces.
int64_t parse_version(const std::string& text, const std::string& path) {
  const bool canonical = !text.empty() && text.size() <= 9 && (text == "0" || text[0] != '0') &&
                         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  check(canonical, "load", "'", path, "' has a malformed '", kVersionKey, "': \"", text, "\"");
  return std::stoll(text);
}

detail::SafetensorsContents read_checkpoint(const std::string& path) {
  detail::SafetensorsContents contents = detail::decode_safetensors(detail::read_file(path, "load"), path, "load");
  auto it = contents.metadata.find(kVersionKey);
  if (it == contents.metadata.end()) {
    // Files written elsewhere (PyTorch's safetensors) carry no version: they are plain weights.
    // tapegrad's keys without a version are a damaged checkpoint, not such a file.
    for (const auto& [key, value] : contents.metadata)
      check(key.rfind(kTapegradPrefix, 0) != 0, "load", "'", path, "' has the tapegrad metadata '", key,
            "' but no '", kVersionKey, "' (corrupted?)");
    return contents;
  }
  const int64_t version = parse_version(it->second, path);
  check(version <= kCheckpointFormatVersion, "load", "'", path, "' was written in checkpoint format version ",
        version, ", newer than the version ", kCheckpointFormatVersion, " this tapegrad reads; update tapegrad");
  check(version >= 1, "load", "'", path, "' has checkpoint format version 0, which never existed (corrupted?)");
  // Versions 1 and 2 checksummed the data, version 3 the whole file; decode_safetensors verified
  // whichever is present, and a checkpoint must carry the one of its version.
  const char* checksum = version <= 2 ? detail::kDataChecksumKey : detail::kFileChecksumKey;
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

// Memory exhaustion leaves a public save or load as tg::Error, like every other failure.
[[noreturn]] void out_of_memory(const char* op, const std::string& path) {
  throw Error(detail::concat(op, ": out of memory while working on '", path, "'"));
}

// Tied parameters (nn::Parameter::tie): a tensor held by several slots is stored once, under its
// first name in named_parameters() order, and each other name is written into the header's
// __metadata__ as "<alias>": "<stored name>" — the convention of safetensors.torch.save_model, so
// that Python's safetensors.torch.load_model restores the tie too. Returns those pairs.
detail::Metadata tied_aliases(nn::Module& model) {
  const detail::NamedTensors stored = model.named_parameters();
  detail::Metadata aliases;
  for (const auto& [name, tensor] : model.named_parameters(/*remove_duplicate=*/false))
    for (const auto& [stored_name, stored_tensor] : stored)
      if (stored_tensor.is_same(tensor)) {
        if (stored_name != name) aliases[name] = stored_name;
        break;
      }
  return aliases;
}

// The model's parameters as stored in the file, converted to each parameter's dtype; validated
// completely (missing, unexpected and wrong-shape tensors) before anything is changed. A tensor
// the model ties under several names loads from whichever name the file holds, directly or through
// an alias in __metadata__ (see tied_aliases); so does an untied slot whose name is such an alias.
std::vector<Tensor> matching_values(nn::Module& model, const detail::SafetensorsContents& contents,
                                    const std::string& path) {
  const detail::NamedTensors named = model.named_parameters();
  const detail::NamedTensors slots = model.named_parameters(/*remove_duplicate=*/false);
  const detail::NamedTensors buffers = model.named_buffers();
  detail::NamedTensors every_name = slots;
  every_name.insert(every_name.end(), buffers.begin(), buffers.end());
  check_names(every_name, "load");
  std::set<std::string> known;
  std::vector<Tensor> values;
  for (const auto& [name, parameter] : named) {
    // Every name of this tensor, the first one first.
    std::vector<std::string> names;
    for (const auto& [slot_name, slot] : slots)
      if (slot.is_same(parameter)) names.push_back(slot_name);
    std::string found;  // the file's tensor that holds the values
    for (const std::string& candidate : names)
      if (contents.tensors.count(candidate) > 0) {
        check(found.empty() || contents.tensors.at(found).shape() != contents.tensors.at(candidate).shape() ||
                  contents.tensors.at(found).to(kFloat64).to_vector<double>() ==
                      contents.tensors.at(candidate).to(kFloat64).to_vector<double>(),
              "load", "'", path, "' holds different values for '", found, "' and '", candidate,
              "', which the model ties into one tensor");
        if (found.empty()) found = candidate;
        known.insert(candidate);
      }
    for (size_t i = 0; i < names.size() && found.empty(); ++i) {
      auto alias = contents.metadata.find(names[i]);
      if (alias != contents.metadata.end() && contents.tensors.count(alias->second) > 0) {
        found = alias->second;
        known.insert(found);
      }
    }
    check(!found.empty(), "load", "'", path, "' has no tensor for the parameter '", name, "'");
    const Tensor& value = contents.tensors.at(found);
    check(value.shape() == parameter.shape(), "load", "'", path, "': parameter '", name, "' has shape ",
          value.shape(), " in the file", found == name ? std::string() : detail::concat(" (as '", found, "')"), " but ", parameter.shape(),
          " in the model");
    values.push_back(value.to(parameter.dtype()));
  }
  // Buffers (running statistics) by name: a float buffer takes either float dtype, converted; an
  // integer one (a counter) takes its own dtype.
  for (const auto& [name, buffer] : buffers) {
    auto it = contents.tensors.find(name);
    check(it != contents.tensors.end(), "load", "'", path, "' has no tensor for the buffer '", name, "'");
    const Tensor& value = it->second;
    check(is_floating_point(buffer.dtype()) ? is_floating_point(value.dtype()) : value.dtype() == buffer.dtype(),
          "load", "'", path, "': buffer '", name, "' is ", value.dtype(), " in the file but ", buffer.dtype(),
          " in the model");
    check(value.shape() == buffer.shape(), "load", "'", path, "': buffer '", name, "' has shape ", value.shape(),
          " in the file but ", buffer.shape(), " in the model");
    known.insert(name);
    values.push_back(value.to(buffer.dtype()));
  }
  // As PyTorch's strict load_state_dict: a tensor the model has no place for is an error.
  for (const auto& [name, tensor] : contents.tensors)
    check(known.count(name) > 0 || detail::is_optimizer_tensor(name) || detail::is_generator_tensor(name), "load", "'", path, "' has a tensor '", name,
          "' (shape ", tensor.shape(), ") that the model has no parameter for (and no buffer)");
  return values;
}

void assign(nn::Module& model, const std::vector<Tensor>& values) {
  NoGradGuard no_grad;
  size_t i = 0;
  for (auto& [name, parameter] : model.named_parameters()) parameter.copy_(values[i++]);
  for (auto& [name, buffer] : model.named_buffers()) buffer.copy_(values[i++]);
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
                     const std::string& path, const CheckpointOptions& options) try {
  detail::NamedTensors tensors = model.named_parameters();
  for (auto& named_buffer : model.named_buffers()) tensors.push_back(std::move(named_buffer));
  detail::Metadata metadata = tied_aliases(model);
  metadata[kVersionKey] = std::to_string(kCheckpointFormatVersion);
  if (optimizer) detail::encode_optimizer_state(model, *optimizer, tensors, metadata);
  if (scheduler) detail::encode_scheduler_state(*scheduler, metadata);
  detail::encode_generator_states(options.generators, tensors);
  check_names(tensors, "save");
  detail::write_file_atomically(path, detail::encode_safetensors(tensors, metadata, "save"), "save");
} catch (const std::bad_alloc&) {
  out_of_memory("save", path);
}

// Checks the model's, the optimizer's and the scheduler's part of the file before changing any of them.
void load_checkpoint(nn::Module& model, optim::Optimizer* optimizer, optim::LRScheduler* scheduler,
                     const std::string& path, const CheckpointOptions& options) try {
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
  const std::vector<GeneratorState> generator_states =
      options.generators.empty() ? std::vector<GeneratorState>()
                                 : detail::decode_generator_states(options.generators, contents, path);
  assign(model, values);
  if (optimizer) optimizer->load_state_dict(optimizer_state);
  if (scheduler) scheduler->load_state_dict(scheduler_state);
  for (size_t k = 0; k < generator_states.size(); ++k) options.generators[k]->set_state(generator_states[k]);
} catch (const std::bad_alloc&) {
  out_of_memory("load", path);
}

}  // namespace

void save(nn::Module& model, const std::string& path, const CheckpointOptions& options) {
  save_checkpoint(model, nullptr, nullptr, path, options);
}

void load(nn::Module& model, const std::string& path, const CheckpointOptions& options) {
  load_checkpoint(model, nullptr, nullptr, path, options);
}

void save(nn::Module& model, const optim::Optimizer& optimizer, const std::string& path,
          const CheckpointOptions& options) {
  save_checkpoint(model, &optimizer, nullptr, path, options);
}

void load(nn::Module& model, optim::Optimizer& optimizer, const std::string& path, const CheckpointOptions& options) {
  load_checkpoint(model, &optimizer, nullptr, path, options);
}

void save(nn::Module& model, const optim::Optimizer& optimizer, const optim::LRScheduler& scheduler,
          const std::string& path, const CheckpointOptions& options) {
  save_checkpoint(model, &optimizer, &scheduler, path, options);
}

void load(nn::Module& model, optim::Optimizer& optimizer, optim::LRScheduler& scheduler, const std::string& path,
          const CheckpointOptions& options) {
  load_checkpoint(model, &optimizer, &scheduler, path, options);
}

}  // namespace tg
