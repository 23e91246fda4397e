#include "optimizer_state.hpp"

#include <algorithm>
#include <cstdlib>
#include <iomanip>
#include <utility>

#include "json_header.hpp"
#include "json_value.hpp"

namespace tg::detail {

namespace {

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

JsonValue parse_json(const std::string& text, const std::string& key, const std::string& path) {
  return parse_json_value(text, "load", path, key);
}

// A hyper-parameter of the file: a JSON number, true/false, a list of numbers (Adam's betas) or a
// string (LBFGS's line_search_fn).
optim::OptionValue option_value(const JsonValue& value, const std::string& key, const std::string& path) {
  check(value.is_number() || value.kind == JsonValue::Kind::Boolean || value.is_array_of_numbers() ||
            value.kind == JsonValue::Kind::String,
        "load", "'", path, "': the optimizer option '", key,
        "' is neither a number, nor true/false, nor a list of numbers, nor a string: ", value.dump());
  if (value.kind == JsonValue::Kind::Boolean) return value.boolean;
  if (value.kind == JsonValue::Kind::String) return value.string;
  if (value.is_number()) return value.number;
  std::vector<double> numbers;
  for (const JsonValue& item : value.items) numbers.push_back(item.number);
  return numbers;
}

// An option value as JSON text.
std::string option_json(const optim::OptionValue& option) {
  if (const bool* flag = std::get_if<bool>(&option)) return *flag ? "true" : "false";
  if (const double* number = std::get_if<double>(&option)) return json_number(*number);
  if (const std::string* name = std::get_if<std::string>(&option)) return json_string(*name, "the option value", "save");
  return json_array(std::get<std::vector<double>>(option), json_number);
}

// Names as a JSON list of strings, e.g. ["0.weight","0.bias"].
std::string json_names(const std::vector<std::string>& names, const char* op) {
  return json_array(names, [op](const std::string& name) { return json_string(name, "the parameter name", op); });
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
  const JsonValue groups = parse_json(required(contents.metadata, kParamGroupsKey, path), kParamGroupsKey, path);
  check(groups.kind == JsonValue::Kind::Array && groups.items.size() == optimizer.param_group_count(), "load", "'",
        path, "' holds ", groups.items.size(), " parameter groups, the optimizer ", optimizer.param_group_count());
  std::vector<optim::ParamGroupState> result;
  size_t first = 0;  // index of the group's first parameter in optimizer.parameters()
  for (size_t g = 0; g < groups.items.size(); ++g) {
    const JsonValue& group = groups.items[g];
    const JsonValue* listed = group.find("params");
    check(group.kind == JsonValue::Kind::Object && listed != nullptr && listed->kind == JsonValue::Kind::Array, "load",
          "'", path, "': parameter group ", g, " is not an object with a \"params\" list");
    const size_t count = optimizer.group_parameters(g).size();
    std::vector<std::string> expected(names.begin() + static_cast<std::ptrdiff_t>(first),
                                      names.begin() + static_cast<std::ptrdiff_t>(first + count));
    const bool same = listed->items.size() == count &&
                      std::equal(expected.begin(), expected.end(), listed->items.begin(),
                                 [](const std::string& name, const JsonValue& entry) {
                                   return entry.kind == JsonValue::Kind::String && entry.string == name;
                                 });
    check(same, "load", "'", path, "': parameter group ", g, " holds ", listed->dump(), " in the file but ",
          json_names(expected, "load"), " in the optimizer");
    optim::ParamGroupState state;
    for (const JsonField& field : group.fields)
      if (field.key != "params") state.options.emplace(field.key, option_value(field.value, field.key, path));
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
  // [{"lr":0.1,...,"params":["0.weight","0.bias"]},...]
  const auto group_json = [&names](const optim::ParamGroupState& group) {
    std::string text = "{";
    for (const auto& [key, value] : group.options) {
      text += json_string(key, "the option name", "save");
      text += ':';
      text += option_json(value);
      text += ',';
    }
    std::vector<std::string> group_names;
    for (int64_t index : group.params) group_names.push_back(names[static_cast<size_t>(index)]);
    text += "\"params\":";
    text += json_names(group_names, "save");
    return text += '}';
  };
  metadata[kOptimizerKey] = optimizer.name();
  metadata[kStepCountKey] = std::to_string(state.step_count);
  metadata[kParamGroupsKey] = json_array(state.param_groups, group_json);
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
  metadata[kBaseLrsKey] = json_array(state.base_lrs, json_number);
  // Counters as decimal strings: ReduceLROnPlateau's best starts at ±inf, which JSON numbers cannot hold.
  if (!state.counters.empty()) {
    std::string counters = "{";
    for (const auto& [name, value] : state.counters) {
      if (counters.size() > 1) counters += ',';
      counters += json_string(name, "the scheduler counter name", "save");
      counters += concat(":\"", std::setprecision(17), value, "\"");
    }
    metadata[kCountersKey] = counters += '}';
  }
}

optim::SchedulerStateDict decode_scheduler_state(const optim::LRScheduler& scheduler,
                                                 const SafetensorsContents& contents, const std::string& path) {
  const std::string& scheduler_name = required(contents.metadata, kSchedulerKey, path);
  check(scheduler_name == scheduler.name(), "load", "'", path, "' holds the state of a ", scheduler_name,
        " scheduler, not ", scheduler.name());
  optim::SchedulerStateDict state;
  state.last_epoch = parse_count(required(contents.metadata, kLastEpochKey, path), kLastEpochKey, path);
  const JsonValue base_lrs = parse_json(required(contents.metadata, kBaseLrsKey, path), kBaseLrsKey, path);
  check(base_lrs.is_array_of_numbers(), "load", "'", path, "' has a malformed '", kBaseLrsKey, "': ", base_lrs.dump());
  for (const JsonValue& base_lr : base_lrs.items) state.base_lrs.push_back(base_lr.number);
  // Only ReduceLROnPlateau writes counters; files of the epoch schedules have none.
  auto it = contents.metadata.find(kCountersKey);
  if (it != contents.metadata.end()) {
    const JsonValue counters = parse_json(it->second, kCountersKey, path);
    check(counters.kind == JsonValue::Kind::Object, "load", "'", path, "' has a malformed '", kCountersKey, "': ",
          counters.dump());
    for (const auto& [key, value] : counters.fields) {
      const std::string text = value.kind == JsonValue::Kind::String ? value.string : std::string();
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
