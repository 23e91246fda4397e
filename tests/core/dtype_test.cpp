// The dtype system: conversions against PyTorch (tests/fixtures/dtype_conversions.txt, written by
// make_dtype_fixtures.py beside it), the cases PyTorch leaves undefined, int64 and bool creation,
// element access and printing (strings printed by torch 1.13, "torch.int64" written "int64"), and
// every op that does not support a dtype throwing tg::Error that names the op and the dtype.
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "core_test_util.hpp"
#include "support/tensor_equal.hpp"

using tg::Tensor;
using tg::testing::int64_tensor;

namespace {

tg::DType dtype_named(const std::string& name) {
  for (tg::DType dtype : {tg::kFloat32, tg::kFloat64, tg::kInt64, tg::kBool, tg::kBFloat16})
    if (tg::name(dtype) == name) return dtype;
  throw std::runtime_error("dtype_conversions.txt: unknown dtype " + name);
}

// n words of the fixture as a 1-D tensor of `dtype`; int64 words are parsed as integers so that
// values beyond 2^53 stay exact, floats with strtod (which reads nan, inf and -inf).
Tensor read_tensor(std::istringstream& words, int64_t n, tg::DType dtype) {
  std::vector<std::string> texts(static_cast<size_t>(n));
  for (std::string& text : texts) words >> text;
  if (dtype == tg::kInt64) {
    std::vector<int64_t> values;
    for (const std::string& text : texts) values.push_back(std::stoll(text));
    return int64_tensor(values);
  }
  std::vector<double> values;
  for (const std::string& text : texts) values.push_back(std::strtod(text.c_str(), nullptr));
  // float32 fixture values are exactly representable, so going through double loses nothing.
  return tg::tensor(values, {n}, dtype);
}

std::string str(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

}  // namespace

TEST_CASE("dtype: .to() converts every pair of dtypes as PyTorch does", "[core][dtype][fixture]") {
  std::ifstream file(std::string(TG_FIXTURE_DIR) + "/dtype_conversions.txt");
  REQUIRE(file.good());
  std::string line;
  int cases = 0;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string from, to;
    int64_t n = 0;
    words >> from >> to >> n;
    INFO(from << " -> " << to);
    const Tensor input = read_tensor(words, n, dtype_named(from));
    const Tensor expected = read_tensor(words, n, dtype_named(to));
    REQUIRE(words);
    TG_REQUIRE_EQUAL(input.to(dtype_named(to)), expected);
    ++cases;
  }
  CHECK(cases == 20);
}

TEST_CASE("dtype: to int64 refuses NaN, infinities and values outside int64's range", "[core][dtype]") {
  // PyTorch's behaviour here is undefined (x86 gives INT64_MIN); tapegrad defines it as an error
  // that names the value and its index.
  const double two_to_63 = 9223372036854775808.0;
  for (double bad : {tg::testing::kNaN, tg::testing::kInf, -tg::testing::kInf, two_to_63, -2 * two_to_63}) {
    INFO(bad);
    for (tg::DType dtype : {tg::kFloat32, tg::kFloat64}) {
      const Tensor x = tg::tensor({1.0, bad}, {}, dtype);
      REQUIRE_THROWS_WITH(x.to(tg::kInt64), Catch::Contains("to: cannot convert") && Catch::Contains("element 1") &&
                                                  Catch::Contains("int64"));
    }
    REQUIRE_THROWS_WITH(tg::tensor({bad}, {}, tg::kInt64), Catch::Contains("tensor: cannot convert"));
    REQUIRE_THROWS_WITH(tg::full({2}, bad, tg::kInt64), Catch::Contains("fill_: cannot convert"));
    REQUIRE_THROWS_WITH(tg::scalar_tensor(bad, tg::kFloat64).item<int64_t>(), Catch::Contains("item: cannot convert"));
  }
  // -2^63 itself is in range, and so is the largest double below 2^63.
  CHECK(tg::scalar_tensor(-two_to_63, tg::kFloat64).item<int64_t>() == std::numeric_limits<int64_t>::min());
  CHECK(tg::scalar_tensor(std::nextafter(two_to_63, 0.0), tg::kFloat64).item<int64_t>() ==
        std::numeric_limits<int64_t>::max() - 1023);
}

TEST_CASE("dtype: int64 and bool creation, conversion on the way in, and element access", "[core][dtype]") {
  // torch.tensor([1.5, -1.5, 3.0], dtype=torch.long) = [1, -1, 3]: creation truncates like .to()
  const Tensor ints = tg::tensor({1.5, -1.5, 3, -4}, {2, 2}, tg::kInt64);
  REQUIRE(ints.dtype() == tg::kInt64);
  REQUIRE(ints.shape() == tg::Shape{2, 2});
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{1, -1, 3, -4});
  CHECK(tg::tensor({1, 0, -2, 0.5}, {}, tg::kBool).to_vector<bool>() == std::vector<bool>{true, false, true, true});

  CHECK(tg::zeros({3}, tg::kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  CHECK(tg::ones({2}, tg::kBool).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(tg::full({2}, -7.9, tg::kInt64).to_vector<int64_t>() == std::vector<int64_t>{-7, -7});  // torch.full: [-7, -7]
  CHECK(tg::full({1}, 0.0, tg::kBool).to_vector<bool>() == std::vector<bool>{false});
  CHECK(tg::zeros_like(ints).dtype() == tg::kInt64);
  TG_REQUIRE_EQUAL(tg::full_like(tg::zeros({2}, tg::kBool), 3.0), tg::tensor({1, 1}, {}, tg::kBool));

  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(int64_tensor({big}).item<int64_t>() == big);  // exact, unlike item() through double
  CHECK(tg::scalar_tensor(-3, tg::kInt64).item() == -3.0);
  CHECK(tg::scalar_tensor(2.9, tg::kFloat32).item<int64_t>() == 2);  // torch: tensor(2.9).long().item() = 2
  CHECK(tg::scalar_tensor(1, tg::kBool).item<bool>());
  CHECK(tg::scalar_tensor(-0.25, tg::kFloat64).item<bool>());
  CHECK_FALSE(tg::scalar_tensor(0, tg::kInt64).item<bool>());
  CHECK(tg::scalar_tensor(1, tg::kBool).item<float>() == 1.0f);
  REQUIRE_THROWS_WITH(ints.item<int64_t>(), Catch::Contains("item") && Catch::Contains("4 elements"));

  REQUIRE_THROWS_WITH(ints.data<double>(), Catch::Contains("data") && Catch::Contains("float64") &&
                                                Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(tg::ones({1}, tg::kBool).to_vector<int64_t>(), Catch::Contains("int64") && Catch::Contains("bool"));
  CHECK(tg::element_size(tg::kInt64) == 8);
  CHECK(tg::element_size(tg::kBool) == 1);
}

TEST_CASE("dtype: ops that only move values work on int64 and bool", "[core][dtype]") {
  const Tensor ints = int64_tensor({1, 2, 3, 4, 5, int64_t{1} << 60}).reshape({2, 3});
  TG_REQUIRE_EQUAL(ints.transpose(0, 1), int64_tensor({1, 4, 2, 5, 3, int64_t{1} << 60}).reshape({3, 2}));
  TG_REQUIRE_EQUAL(ints.clone(), ints);
  TG_REQUIRE_EQUAL(ints.detach().reshape({-1}), int64_tensor({1, 2, 3, 4, 5, int64_t{1} << 60}));
  const Tensor mask = tg::tensor({1, 0, 0, 1}, {2, 2}, tg::kBool);
  TG_REQUIRE_EQUAL(mask.transpose(0, 1), tg::tensor({1, 0, 0, 1}, {2, 2}, tg::kBool));
  Tensor target = tg::zeros({2, 2}, tg::kBool);
  target.copy_(mask);
  TG_REQUIRE_EQUAL(target, mask);
  target.fill_(0.0);
  CHECK(target.to_vector<bool>() == std::vector<bool>(4, false));
  REQUIRE_THROWS_WITH(target.copy_(ints.reshape({3, 2})), Catch::Contains("copy_"));
}

TEST_CASE("dtype: int64 and bool tensors never require grad", "[core][dtype][autograd]") {
  for (tg::DType dtype : {tg::kInt64, tg::kBool}) {
    INFO(dtype);
    Tensor t = tg::zeros({2}, dtype);
    // torch: "only Tensors of floating point dtype can require gradients"
    REQUIRE_THROWS_WITH(t.requires_grad_(), Catch::Contains("requires_grad_") && Catch::Contains("float32") &&
                                                 Catch::Contains(std::string(tg::name(dtype))));
    CHECK_FALSE(t.requires_grad());
    CHECK_NOTHROW(t.requires_grad_(false));
  }
  // A conversion to int64 or bool is a constant, not recorded; float -> float still is.
  Tensor x = tg::tensor({1.5, -2.5}).requires_grad_();
  const Tensor classes = x.to(tg::kInt64);
  CHECK_FALSE(classes.requires_grad());
  CHECK(classes.grad_fn_name() == nullptr);
  CHECK_FALSE(x.to(tg::kBool).requires_grad());
  CHECK_FALSE(classes.to(tg::kFloat32).requires_grad());
  const Tensor wide = x.to(tg::kFloat64);
  REQUIRE(wide.requires_grad());
  (wide * 3.0).sum().backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("dtype: every op that does not support int64 or bool throws, naming the op, the dtype and the cast",
          "[core][dtype][errors]") {
  const tg::DType dtype = GENERATE(tg::kInt64, tg::kBool);
  const std::string dtype_name(tg::name(dtype));
  INFO(dtype_name);
  Tensor a = tg::ones({2, 2}, dtype);
  const Tensor b = tg::ones({2, 2}, dtype);
  const std::vector<std::pair<const char*, std::function<void()>>> ops = {
      // (each elementwise op: a row of elementwise_opinfo_test.cpp; here, the scalar operand forms)
      {"mul", [&] { (void)(a * 2.0); }},
      {"div", [&] { (void)(1.0 / a); }},
      {"var", [&] { (void)a.var(); }},
      {"std", [&] { (void)a.std({0}); }},
      {"matmul", [&] { (void)tg::matmul(a, b); }},
      {"uniform_", [&] { a.uniform_(0.0, 1.0); }},
      {"normal_", [&] { a.normal_(); }},
      {"uniform_", [&] { (void)tg::rand({2}, dtype); }},
      {"normal_", [&] { (void)tg::randn({2}, dtype); }},
  };
  for (const auto& [op, run] : ops) {
    INFO(op);
    REQUIRE_THROWS_WITH(run(), Catch::StartsWith(std::string(op) + ": not implemented for " + dtype_name + " tensors") &&
                                   Catch::EndsWith("; cast with .to(tg::kFloat32)"));
  }
  // mean says what to write instead (sum and prod take bool and int64: reduction_test.cpp).
  REQUIRE_THROWS_WITH(a.mean({-1}, true), Catch::Equals("mean: " + dtype_name +
                                                        " tensors have no mean; cast first: x.to(tg::kFloat32).mean()"));
  // Empty tensors too: the check does not depend on there being elements to compute.
  REQUIRE_THROWS_WITH(tg::zeros({0}, dtype).mean(), Catch::StartsWith("mean: " + dtype_name + " tensors have no mean"));
  REQUIRE_THROWS_WITH(tg::zeros({0}, dtype).exp(), Catch::StartsWith("exp: not implemented"));
}

TEST_CASE("dtype: int64 and bool tensors print as PyTorch prints them", "[core][dtype][print]") {
  CHECK(str(tg::tensor({1, -2, 300}, {}, tg::kInt64)) == "tensor([  1,  -2, 300])");
  CHECK(str(tg::tensor({1, -20, 300, 4}, {2, 2}, tg::kInt64)) == "tensor([[  1, -20],\n        [300,   4]])");
  CHECK(str(tg::scalar_tensor(-5, tg::kInt64)) == "tensor(-5)");
  CHECK(str(int64_tensor({std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})) ==
        "tensor([ 9223372036854775807, -9223372036854775808])");
  CHECK(str(tg::zeros({0}, tg::kInt64)) == "tensor([], dtype=int64)");
  CHECK(str(tg::zeros({0, 2}, tg::kInt64)) == "tensor([], size=(0, 2), dtype=int64)");
  CHECK(str(tg::tensor({1, 0, 1}, {}, tg::kBool)) == "tensor([ True, False,  True])");
  CHECK(str(tg::tensor({1, 0, 0, 1}, {2, 2}, tg::kBool)) == "tensor([[ True, False],\n        [False,  True]])");
  CHECK(str(tg::scalar_tensor(0, tg::kBool)) == "tensor(False)");
  CHECK(str(tg::zeros({0}, tg::kBool)) == "tensor([], dtype=bool)");

  std::vector<double> counting(2000), thirds(30);
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<double>(i);
  for (size_t i = 0; i < thirds.size(); ++i) thirds[i] = i % 3 == 0;
  // torch.arange(30)
  CHECK(str(tg::tensor(std::vector<double>(counting.begin(), counting.begin() + 30), {}, tg::kInt64)) ==
        "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
        "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
  // torch.arange(2000).reshape(2, 1000): the summary's widths come from the visible values only
  CHECK(str(tg::tensor(counting, {2, 1000}, tg::kInt64)) ==
        "tensor([[   0,    1,    2,  ...,  997,  998,  999],\n"
        "        [1000, 1001, 1002,  ..., 1997, 1998, 1999]])");
  // torch.arange(30) % 3 == 0
  CHECK(str(tg::tensor(thirds, {}, tg::kBool)) ==
        "tensor([ True, False, False,  True, False, False,  True, False, False,  True,\n"
        "        False, False,  True, False, False,  True, False, False,  True, False,\n"
        "        False,  True, False, False,  True, False, False,  True, False, False])");
}
