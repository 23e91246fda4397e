#include "support/fixtures.hpp"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace tg::testing {

bool FixtureCase::has(const std::string& tensor_name) const {
  return tensors.count(tensor_name) > 0 || integers.count(tensor_name) > 0;
}

const Tensor& FixtureCase::at(const std::string& tensor_name) const {
  auto it = tensors.find(tensor_name);
  if (it == tensors.end()) throw std::runtime_error("fixture case " + name + " has no tensor " + tensor_name);
  return it->second;
}

const std::vector<int64_t>& FixtureCase::ints(const std::string& tensor_name) const {
  auto it = integers.find(tensor_name);
  if (it == integers.end()) throw std::runtime_error("fixture case " + name + " has no int64 tensor " + tensor_name);
  return it->second;
}

double FixtureCase::scalar(const std::string& tensor_name) const { return at(tensor_name).item(); }

namespace {

// Format: "case <name>" starts a case; then "<tensor> <dtype> <ndim> <dims...> <values...>" lines.
std::map<std::string, FixtureCase> parse(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture file " + path);
  std::map<std::string, FixtureCase> cases;
  FixtureCase* current = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string first;
    words >> first;
    if (first == "case") {
      std::string case_name;
      words >> case_name;
      current = &cases[case_name];
      current->name = case_name;
      continue;
    }
    if (!current) throw std::runtime_error(path + ": tensor line before any case: " + line);
    std::string dtype;
    int64_t ndim = 0;
    words >> dtype >> ndim;
    Shape shape(static_cast<size_t>(ndim));
    int64_t numel = 1;
    for (int64_t& size : shape) words >> size, numel *= size;
    if (dtype == "int64") {
      std::vector<int64_t> values(static_cast<size_t>(numel));
      for (int64_t& v : values) words >> v;
      if (!words) throw std::runtime_error(path + ": short int64 tensor " + first + " in " + current->name);
      current->integers[first] = values;
      continue;
    }
    std::vector<double> values(static_cast<size_t>(numel));
    for (double& v : values) {
      std::string token;
      words >> token;
      v = std::strtod(token.c_str(), nullptr);  // reads nan/inf/-0 too
    }
    if (!words) throw std::runtime_error(path + ": short tensor " + first + " in " + current->name);
    const DType type = dtype == "float32" ? kFloat32 : kFloat64;
    // float32 values are written with 9 significant digits: they round-trip exactly through float.
    current->tensors[first] = shape.empty() ? scalar_tensor(values[0], type) : tensor(values, shape, type);
  }
  return cases;
}

}  // namespace

const std::map<std::string, FixtureCase>& load_fixtures(const std::string& file) {
  static std::map<std::string, std::map<std::string, FixtureCase>> cache;
  auto it = cache.find(file);
  if (it == cache.end()) it = cache.emplace(file, parse(std::string(TG_FIXTURE_DIR) + "/" + file)).first;
  return it->second;
}

const FixtureCase& fixture(const std::string& file, const std::string& case_name) {
  const auto& cases = load_fixtures(file);
  auto it = cases.find(case_name);
  if (it == cases.end()) throw std::runtime_error(file + " has no case " + case_name);
  return it->second;
}

double max_abs_diff(const Tensor& actual, const Tensor& expected) {
  if (!actual.defined() || !expected.defined() || actual.shape() != expected.shape())
    return std::numeric_limits<double>::infinity();
  const std::vector<double> a = actual.to(kFloat64).to_vector<double>();
  const std::vector<double> e = expected.to(kFloat64).to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(a[i] - e[i]);
    worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
  }
  return worst;
}

bool allclose(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  if (!actual.defined() || !expected.defined() || actual.shape() != expected.shape() ||
      actual.dtype() != expected.dtype())
    return false;
  const std::vector<double> a = actual.to(kFloat64).to_vector<double>();
  const std::vector<double> e = expected.to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]))) return false;
  return true;
}

}  // namespace tg::testing
