// The Tensor handle: libtorch's spellings, creation, shapes from 0-d to 4-d and empty, dtype
// conversion, element access, and seeding.
#include <cmath>
#include <sstream>

#include "core_test_util.hpp"

using tg::Tensor;

TEST_CASE("libtorch spellings compile and behave", "[core][tensor]") {
  tg::manual_seed(0);
  auto a = tg::randn({2, 3});
  auto b = tg::rand({2, 3}, tg::kFloat64);
  auto c = tg::zeros({3}), d = tg::ones({2, 1}), e = tg::full({2, 2}, 0.5);
  auto t = tg::tensor({0.2, 0.1, 0.3, 0.5, 0.1, 0.1}, {2, 1, 3});
  CHECK(t.shape() == tg::Shape{2, 1, 3});
  CHECK(t.dim() == 3);
  CHECK(t.numel() == 6);
  CHECK(t.dtype() == tg::kFloat32);
  CHECK(t.to(tg::kFloat64).dtype() == tg::kFloat64);
  CHECK(t.sum().item() == Approx(1.3).epsilon(1e-6));
  std::vector<float> v = a.to_vector<float>();
  const float* p = a.data<float>();
  REQUIRE(v.size() == 6);
  CHECK(std::equal(v.begin(), v.end(), p));
  std::ostringstream out;
  out << t;
  CHECK(out.str().rfind("tensor([[[0.2000", 0) == 0);
  CHECK(a.dtype() == tg::kFloat32);
  CHECK(b.dtype() == tg::kFloat64);
  for (double value : b.to_vector<double>()) CHECK((value >= 0.0 && value < 1.0));
  CHECK(c.to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(d.shape() == tg::Shape{2, 1});
  CHECK(d.to_vector<float>() == std::vector<float>{1, 1});
  CHECK(e.to_vector<float>() == std::vector<float>(4, 0.5f));
}

TEST_CASE("manual_seed makes random tensors reproducible", "[core][tensor]") {
  tg::manual_seed(7);
  const std::vector<float> first = tg::randn({100}).to_vector<float>();
  const std::vector<double> first_u = tg::rand({5}, tg::kFloat64).to_vector<double>();
  tg::manual_seed(7);
  CHECK(tg::randn({100}).to_vector<float>() == first);
  CHECK(tg::rand({5}, tg::kFloat64).to_vector<double>() == first_u);
  tg::manual_seed(8);
  CHECK(tg::randn({100}).to_vector<float>() != first);
}

TEST_CASE("randn and rand have the right moments", "[core][tensor]") {
  tg::manual_seed(1);
  const Tensor n = tg::randn({100000}, tg::kFloat64);
  CHECK(std::fabs(n.mean().item()) < 0.02);
  CHECK(std::fabs(n.var().item() - 1.0) < 0.02);
  const Tensor u = tg::rand({100000}, tg::kFloat64);
  CHECK(std::fabs(u.mean().item() - 0.5) < 0.01);
  CHECK(std::fabs(u.var().item() - 1.0 / 12) < 0.005);
}

TEST_CASE("shapes from 0-d to 4-d and empty", "[core][tensor]") {
  const Tensor s = tg::scalar_tensor(2.5);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.shape().empty());
  CHECK(s.item() == 2.5);
  CHECK(tg::full({}, 3.0, tg::kFloat64).item() == 3.0);

  const Tensor four = tg::ones({2, 3, 4, 5});
  CHECK(four.dim() == 4);
  CHECK(four.numel() == 120);
  CHECK(four.size(-1) == 5);
  CHECK(four.size(0) == 2);

  const Tensor empty = tg::zeros({2, 0, 3});
  CHECK(empty.numel() == 0);
  CHECK(empty.to_vector<float>().empty());
  CHECK(tg::tensor({}, {0}).numel() == 0);
}

TEST_CASE("tensor() fills row-major values; an empty shape means 1-d", "[core][tensor]") {
  const Tensor t = tg::tensor({1, 2, 3, 4, 5, 6}, {3, 2}, tg::kFloat64);
  CHECK(t.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(tg::tensor({1, 2, 3}).shape() == tg::Shape{3});
}

TEST_CASE("to() converts dtypes and returns the same handle when they match", "[core][tensor]") {
  const Tensor f = tg::tensor({0.1, 1.5, -2.0});
  const Tensor d = f.to(tg::kFloat64);
  CHECK(d.to_vector<double>() == std::vector<double>{static_cast<float>(0.1), 1.5, -2.0});
  CHECK(f.to(tg::kFloat32).is_same(f));
  CHECK(d.to(tg::kFloat32).to_vector<float>() == f.to_vector<float>());
}

TEST_CASE("*_like creation and clone", "[core][tensor]") {
  const Tensor x = tg::tensor({1, 2}, {2, 1}, tg::kFloat64);
  CHECK(tg::zeros_like(x).shape() == x.shape());
  CHECK(tg::ones_like(x).dtype() == tg::kFloat64);
  CHECK(tg::full_like(x, 4.0).to_vector<double>() == std::vector<double>{4, 4});
  const Tensor c = x.clone();
  CHECK(c.to_vector<double>() == x.to_vector<double>());
  CHECK(c.data<double>() != x.data<double>());
}

TEST_CASE("in-place initialisers", "[core][tensor]") {
  Tensor t = tg::empty({1000}, tg::kFloat64);
  t.uniform_(2.0, 3.0);
  for (double v : t.to_vector<double>()) CHECK((v >= 2.0 && v < 3.0));
  t.normal_(10.0, 0.0);
  CHECK(t.to_vector<double>() == std::vector<double>(1000, 10.0));
  t.zero_();
  CHECK(t.sum().item() == 0.0);
  t.copy_(tg::ones({1000}, tg::kFloat64));
  CHECK(t.sum().item() == 1000.0);
}

TEST_CASE("data pointers are 64-byte aligned", "[core][tensor]") {
  const Tensor t = tg::ones({7});
  CHECK(reinterpret_cast<uintptr_t>(t.data<float>()) % 64 == 0);
}
