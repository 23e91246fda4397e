// Validating optimizer options and reading them back from a state dict's OptionValues: the
// helpers every optimizer's check_options / parse_options is made of. Private to optim.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tapegrad/optim/optimizer.hpp"

namespace tg::optim::options {

// A hyper-parameter must be finite, and >= 0 where PyTorch requires it (x >= 0 is false for NaN).
inline void check_finite(const char* op, const char* key, double value) {
  check(std::isfinite(value), op, "expected a finite ", key, ", got ", value);
}
inline void check_non_negative(const char* op, const char* key, double value) {
  check(value >= 0, op, "expected ", key, " >= 0, got ", value);
  check_finite(op, key, value);
}
// Adam's betas and OneCycleLR's momenta: 0 <= value < 1, as PyTorch requires of betas (NaN fails).
inline void check_unit_interval(const char* op, const char* key, double value) {
  check(value >= 0 && value < 1, op, "expected 0 <= ", key, " < 1, got ", value);
}

// Throws unless every key of `values` is one of `known`.
inline void check_keys(const char* op, const OptionValues& values, std::initializer_list<const char*> known) {
  for (const auto& entry : values)
    check(std::find_if(known.begin(), known.end(), [&](const char* k) { return entry.first == k; }) != known.end(), op,
          "load_state_dict: unknown option '", entry.first, "'");
}

// One option of a state dict's param group, which must be there and of type T (double, bool or
// std::vector<double>); `fallback` is the value for state dicts written before the option existed.
template <typename T>
T option_of(const char* op, const OptionValues& values, const char* key, std::optional<T> fallback = std::nullopt) {
  auto it = values.find(key);
  if (it == values.end() && fallback) return *fallback;
  check(it != values.end(), op, "load_state_dict: a parameter group has no '", key, "'");
  const T* value = std::get_if<T>(&it->second);
  const char* kind = std::is_same_v<T, bool>          ? "a flag (true or false)"
                     : std::is_same_v<T, double>      ? "a number"
                     : std::is_same_v<T, std::string> ? "a string"
                                                      : "a list of numbers";
  check(value != nullptr, op, "load_state_dict: expected '", key, "' to be ", kind);
  return *value;
}

// Adam's betas from a state dict: a list of exactly two numbers.
inline std::array<double, 2> betas_of(const char* op, const OptionValues& values) {
  const std::vector<double> betas = option_of<std::vector<double>>(op, values, "betas");
  check(betas.size() == 2, op, "load_state_dict: expected 'betas' to hold 2 numbers, got ", betas.size());
  return {betas[0], betas[1]};
}

}  // namespace tg::optim::options
