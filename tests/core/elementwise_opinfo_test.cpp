// Every elementwise op of core (ops/elementwise.cpp, ops/unary_math.cpp) as one row of a table,
// OpInfo style (PyTorch's common_methods_invocations.py): its name, the function, its PyTorch
// fixture cases and its gradcheck domain. Each row gets the same checks:
//   - forward and backward against PyTorch's fixtures, float32 and float64
//     (tests/fixtures/make_fixtures.py → core_ops.txt, make_elementwise_fixtures.py → elementwise.txt)
//   - float64 gradcheck over the row's domain and shapes
//   - float64 gradgradcheck (the recorded backward differentiated once more)
//   - int64 and bool operands: computed as PyTorch computes them (promoted to float32, kept, or
//     refused where PyTorch raises), against PyTorch's fixtures, for the rows that list dtype
//     cases; refused with a tg::Error naming the op, the dtype and the cast for the others
//   - empty operands: an empty result that requires grad, and empty gradients
//   - the rows' edge cases (<case>_edge: ±0, ±inf, NaN, domain errors) with PyTorch's signs of zero
//   - bfloat16 operands (<row>_bf16): computed in float32 and rounded once, forward and backward,
//     against PyTorch computing in bfloat16
// Adding an op adds a row here and its case to a fixture generator. Values that only a hand
// derivation pins down (kinks, ±inf, NaN, -0) are in elementwise_test.cpp and unary_math_test.cpp.
#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core_test_util.hpp"
#include "support/bfloat16_ulps.hpp"

using tg::Shape;
using tg::Tensor;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;

namespace {

using Operands = std::vector<Tensor>;

// Where gradcheck draws one operand's values: uniform in [low, high), then moved 0.1 up where
// they fall within 0.05 of a kink (finite differences cannot see the convention at a kink).
struct Domain {
  double low = -1.0, high = 1.0;
  std::vector<double> kinks = {};
};

struct OpInfo {
  std::string name;                          // the row, as messages show it
  std::string error_name;                    // the op that tg::Error messages name
  std::function<Tensor(const Operands&)> fn;  // the op on its tensor operands
  std::vector<std::string> operands;         // their fixture keys, in fn's order; gradients are "d" + key
  std::string fixture_file;
  std::vector<std::string> fixture_cases;    // each as <case>_f32 and <case>_f64
  std::vector<Domain> domain;                // one per operand
  std::vector<std::vector<Shape>> gradcheck_shapes;  // operand shapes, one list per gradcheck
  // Cases of fixture_file with int64, bool or mixed-dtype operands (each operand's values with
  // <key>_dtype, then y with y_dtype, or refused); none: the row refuses int64 and bool operands.
  std::vector<std::string> dtype_cases = {};
};

const std::vector<std::vector<Shape>> kUnaryShapes = {{{}}, {{7}}, {{2, 3, 2}}};
const std::vector<std::vector<Shape>> kBinaryShapes = {
    {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{3}, {2, 3}}, {{4, 1, 3}, {2, 1}},
    {{2, 3}, {2, 1}}, {{}, {2, 2}},  {{2, 1, 3, 1}, {1, 4}}, {{1}, {3}}};
const std::vector<std::string> kBinaryCases = {"2x3_2x3", "2x3_3", "4x1x3_2x1", "2x3_2x1", "3_2x3"};

std::vector<std::string> prefixed(const std::string& prefix, const std::vector<std::string>& suffixes) {
  std::vector<std::string> names;
  for (const std::string& suffix : suffixes) names.push_back(prefix + suffix);
  return names;
}

OpInfo unary(std::string name, std::string error_name, std::function<Tensor(const Tensor&)> fn,
             std::string fixture_file, Domain domain) {
  std::string key = name;
  return {std::move(name),
          std::move(error_name),
          [fn = std::move(fn)](const Operands& in) { return fn(in[0]); },
          {"x"},
          std::move(fixture_file),
          {std::move(key)},
          {std::move(domain)},
          kUnaryShapes};
}

OpInfo binary(std::string name, std::string error_name, std::function<Tensor(const Tensor&, const Tensor&)> fn,
              std::string fixture_file, std::vector<std::string> cases, Domain a_domain, Domain b_domain) {
  return {std::move(name),
          std::move(error_name),
          [fn = std::move(fn)](const Operands& in) { return fn(in[0], in[1]); },
          {"a", "b"},
          std::move(fixture_file),
          std::move(cases),
          {std::move(a_domain), std::move(b_domain)},
          kBinaryShapes};
}

const Domain kPositive{0.2, 2.0};
const Domain kReal{-2.0, 2.0};
const Domain kOpen{-0.9, 0.9};

// A row of the math of issue 38: its fixture cases are the random one and <name>_edge, and its dtype
// cases <name>_i64 and <name>_bool (unary) or <name>_<dtype of a>_<dtype of b> (binary, with
// <name>_zero_divisor_i64_i64 for fmod and remainder).
OpInfo math_unary(const std::string& name, std::function<Tensor(const Tensor&)> fn, Domain domain,
                  std::string error_name = "") {
  OpInfo row = unary(name, error_name.empty() ? name : error_name, std::move(fn), "elementwise.txt", std::move(domain));
  row.fixture_cases.push_back(name + "_edge");
  row.dtype_cases = {name + "_i64", name + "_bool"};
  return row;
}

OpInfo math_binary(const std::string& name, std::function<Tensor(const Tensor&, const Tensor&)> fn, Domain a_domain,
                   Domain b_domain) {
  std::vector<std::string> cases = prefixed(name + "_", {"2x3_2x3", "2x3_3", "4x1x3_2x1", "3_2x3", "s_2x2", "edge"});
  OpInfo row = binary(name, name, std::move(fn), "elementwise.txt", std::move(cases), std::move(a_domain),
                      std::move(b_domain));
  row.dtype_cases = prefixed(name + "_", {"i64_i64", "bool_bool", "i64_bool", "bool_i64", "i64_f32", "f32_i64",
                                          "bool_f64", "f32_f64", "f64_f32"});
  if (name != "atan2") row.dtype_cases.push_back(name + "_zero_divisor_i64_i64");
  return row;
}

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = {
      // --- arithmetic (core_ops.txt, tests/fixtures/make_fixtures.py) ---
      binary("add", "add", [](const Tensor& a, const Tensor& b) { return a + b; }, "core_ops.txt", prefixed("add_", kBinaryCases),
             {}, {}),
      binary("sub", "sub", [](const Tensor& a, const Tensor& b) { return a - b; }, "core_ops.txt", prefixed("sub_", kBinaryCases),
             {}, {}),
      binary("mul", "mul", [](const Tensor& a, const Tensor& b) { return a * b; }, "core_ops.txt", prefixed("mul_", kBinaryCases),
             {}, {}),
      binary("div", "div", [](const Tensor& a, const Tensor& b) { return a / b; }, "core_ops.txt", prefixed("div_", kBinaryCases),
             {}, {0.5, 2.0}),
      unary("neg", "neg", [](const Tensor& x) { return -x; }, "core_ops.txt", kReal),
      unary("sqrt", "sqrt", [](const Tensor& x) { return x.sqrt(); }, "core_ops.txt", kPositive),
      unary("pow_e3", "pow", [](const Tensor& x) { return x.pow(3.0); }, "core_ops.txt", kReal),
      unary("pow_e0p5", "pow", [](const Tensor& x) { return tg::pow(x, 0.5); }, "core_ops.txt", kPositive),
      unary("exp", "exp", [](const Tensor& x) { return tg::exp(x); }, "core_ops.txt", kReal),
      unary("log", "log", [](const Tensor& x) { return x.log(); }, "core_ops.txt", kPositive),
      // --- arithmetic (elementwise.txt, tests/fixtures/make_elementwise_fixtures.py) ---
      unary("log1p", "log1p", [](const Tensor& x) { return x.log1p(); }, "elementwise.txt", kOpen),
      unary("rsqrt", "rsqrt", [](const Tensor& x) { return x.rsqrt(); }, "elementwise.txt", kPositive),
      unary("pow_base2p5", "pow", [](const Tensor& x) { return tg::pow(2.5, x); }, "elementwise.txt", kReal),
      // 0^e: its gradient is 0 by convention for e >= 0 and -inf·0^e for e < 0; gradcheck on e > 0.
      unary("pow_base0", "pow", [](const Tensor& x) { return tg::pow(0.0, x); }, "elementwise.txt", kPositive),
      binary("pow_tensor", "pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); }, "elementwise.txt",
             [] {
               const std::vector<std::string> shapes = {"2x3_2x3", "2x3_3", "4x1x3_2x1", "3_2x3", "s_2x2"};
               std::vector<std::string> cases = prefixed("pow_tensor_", shapes);
               for (const std::string& name : prefixed("pow_tensor_zero_base_", shapes)) cases.push_back(name);
               return cases;
             }(),
             {0.5, 2.0}, kReal),
      unary("abs", "abs", [](const Tensor& x) { return tg::abs(x); }, "elementwise.txt", {-0.9, 0.9, {0.0}}),
      // --- activations ---
      unary("relu", "relu", [](const Tensor& x) { return tg::relu(x); }, "core_ops.txt", {-2.0, 2.0, {0.0}}),
      unary("tanh", "tanh", [](const Tensor& x) { return tg::tanh(x); }, "elementwise.txt", kOpen),
      unary("sigmoid", "sigmoid", [](const Tensor& x) { return x.sigmoid(); }, "elementwise.txt", kOpen),
      unary("gelu_none", "gelu", [](const Tensor& x) { return tg::gelu(x); }, "elementwise.txt", kOpen),
      unary("gelu_tanh", "gelu", [](const Tensor& x) { return x.gelu("tanh"); }, "elementwise.txt", kOpen),
      // --- clamp with scalar bounds (kinks at the bounds) ---
      unary("clamp_both", "clamp", [](const Tensor& x) { return x.clamp(-0.5, 0.25); }, "elementwise.txt",
            {-0.9, 0.9, {-0.5, 0.25}}),
      unary("clamp_min", "clamp", [](const Tensor& x) { return x.clamp_min(-0.5); }, "elementwise.txt",
            {-0.9, 0.9, {-0.5}}),
      unary("clamp_max", "clamp", [](const Tensor& x) { return tg::clamp(x, std::nullopt, 0.25); }, "elementwise.txt",
            {-0.9, 0.9, {0.25}}),
      unary("clamp_crossed", "clamp", [](const Tensor& x) { return x.clamp(0.5, -0.5); }, "elementwise.txt", kOpen),
      // --- clamp with tensor bounds, broadcast with x ---
      {"clamp_tensor_both", "clamp",
       [](const Operands& in) { return tg::clamp(in[0], in[1], in[2]); }, {"x", "min", "max"}, "elementwise.txt",
       {"clamp_tensor_both_2x3_2x3_2x3", "clamp_tensor_both_2x3_3_2x1", "clamp_tensor_both_2x1_3_1x3"},
       {{-1.5, 1.5}, {-1.0, 0.0}, {0.0, 1.0}},
       {{{2, 3}, {2, 3}, {2, 3}}, {{2, 3}, {3}, {2, 1}}, {{}, {2, 2}, {2, 1}}, {{4}, {}, {}}}},
      // the same with the bounds drawn across each other (min > max in places)
      {"clamp_tensor_crossed", "clamp",
       [](const Operands& in) { return tg::clamp(in[0], in[1], in[2]); }, {"x", "min", "max"}, "elementwise.txt", {},
       {{-1.5, 1.5}, {-1.0, 1.0}, {-1.0, 1.0}}, {{{3, 4}, {3, 4}, {3, 4}}, {{2, 3}, {3}, {2, 1}}}},
      {"clamp_tensor_min", "clamp", [](const Operands& in) { return in[0].clamp(in[1]); }, {"x", "min"},
       "elementwise.txt", {"clamp_tensor_min_4x1x3_2x1"}, {{-1.0, 1.0}, {-1.0, 1.0}},
       {{{4, 1, 3}, {2, 1}}, {{3}, {2, 3}}}},
      {"clamp_tensor_max", "clamp", [](const Operands& in) { return in[0].clamp(std::nullopt, in[1]); }, {"x", "max"},
       "elementwise.txt", {"clamp_tensor_max_3_2x3"}, {{-1.0, 1.0}, {-1.0, 1.0}}, {{{3}, {2, 3}}, {{2, 3}, {}}}},
      // --- trigonometric and hyperbolic (issue 38) ---
      math_unary("sin", [](const Tensor& x) { return x.sin(); }, kReal),
      math_unary("cos", [](const Tensor& x) { return tg::cos(x); }, kReal),
      math_unary("tan", [](const Tensor& x) { return x.tan(); }, kOpen),
      math_unary("asin", [](const Tensor& x) { return tg::asin(x); }, kOpen),
      math_unary("acos", [](const Tensor& x) { return x.acos(); }, kOpen),
      math_unary("atan", [](const Tensor& x) { return tg::atan(x); }, kReal),
      math_unary("sinh", [](const Tensor& x) { return x.sinh(); }, kReal),
      math_unary("cosh", [](const Tensor& x) { return tg::cosh(x); }, kReal),
      math_binary("atan2", [](const Tensor& a, const Tensor& b) { return a.atan2(b); }, kReal, {0.5, 2.0}),
      // --- exponentials and logarithms ---
      math_unary("exp2", [](const Tensor& x) { return tg::exp2(x); }, kReal),
      math_unary("log2", [](const Tensor& x) { return x.log2(); }, kPositive),
      math_unary("log10", [](const Tensor& x) { return tg::log10(x); }, kPositive),
      math_unary("expm1", [](const Tensor& x) { return x.expm1(); }, kReal),
      // --- steps: a zero gradient; gradcheck away from the jumps (round_d2 jumps every 0.01 and
      // relies on the draw missing them by more than gradcheck's step) ---
      math_unary("floor", [](const Tensor& x) { return tg::floor(x); }, {-0.9, 0.9, {0.0}}),
      math_unary("ceil", [](const Tensor& x) { return x.ceil(); }, {-0.9, 0.9, {0.0}}),
      math_unary("round", [](const Tensor& x) { return x.round(); }, {-0.9, 0.9, {-0.5, 0.5}}),
      math_unary("round_d2", [](const Tensor& x) { return tg::round(x, 2); }, kOpen, "round"),
      math_unary("round_dm1", [](const Tensor& x) { return x.round(-1); }, kOpen, "round"),
      math_unary("sign", [](const Tensor& x) { return tg::sign(x); }, {-0.9, 0.9, {0.0}}),
      // --- fmod and remainder: gradcheck where the quotient is 2 throughout (no jump) ---
      math_binary("fmod", [](const Tensor& a, const Tensor& b) { return tg::fmod(a, b); }, {2.1, 2.3}, {0.8, 0.9}),
      math_binary("remainder", [](const Tensor& a, const Tensor& b) { return a.remainder(b); }, {2.1, 2.3},
                  {0.8, 0.9}),
      math_unary("fmod_scalar", [](const Tensor& x) { return x.fmod(1.5); }, {-2.0, 2.0, {-1.5, 1.5}}, "fmod"),
      math_unary("remainder_scalar", [](const Tensor& x) { return tg::remainder(x, -1.5); }, {-2.0, 2.0, {-1.5, 0.0, 1.5}},
                 "remainder"),
  };
  return table;
}

// A float64 leaf of `shape` drawn from `domain` (see Domain).
Tensor draw(const Shape& shape, const Domain& domain) {
  Tensor t = tg::empty(shape, tg::kFloat64);
  t.uniform_(domain.low, domain.high);
  double* values = t.mutable_data<double>();
  for (int64_t i = 0; i < t.numel(); ++i)
    for (double kink : domain.kinks)
      if (std::fabs(values[i] - kink) < 0.05) values[i] += 0.1;
  return t.requires_grad_();
}

// actual against PyTorch's value: the same shape and dtype, NaN and ±inf where PyTorch has them
// (0^−½'s infinite gradient, say), finite values within tol · (1 + |expected|).
void require_matches(const Tensor& actual, const Tensor& expected, double tol) {
  REQUIRE(actual.defined());
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(actual.dtype() == expected.dtype());
  tg::testing::require_ieee_equal(actual, tg::testing::values(expected), tol);
}

const OpInfo& row_named(const std::string& name) {
  for (const OpInfo& row : op_table())
    if (row.name == name) return row;
  throw std::runtime_error("no row " + name);
}

std::vector<std::string> row_names() {
  std::vector<std::string> names;
  for (const OpInfo& row : op_table()) names.push_back(row.name);
  return names;
}

}  // namespace

TEST_CASE("the op table names every row once and fills every field", "[core][elementwise][opinfo]") {
  std::vector<std::string> names = row_names();
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  for (const OpInfo& row : op_table()) {
    INFO(row.name);
    CHECK(row.domain.size() == row.operands.size());
    CHECK_FALSE(row.gradcheck_shapes.empty());
    for (const auto& shapes : row.gradcheck_shapes) CHECK(shapes.size() == row.operands.size());
  }
}

TEST_CASE("elementwise ops match PyTorch forward and backward", "[core][elementwise][opinfo][fixture]") {
  for (const OpInfo& row : op_table()) {
    for (const std::string& case_name : row.fixture_cases) {
      for (const char* suffix : {"_f32", "_f64"}) {
        INFO(row.name << ": case " << case_name + suffix);
        const auto& c = fixture(row.fixture_file, case_name + suffix);
        const double tol = fixture_tol(c.at(row.operands[0]).dtype());
        Operands in;
        for (const std::string& key : row.operands) in.push_back(leaf(c.at(key)));
        const Tensor y = row.fn(in);
        require_matches(y, c.at("y"), tol);
        y.backward(c.at("dy"));
        for (size_t k = 0; k < in.size(); ++k) {
          INFO("gradient d" << row.operands[k]);
          require_matches(in[k].grad(), c.at("d" + row.operands[k]), tol);
        }
      }
    }
  }
}

namespace {

// check (gradcheck or gradgradcheck) of the row's function at operands drawn from its domains, for
// each of its gradcheck shapes, after seeding the default generator with `seed`.
void require_check_passes(const OpInfo& row, uint64_t seed,
                          tg::GradcheckResult (*check)(const tg::DifferentiableFunction&, const Operands&,
                                                       const tg::GradcheckOptions&)) {
  tg::manual_seed(seed);
  for (const std::vector<Shape>& shapes : row.gradcheck_shapes) {
    std::string shape_list;
    for (const Shape& shape : shapes) shape_list += tg::to_string(shape) + " ";
    INFO(row.name << " on " << shape_list);
    Operands in;
    for (size_t k = 0; k < shapes.size(); ++k) in.push_back(draw(shapes[k], row.domain[k]));
    const tg::GradcheckResult result = check([&](const Operands& operands) { return row.fn(operands); }, in, {});
    INFO(result.message);
    REQUIRE(result.passed);
  }
}

}  // namespace

TEST_CASE("elementwise ops pass gradcheck in float64 over their domains", "[core][elementwise][opinfo][gradcheck]") {
  const std::string name = GENERATE(from_range(row_names()));
  require_check_passes(row_named(name), 13, tg::gradcheck);
}

TEST_CASE("elementwise ops pass gradgradcheck in float64 over their domains",
          "[core][elementwise][opinfo][gradcheck][double_backward]") {
  const std::string name = GENERATE(from_range(row_names()));
  // 0^e's recorded backward masks base^e · log(base) = 0 · −inf = NaN with where, whose own
  // backward multiplies a zero by that −inf again: the second derivative is NaN, in PyTorch too
  // (torch.autograd.gradgradcheck(lambda e: torch.pow(0.0, e), ...) fails the same way).
  if (name == "pow_base0") return;
  require_check_passes(row_named(name), 17, tg::gradgradcheck);
}

namespace {

// The dtype of a fixture's dtype code (make_elementwise_fixtures.py's DTYPE_CODES).
tg::DType dtype_of_code(double code) {
  static const tg::DType dtypes[] = {tg::kBool, tg::kInt64, tg::kFloat32, tg::kFloat64};
  return dtypes[static_cast<int>(code)];
}

// A fixture operand or result in its own dtype: float64 values and <key>_dtype.
Tensor typed(const tg::testing::FixtureCase& c, const std::string& key) {
  return c.at(key).to(dtype_of_code(c.scalar(key + "_dtype")));
}

// The result of an op on int64, bool or mixed operands against PyTorch's: the same dtype, and the
// same values (exactly for int64 and bool); or a tg::Error naming the op where PyTorch raises.
void require_outcome(const std::function<Tensor()>& op, const tg::testing::FixtureCase& c,
                     const std::string& error_name) {
  if (c.has("refused")) {
    REQUIRE_THROWS_AS(op(), tg::Error);
    REQUIRE_THROWS_WITH(op(), Catch::StartsWith(error_name + ": "));
    return;
  }
  const Tensor y = op();
  const Tensor expected = typed(c, "y");
  REQUIRE(y.dtype() == expected.dtype());
  REQUIRE(y.shape() == expected.shape());
  REQUIRE_FALSE(y.requires_grad());
  tg::testing::require_ieee_equal(y, tg::testing::values(expected),
                                  is_floating_point(y.dtype()) ? fixture_tol(y.dtype()) : 0.0);
}

}  // namespace

TEST_CASE("elementwise ops on int64, bool and mixed operands follow PyTorch's promotion",
          "[core][elementwise][opinfo][dtype][fixture]") {
  for (const OpInfo& row : op_table()) {
    for (const std::string& case_name : row.dtype_cases) {
      INFO(row.name << ": case " << case_name);
      const auto& c = fixture(row.fixture_file, case_name);
      Operands in;
      for (const std::string& key : row.operands) in.push_back(typed(c, key));
      require_outcome([&] { return row.fn(in); }, c, row.error_name);
    }
  }
}

TEST_CASE("fmod and remainder with a number type it as PyTorch types a Scalar",
          "[core][elementwise][opinfo][dtype][fixture]") {
  int checked = 0;
  for (const auto& [case_name, c] : tg::testing::load_fixtures("elementwise.txt")) {
    if (!c.has("other_integral")) continue;
    INFO("case " << case_name);
    const bool floored = case_name.starts_with("remainder_");
    const Tensor x = typed(c, "x");
    const double other = c.scalar("other");
    const bool integral = c.scalar("other_integral") != 0;
    require_outcome(
        [&] {
          if (integral) return floored ? x.remainder(static_cast<int64_t>(other)) : tg::fmod(x, static_cast<int>(other));
          return floored ? tg::remainder(x, other) : x.fmod(other);
        },
        c, floored ? "remainder" : "fmod");
    ++checked;
  }
  CHECK(checked == 2 * 6 * 4);  // fmod and remainder, six numbers, four dtypes
}

TEST_CASE("elementwise ops at ±0, ±inf and NaN give PyTorch's signs of zero", "[core][elementwise][opinfo][edge]") {
  for (const OpInfo& row : op_table()) {
    for (const std::string& case_name : row.fixture_cases) {
      if (!case_name.ends_with("_edge")) continue;
      for (const char* suffix : {"_f32", "_f64"}) {
        INFO(row.name << ": case " << case_name + suffix);
        const auto& c = fixture(row.fixture_file, case_name + suffix);
        Operands in;
        for (const std::string& key : row.operands) in.push_back(leaf(c.at(key)));
        const Tensor y = row.fn(in);
        y.backward(c.at("dy"));
        std::vector<std::pair<std::string, Tensor>> results = {{"y", y}};
        for (size_t k = 0; k < in.size(); ++k) results.emplace_back("d" + row.operands[k], in[k].grad());
        for (const auto& [key, actual] : results) {
          const std::vector<double> got = tg::testing::values(actual), expected = tg::testing::values(c.at(key));
          REQUIRE(got.size() == expected.size());
          for (size_t i = 0; i < got.size(); ++i) {
            if (expected[i] != 0.0) continue;  // the values themselves: the fixture test above
            INFO(key << "[" << i << "]: got " << got[i] << ", expected " << expected[i]);
            CHECK(got[i] == 0.0);
            CHECK(std::signbit(got[i]) == std::signbit(expected[i]));
          }
        }
      }
    }
  }
}

TEST_CASE("elementwise ops refuse int64 and bool tensors, naming the op, the dtype and the cast",
          "[core][elementwise][opinfo][dtype][errors]") {
  const tg::DType dtype = GENERATE(tg::kInt64, tg::kBool);
  for (const OpInfo& row : op_table()) {
    if (!row.dtype_cases.empty()) continue;  // computed as PyTorch computes them: the test above
    for (const std::vector<Shape>& shapes : row.gradcheck_shapes) {  // the broadcasting paths too
      INFO(row.name << " on " << dtype << " operands of shapes " << tg::to_string(shapes[0]) << "...");
      Operands in;
      for (const Shape& shape : shapes) in.push_back(tg::ones(shape, dtype));
      REQUIRE_THROWS_AS(row.fn(in), tg::Error);
      REQUIRE_THROWS_WITH(row.fn(in), Catch::StartsWith(row.error_name + ": not implemented for " +
                                                        std::string(tg::name(dtype)) + " tensors") &&
                                          Catch::EndsWith("; cast with .to(tg::kFloat32)"));
    }
  }
}

TEST_CASE("elementwise ops on empty operands give empty results and gradients", "[core][elementwise][opinfo][empty]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64, tg::kBFloat16);
  for (const OpInfo& row : op_table()) {
    INFO(row.name << " on " << dtype);
    Operands in;
    for (size_t k = 0; k < row.operands.size(); ++k) in.push_back(tg::ones({0, 3}, dtype).requires_grad_());
    const Tensor y = row.fn(in);
    REQUIRE(y.shape() == Shape{0, 3});
    REQUIRE(y.dtype() == dtype);
    REQUIRE(y.requires_grad());
    y.sum().backward();
    for (const Tensor& operand : in) {
      REQUIRE(operand.grad().defined());
      CHECK(operand.grad().shape() == Shape{0, 3});
    }
  }
}

TEST_CASE("elementwise ops on bfloat16 compute in float32 and round once, as PyTorch",
          "[core][elementwise][opinfo][bfloat16][fixture]") {
  // PyTorch's CPU kernels compute most bfloat16 ops in float32 and round once; so does tapegrad for
  // every op (the operands widened exactly, the float32 op, one rounding). The results are then
  // PyTorch's bits wherever the two float32 values agree; where tapegrad's float32 kernel differs
  // from PyTorch's in float32's last bits (libm against SLEEF), the rounding can land one bfloat16
  // step away: within 1 ulp of each value. Two kernels of torch 1.13 compute in bfloat16 steps
  // instead: the tanh form of GELU (1 + tanh(u) cancels in bfloat16: gelu(−3.06) is −0 there,
  // −0.0030 in float32) and round with decimals (x·10^d rounded to bfloat16 before nearbyint). Those
  // are compared normwise, within 2 ulps of the largest value.
  // The gradients: tapegrad runs each op's float32 backward and rounds once, where PyTorch's
  // bfloat16 backward formulas work from bfloat16-rounded saved tensors and round each step (tanh's
  // g·(1 − y²) from a rounded y cancels near |y| = 1): normwise, within 2 ulps of the largest
  // gradient.
  const std::vector<std::string> rounds_in_bfloat16_steps = {"gelu_tanh", "round_d2", "round_dm1"};
  int64_t elements = 0, exact = 0;
  for (const OpInfo& row : op_table()) {
    INFO(row.name << ": case " << row.name << "_bf16");
    const auto& c = fixture("elementwise.txt", row.name + "_bf16");
    Operands in;
    for (const std::string& key : row.operands) in.push_back(c.at(key).to(tg::kBFloat16).requires_grad_());
    const Tensor y = row.fn(in);
    REQUIRE(y.dtype() == tg::kBFloat16);
    const bool stepwise = std::find(rounds_in_bfloat16_steps.begin(), rounds_in_bfloat16_steps.end(), row.name) !=
                          rounds_in_bfloat16_steps.end();
    const int64_t matches = stepwise ? tg::testing::require_within_bfloat16_ulps(y, c.at("y"), 2,
                                                                                 tg::testing::UlpsOf::Largest)
                                     : tg::testing::require_within_bfloat16_ulps(y, c.at("y"), 1);
    if (!stepwise) {
      exact += matches;
      elements += y.numel();
    }
    y.backward(c.at("dy").to(tg::kBFloat16));
    for (size_t k = 0; k < in.size(); ++k) {
      INFO("gradient d" << row.operands[k]);
      REQUIRE(in[k].grad().dtype() == tg::kBFloat16);
      tg::testing::require_within_bfloat16_ulps(in[k].grad(), c.at("d" + row.operands[k]), 2,
                                                tg::testing::UlpsOf::Largest);
    }
  }
  // Exact nearly everywhere: the 1-ulp allowance is the exception, not the rule.
  INFO(exact << " of " << elements << " forward values exact");
  CHECK(exact >= elements * 97 / 100);
}
