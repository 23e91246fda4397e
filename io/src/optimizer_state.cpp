#include "optimizer_state.hpp"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <utility>

namespace tg::detail {

namespace {

using nlohmann::json;

constexpr const char* kTensorPrefix = "optimizer.";
constexpr const char* kOptimizerKey = "tapegrad.optimizer";
constexpr const char* kStepCountKey = "tapegrad.optimizer.step_count";
constexpr const char* kParamGroupsKey = "tapegrad.optimizer.param_groups";
constexpr const char* kSchedulerKey = "tapegrad.scheduler";
constexpr const char* kLastEpochKey = "tapegrad.scheduler.last_epoch";
constexpr const char* kBaseLrsKey = "tapegrad.scheduler.base_lrs";
constexpr const char* kCountersKey = "tapegrad.scheduler.counters";
// The layout before parameter groups (format version 1): one SGD group.
constexpr const char* kSingleSGDStepCountKey = "tapegrad.sgd.step_count";
constexpr const char* kSingleSGDOptionPrefix = "tapegrad.sgd.";

const std::string& required(const Metadata& metadata, const std::string& key, const std::string& path) {
  auto it = metadata.find(key);
  check(it != metadata.end(), "load", "'", path, "' has no '", key, "' in its metadata");
  return it->second;
}

// A count as tapegrad writes it: decimal digits, no sign, no leading zero, no spaces.
int64_t parse_count(const std::string& text, const std::string& key, const std::string& path) {
  const bool canonical = !text.empty() && text.size() <= 18 && (text == "0" || text[0] != '0') &&
                         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  check(canonical, "load", "'", path, "' has a malformed '", key, "': \"", text, "\"");
  return std::strtoll(text.c_str(), nullptr, 10);
}

json parse_json(const std::string& text, const std::string& key, const std::string& path) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    throw Error(concat("load: '", path, "' has a malformed '", key, "': \"", text, "\""));
  }
}

// A hyper-parameter of the file: a JSON number, true/false or a list of numbers (Adam's betas).
optim::OptionValue option_value(const json& value, const std::string& key, const std::string& path) {
  const bool numbers =
      value.is_array() && std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_number(); });
  check(value.is_number() || value.is_boolean() || numbers, "load", "'", path, "': the optimizer option '", key,
        "' is neither a number, nor true/false, nor a list of numbers: ", value.dump());
  if (value.is_boolean()) return value.get<bool>();
  if (numbers) return value.get<std::vector<double>>();
  return value.get<double>();
}

// The name of each optimizer parameter in the model, matched by identity.
std::vector<std::string> parameter_names(nn::Module& model, const optim::Optimizer& optimizer, const char* op) {
  const auto named = model.named_parameters();
  std::vector<std::string> names;
  for (size_t i = 0; i < optimizer.parameters().size(); ++i) {
    const Tensor& p = optimizer.parameters()[i];
    auto it = std::find_if(named.begin(), named.end(), [&](const auto& entry) { return entry.second.is_same(p); });
    check(it != named.end(), op, "the optimizer's parameter ", i, " (shape ", p.shape(),
          ") is not a parameter of the model (was the optimizer built before model.to()?)");
    names.push_back(it->first);
  }
  return names;
}

// The one group of the layout before parameter groups: SGD's options, every parameter of the optimizer.
std::vector<optim::ParamGroupState> single_sgd_param_groups(const optim::Optimizer& optimizer,
                                                          const SafetensorsContents& contents,
                                                          const std::string& path) {
  const auto option = [&](const char* name) {
    const std::string key = std::string(kSingleSGDOptionPrefix) + name;
    return option_value(parse_json(required(contents.metadata, key, path), key, path), key, path);
  };
  optim::ParamGroupState group{.options = {{"lr", option("lr")},
                                           {"momentum", option("momentum")},
                                           {"dampening", option("dampening")},
                                           {"weight_decay", option("weight_decay")},
                                           {"nesterov", option("nesterov")}},
                               .params = {}};
  for (size_t i = 0; i < optimizer.parameters().size(); ++i) group.params.push_back(static_cast<int64_t>(i));
  return {std::move(group)};
}

// The file's groups, which must list the optimizer's parameters by name, group by group and in the
// same order: a parameter moved to another group would otherwise receive another one's state.
std::vector<optim::ParamGroupState> param_groups(const optim::Optimizer& optimizer,
                                                 const std::vector<std::string>& names,
                                                 const SafetensorsContents& contents, const std::string& path) {
  const json groups = parse_json(required(contents.metadata, kParamGroupsKey, path), kParamGroupsKey, path);
  check(groups.is_array() && groups.size() == optimizer.param_group_count(), "load", "'", path, "' holds ",
        groups.is_array() ? groups.size() : 0, " parameter groups, the optimizer ", optimizer.param_group_count());
  std::vector<optim::ParamGroupState> result;
  size_t first = 0;  // index of the group's first parameter in optimizer.parameters()
  for (size_t g = 0; g < groups.size(); ++g) {
    const json& group = groups[g];
    check(group.is_object() && group.contains("params") && group["params"].is_array(), "load", "'", path,
          "': parameter group ", g, " is not an object with a \"params\" list");
    const size_t count = optimizer.group_parameters(g).size();
    std::vector<std::string> expected(names.begin() + static_cast<std::ptrdiff_t>(first),
                                      names.begin() + static_cast<std::ptrdiff_t>(first + count));
    const json& listed = group["params"];
    const bool same = listed.size() == count && std::equal(expected.begin(), expected.end(), listed.begin(),
                                                           [](const std::string& name, const json& entry) {
                                                             return entry.is_string() && entry.get<std::string>() == name;
                                                           });
    check(same, "load", "'", path, "': parameter group ", g, " holds ", listed.dump(), " in the file but ",
          json(expected).dump(), " in the optimizer");
    optim::ParamGroupState state;
    for (const auto& [key, value] : group.items())
      if (key != "params") state.options.emplace(key, option_value(value, key, path));
    for (size_t k = 0; k < count; ++k) state.params.push_back(static_cast<int64_t>(first + k));
    result.push_back(std::move(state));
    first += count;
  }
  return result;
}

}  // namespace

bool is_optimizer_tensor(const std::string& name) { return name.rfind(kTensorPrefix, 0) == 0; }

void encode_optimizer_state(nn::Module& model, const optim::Optimizer& optimizer, NamedTensors& tensors,
                            Metadata& metadata) {
  const std::vector<std::string> names = parameter_names(model, optimizer, "save");
  const optim::OptimizerStateDict state = optimizer.state_dict();
  for (const auto& [index, entries] : state.state)
    for (const auto& [state_name, tensor] : entries)
      tensors.emplace_back(kTensorPrefix + state_name + "." + names[static_cast<size_t>(index)], tensor);
  json groups = json::array();
  for (const optim::ParamGroupState& group : state.param_groups) {
    json entry = json::object();
    // A named reference, not the structured binding: clang 14 (the fuzz build) cannot capture one.
    for (const auto& option : group.options) {
      const std::string& key = option.first;
      std::visit([&](auto v) { entry[key] = v; }, option.second);
    }
    json params = json::array();
    for (int64_t index : group.params) params.push_back(names[static_cast<size_t>(index)]);
    entry["params"] = std::move(params);
    groups.push_back(std::move(entry));
  }
  metadata[kOptimizerKey] = optimizer.name();
  metadata[kStepCountKey] = std::to_string(state.step_count);
  try {
    metadata[kParamGroupsKey] = groups.dump();
  } catch (const json::exception&) {  // the only failure of dump(): a string that is not UTF-8
    throw Error("save: a parameter name of the optimizer is not valid UTF-8");
  }
}

optim::OptimizerStateDict decode_optimizer_state(nn::Module& model, const optim::Optimizer& optimizer,
                                                 const SafetensorsContents& contents, const std::string& path) {
  const std::string& optimizer_name = required(contents.metadata, kOptimizerKey, path);
  check(optimizer_name == optimizer.name(), "load", "'", path, "' holds the state of a ", optimizer_name,
        " optimizer, not ", optimizer.name());
  // Told apart by their keys rather than by the format version, which also counts changes to the
  // rest of the file.
  const bool grouped = contents.metadata.count(kParamGroupsKey) > 0;
  const std::vector<std::string> names = parameter_names(model, optimizer, "load");

  optim::OptimizerStateDict state;
  state.param_groups =
      grouped ? param_groups(optimizer, names, contents, path) : single_sgd_param_groups(optimizer, contents, path);
  const char* step_count_key = grouped ? kStepCountKey : kSingleSGDStepCountKey;
  state.step_count = parse_count(required(contents.metadata, step_count_key, path), step_count_key, path);
  for (const auto& [name, tensor] : contents.tensors) {
    if (!is_optimizer_tensor(name)) continue;
    // "optimizer.<state name>.<parameter name>": state names have no dot, parameter names may.
    const std::string rest = name.substr(std::string(kTensorPrefix).size());
    const size_t dot = rest.find('.');
    auto it = dot == std::string::npos ? names.end() : std::find(names.begin(), names.end(), rest.substr(dot + 1));
    check(it != names.end(), "load", "'", path, "' has optimizer state '", name,
          "' for no parameter of the optimizer");
    state.state[it - names.begin()].emplace(rest.substr(0, dot), tensor);
  }
  return state;
}

void encode_scheduler_state(const optim::LRScheduler& scheduler, Metadata& metadata) {
  const optim::SchedulerStateDict state = scheduler.state_dict();
  metadata[kSchedulerKey] = scheduler.name();
  metadata[kLastEpochKey] = std::to_string(state.last_epoch);
  metadata[kBaseLrsKey] = json(state.base_lrs).dump();
  // Counters as decimal strings: ReduceLROnPlateau's best starts at ±inf, which JSON numbers cannot hold.
  if (!state.counters.empty()) {
    json counters = json::object();
    for (const auto& counter : state.counters) counters[counter.first] = concat(std::setprecision(17), counter.second);
    metadata[kCountersKey] = counters.dump();
  }
}

optim::SchedulerStateDict decode_scheduler_state(const optim::LRScheduler& scheduler,
                                                 const SafetensorsContents& contents, const std::string& path) {
  const std::string& scheduler_name = required(contents.metadata, kSchedulerKey, path);
  check(scheduler_name == scheduler.name(), "load", "'", path, "' holds the state of a ", scheduler_name,
        " scheduler, not ", scheduler.name());
  optim::SchedulerStateDict state;
  state.last_epoch = parse_count(required(contents.metadata, kLastEpochKey, path), kLastEpochKey, path);
  const json base_lrs = parse_json(required(contents.metadata, kBaseLrsKey, path), kBaseLrsKey, path);
  check(base_lrs.is_array() && std::all_of(base_lrs.begin(), base_lrs.end(), [](const json& v) { return v.is_number(); }),
        "load", "'", path, "' has a malformed '", kBaseLrsKey, "': ", base_lrs.dump());
  for (const json& base_lr : base_lrs) state.base_lrs.push_back(base_lr.get<double>());
  // Only ReduceLROnPlateau writes counters; files of the epoch schedules have none.
  auto it = contents.metadata.find(kCountersKey);
  if (it != contents.metadata.end()) {
    const json counters = parse_json(it->second, kCountersKey, path);
    check(counters.is_object(), "load", "'", path, "' has a malformed '", kCountersKey, "': ", counters.dump());
    for (const auto& [key, value] : counters.items()) {
      const std::string text = value.is_string() ? value.get<std::string>() : std::string();
      char* end = nullptr;
      const double number = std::strtod(text.c_str(), &end);
      check(!text.empty() && end == text.c_str() + text.size(), "load", "'", path, "': the scheduler counter '", key,
            "' is not a number: ", value.dump());
      state.counters.emplace(key, number);
    }
  }
  return state;
}

}  // namespace tg::detail
