// Slice assignment and in-place arithmetic: Tensor::index and index_put_ (tg::indexing), slice_scatter
// and select_scatter, add_/sub_/mul_/div_ and their operators, and the write-back of narrow, select,
// slice and index results. Values by hand, PyTorch fixtures (make_index_put_fixtures.py),
// gradcheck and gradgradcheck in float64, PyTorch's refusals (leaf, version counter), the errors,
// and the same bits at 1, 2, 3 and 8 threads.
#include "core_test_util.hpp"
#include "support/dim_ops.hpp"
#include "tensor_impl.hpp"

using Catch::Contains;
using tg::Tensor;
using tg::indexing::Ellipsis;
using tg::indexing::None;
using tg::indexing::Slice;
using tg::testing::fixture;
using tg::testing::fixture_tol;
using tg::testing::leaf;
using tg::testing::random_leaf;

namespace {

std::vector<double> values_of(const Tensor& t) { return t.to(tg::kFloat64).to_vector<double>(); }

// 0, 1, 2, ... in `shape`, float64.
Tensor iota(const tg::Shape& shape) {
  return tg::arange(0, tg::zeros(shape).numel(), 1, tg::kFloat64).reshape(shape);
}

}  // namespace

TEST_CASE("index: integers, slices, None and Ellipsis by hand", "[core][index_put]") {
  const Tensor x = iota({2, 3, 4});  // x[i, j, k] = 12 i + 4 j + k
  Tensor a = x.index({1, Slice(None, None, 2), -1});
  CHECK(a.shape() == tg::Shape{2});
  CHECK(values_of(a) == std::vector<double>{15, 23});
  Tensor b = x.index({Ellipsis, None, 0});
  CHECK(b.shape() == tg::Shape{2, 3, 1});
  CHECK(values_of(b) == std::vector<double>{0, 4, 8, 12, 16, 20});
  CHECK(x.index({None}).shape() == tg::Shape{1, 2, 3, 4});
  Tensor c = x.index({Slice(-1, None), Slice(1, -1), Slice(-3, None, 2)});
  CHECK(c.shape() == tg::Shape{1, 1, 2});
  CHECK(values_of(c) == std::vector<double>{17, 19});
  CHECK(x.index({0, Slice(5, 9)}).shape() == tg::Shape{0, 4});  // clamped, as Python's slices
  CHECK(values_of(x.index({-2, -3, -4})) == std::vector<double>{0});
  CHECK(x.index({}).shape() == x.shape());
  // Differentiable: the gradient lands on the selected elements.
  Tensor w = iota({3, 4}).requires_grad_();
  w.index({Slice(1, None), Slice(None, None, 3)}).sum().backward();
  CHECK(values_of(w.grad()) == std::vector<double>{0, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1});
}

TEST_CASE("index_put_ by hand: numbers, broadcast values, negative indices, steps", "[core][index_put]") {
  Tensor x = tg::zeros({3, 4}, tg::kFloat64);
  x.index_put_({Slice(1, None), Slice(None, None, 2)}, 7);
  CHECK(values_of(x) == std::vector<double>{0, 0, 0, 0, 7, 0, 7, 0, 7, 0, 7, 0});
  x.index_put_({-1, -1}, -2.5);
  CHECK(values_of(x.index({2})) == std::vector<double>{7, 0, 7, -2.5});

  // A [4] value broadcast over the region [2, 4] = x3[:, 1, :].
  Tensor x3 = tg::zeros({2, 3, 4});
  const Tensor v = tg::tensor({1, 2, 3, 4});
  x3.index_put_({Ellipsis, 1, Slice()}, v);
  CHECK(values_of(x3.index({Slice(), 1})) == std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4});
  CHECK(x3.sum().item() == 20);
  // Leading size-1 dims beyond the region's are dropped, as PyTorch does.
  x3.index_put_({0, 0}, v.reshape({1, 1, 4}) * 10.0);
  CHECK(values_of(x3.index({0, 0})) == std::vector<double>{10, 20, 30, 40});
  // int64 and bool tensors take numbers too.
  Tensor counts = tg::zeros({5}, tg::kInt64);
  counts.index_put_({Slice(1, 4)}, 3);
  CHECK(counts.to_vector<int64_t>() == std::vector<int64_t>{0, 3, 3, 3, 0});
  Tensor mask = tg::zeros({4}, tg::kBool);
  mask.index_put_({Slice(None, None, 3)}, 1);
  CHECK(mask.to_vector<bool>() == std::vector<bool>{true, false, false, true});
  // The value may share the tensor's bytes: it is read before the write.
  Tensor row = iota({2, 3});
  row.index_put_({0}, row.view({2, 3}).index({1}));
  CHECK(values_of(row) == std::vector<double>{3, 4, 5, 3, 4, 5});
}

TEST_CASE("writes through narrow, select, slice and index results reach the source", "[core][index_put]") {
  SECTION("the issue's example: x[i, 0, r:r+4, c:c+4] += 3") {
    Tensor x = tg::zeros({2, 1, 8, 8});
    const int64_t i = 1, r = 2, c = 3;
    x.index({i, 0, Slice(r, r + 4), Slice(c, c + 4)}) += 3;
    CHECK(x.sum().item() == 48);
    CHECK(x.index({1, 0, 2, 3}).item() == 3);
    CHECK(x.index({1, 0, 5, 6}).item() == 3);
    CHECK(x.index({1, 0, 6, 3}).item() == 0);
    CHECK(x.index({0}).sum().item() == 0);
  }
  SECTION("narrow(...).copy_, select(...).fill_, slice(...).zero_, operator=") {
    Tensor x = tg::ones({4, 3}, tg::kFloat64);
    x.narrow(0, 1, 2).copy_(iota({2, 3}));
    CHECK(values_of(x) == std::vector<double>{1, 1, 1, 0, 1, 2, 3, 4, 5, 1, 1, 1});
    x.select(1, -1).fill_(9);
    CHECK(values_of(x) == std::vector<double>{1, 1, 9, 0, 1, 9, 3, 4, 9, 1, 1, 9});
    x.slice(0, 0, None, 3).zero_();
    CHECK(values_of(x) == std::vector<double>{0, 0, 0, 0, 1, 9, 3, 4, 9, 0, 0, 0});
    x.index({Slice(), 0}) = 5.0;
    x.index({1}) = tg::tensor({7, 8, 6}, {}, tg::kFloat64);
    CHECK(values_of(x) == std::vector<double>{5, 0, 0, 7, 8, 6, 5, 4, 9, 5, 0, 0});
    x.narrow(1, 1, 2) *= 2;
    x.narrow(1, 1, 2) -= 1;
    x.select(0, 2) /= 5;
    CHECK(values_of(x) == std::vector<double>{5, -1, -1, 7, 15, 11, 1, 1.4, 3.4, 5, -1, -1});
  }
  SECTION("a chain of slicing ops writes back to the root after the intermediate copies are gone") {
    Tensor x = tg::zeros({4, 3});
    x.narrow(0, 1, 3).select(1, 0).index({Slice(None, None, 2)}).fill_(9);
    CHECK(values_of(x.select(1, 0)) == std::vector<double>{0, 9, 0, 9});
    // A view of a slicing result writes back too.
    x.narrow(0, 0, 2).view({6}).index({Slice(1, 3)}).fill_(4);
    CHECK(values_of(x.index({0})) == std::vector<double>{0, 4, 4});
    // The random initialisers as well.
    x.select(0, 3).uniform_(10, 11);
    CHECK(x.index({3}).min().item() >= 10);
  }
  SECTION("two copies of disjoint regions may both write back") {
    Tensor x = tg::zeros({2, 2});
    Tensor top = x.narrow(0, 0, 1), bottom = x.narrow(0, 1, 1);
    top.fill_(1);
    bottom.fill_(2);  // x was written since bottom was taken, but not inside bottom's region
    CHECK(values_of(x) == std::vector<double>{1, 1, 2, 2});
    bottom.add_(1);  // bottom itself keeps its region up to date
    CHECK(values_of(x) == std::vector<double>{1, 1, 3, 3});
  }
  SECTION("the copy does not see later writes to its source (unlike a PyTorch view)") {
    Tensor x = tg::zeros({3});
    const Tensor first = x.narrow(0, 0, 1);
    x.fill_(5);
    CHECK(first.item() == 0);
  }
}

TEST_CASE("slice_scatter and select_scatter by hand", "[core][index_put]") {
  const Tensor x = tg::zeros({3, 4}, tg::kFloat64);
  const Tensor s = tg::slice_scatter(x, tg::ones({3, 2}, tg::kFloat64), 1, 1, None, 2);
  CHECK(values_of(s) == std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  const Tensor r = tg::slice_scatter(x, iota({1, 4}), 0, -1);
  CHECK(values_of(r.index({2})) == std::vector<double>{0, 1, 2, 3});
  const Tensor c = tg::select_scatter(x, tg::tensor({7, 8, 9}, {}, tg::kFloat64), 1, -2);
  CHECK(values_of(c.select(1, 2)) == std::vector<double>{7, 8, 9});
  CHECK(c.sum().item() == 24);
  CHECK(x.sum().item() == 0);  // out of place
}

TEST_CASE("in-place arithmetic by hand", "[core][index_put]") {
  Tensor a = tg::tensor({1, 2, 3, 4}, {2, 2}, tg::kFloat64);
  a += tg::tensor({10, 20}, {}, tg::kFloat64);  // broadcast over the rows
  CHECK(values_of(a) == std::vector<double>{11, 22, 13, 24});
  a.sub_(tg::tensor({1, 2}, {2, 1}, tg::kFloat64), 0.5);
  CHECK(values_of(a) == std::vector<double>{10.5, 21.5, 12, 23});
  a *= 2;
  a /= tg::full({2, 2}, 4, tg::kFloat64);
  a -= 0.25;
  CHECK(values_of(a) == std::vector<double>{5, 10.5, 5.75, 11.25});
  a.add_(tg::ones({2}, tg::kFloat64), -1.0).mul_(tg::tensor({2, 0}, {}, tg::kFloat64)).div_(0.5);
  CHECK(values_of(a) == std::vector<double>{16, 0, 19, 0});
}

TEST_CASE("in-place ops follow PyTorch's autograd rules", "[core][index_put]") {
  SECTION("a leaf that requires grad is refused in grad mode, allowed under NoGradGuard") {
    Tensor w = tg::ones({2, 2}).requires_grad_();
    REQUIRE_THROWS_WITH(w.add_(1), Contains("add_") &&
                                       Contains("a leaf Variable that requires grad is being used in an in-place "
                                                "operation") &&
                                       Contains("[2, 2]"));
    REQUIRE_THROWS_WITH(w *= w, Contains("mul_"));
    REQUIRE_THROWS_WITH(w.index_put_({0}, 3), Contains("index_put_") && Contains("leaf Variable"));
    REQUIRE_THROWS_WITH(w.narrow(0, 0, 1).fill_(0), Contains("fill_") && Contains("view of a leaf Variable"));
    REQUIRE_THROWS_WITH(w.index({1}) += 1, Contains("add_") && Contains("view of a leaf Variable"));
    CHECK(values_of(w) == std::vector<double>{1, 1, 1, 1});  // nothing half written
    {
      tg::NoGradGuard no_grad;
      w.sub_(tg::full({2, 2}, 0.5), 2.0);  // how an optimizer writes
      w.index({1, 1}) += 5;
    }
    CHECK(values_of(w) == std::vector<double>{0, 0, 0, 5});
    CHECK(w.is_leaf());
  }
  SECTION("on a non-leaf the op becomes the grad_fn; the source of a copy becomes CopySlices") {
    Tensor x = random_leaf({3, 4});
    Tensor y = x * 1.0;
    y.add_(2);
    CHECK(std::string(y.grad_fn_name()) == "AddBackward");
    y.index_put_({0}, 0.0);
    CHECK(std::string(y.grad_fn_name()) == "IndexPutBackward");
    y.narrow(1, 0, 2).mul_(3);
    CHECK(std::string(y.grad_fn_name()) == "CopySlices");
    y.sum().backward();
    CHECK(values_of(x.grad()) == std::vector<double>{0, 0, 0, 0, 3, 3, 1, 1, 3, 3, 1, 1});
  }
  SECTION("a tensor that needs no gradient becomes part of the graph when a value that does is written") {
    Tensor buffer = tg::zeros({2, 3}, tg::kFloat64);
    Tensor v = random_leaf({3});
    buffer.index({1}) += v;
    CHECK_FALSE(buffer.is_leaf());
    CHECK(buffer.requires_grad());
    (buffer * 2.0).sum().backward();
    CHECK(values_of(v.grad()) == std::vector<double>{2, 2, 2});
  }
  SECTION("the version counter: a backward that saved the old values refuses to run") {
    Tensor x = random_leaf({3});
    Tensor y = x.exp();
    y.add_(1);  // exp saved its output
    REQUIRE_THROWS_WITH(y.sum().backward(), Contains("ExpBackward") && Contains("modified by an in-place operation"));
    Tensor z = x * 1.0;
    Tensor squared = z * z;
    z.index({0}) += 1;  // written back into z, which MulBackward saved
    REQUIRE_THROWS_WITH(squared.sum().backward(), Contains("MulBackward") && Contains("modified by an in-place"));
    // mul_ and div_ keep what their own gradient needs.
    Tensor u = x * 1.0;
    u.mul_(u.detach() + 1.0);
    u.div_(2.0);
    u.sum().backward();
    REQUIRE(x.grad().defined());
  }
  SECTION("fill_ cuts the gradient to the old values; copy_ passes it to the source") {
    Tensor x = random_leaf({2, 2}), s = random_leaf({2});
    Tensor y = x * 1.0;
    y.select(0, 0).fill_(1);
    y.select(0, 1).copy_(s * 3.0);
    CHECK(std::string(y.grad_fn_name()) == "CopySlices");
    y.sum().backward();
    CHECK(values_of(x.grad()) == std::vector<double>{0, 0, 0, 0});
    CHECK(values_of(s.grad()) == std::vector<double>{3, 3});
  }
}

TEST_CASE("slice assignment errors name the function and what is wrong", "[core][index_put][errors]") {
  Tensor x = tg::zeros({2, 3});
  REQUIRE_THROWS_WITH(x.index({2}), Contains("index") && Contains("index 2 is out of bounds for dim 0 with size 2"));
  REQUIRE_THROWS_WITH(x.index({0, -4}), Contains("index") && Contains("-4") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.index({0, 0, 0}), Contains("index") && Contains("too many indices") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.index({Ellipsis, 0, Ellipsis}), Contains("index") && Contains("single Ellipsis"));
  REQUIRE_THROWS_WITH(x.index({Slice(None, None, 0)}), Contains("index") && Contains("step must be positive"));
  REQUIRE_THROWS_WITH(x.index_put_({5}, 1.0), Contains("index_put_") && Contains("out of bounds"));
  REQUIRE_THROWS_WITH(x.index_put_({0}, tg::ones({2})),
                      Contains("index_put_") && Contains("[2]") && Contains("cannot be broadcast") && Contains("[3]"));
  REQUIRE_THROWS_WITH(x.index_put_({0}, tg::ones({3}, tg::kFloat64)),
                      Contains("index_put_") && Contains("float64") && Contains(".to(tg::kFloat32)"));
  REQUIRE_THROWS_WITH(x.index_put_({0}, Tensor()), Contains("index_put_") && Contains("undefined"));
  REQUIRE_THROWS_WITH(x.add_(tg::ones({3}, tg::kFloat64)), Contains("add_") && Contains(".to(tg::kFloat32)"));
  REQUIRE_THROWS_WITH(x.add_(tg::ones({2, 2, 3})),
                      Contains("add_") && Contains("[2, 2, 3]") && Contains("does not broadcast") && Contains("[2, 3]"));
  REQUIRE_THROWS_WITH(x.mul_(tg::ones({4})), Contains("mul_") && Contains("[4]"));
  Tensor ints = tg::zeros({3}, tg::kInt64);
  REQUIRE_THROWS_WITH(ints.div_(2), Contains("div_") && Contains("int64") && Contains(".to(tg::kFloat32)"));
  REQUIRE_THROWS_WITH(tg::slice_scatter(x, tg::ones({2, 1}), 1, 0, None, 2),
                      Contains("slice_scatter") && Contains("expected src of shape [2, 2]") && Contains("[2, 1]"));
  REQUIRE_THROWS_WITH(tg::slice_scatter(x, tg::ones({2, 3}), 0, 0, None, 0), Contains("slice_scatter") && Contains("step"));
  REQUIRE_THROWS_WITH(tg::select_scatter(x, tg::ones({3}), 0, 2), Contains("select_scatter") && Contains("index 2"));
  REQUIRE_THROWS_WITH(tg::select_scatter(x, tg::ones({3}, tg::kFloat64), 0, 1),
                      Contains("select_scatter") && Contains(".to(tg::kFloat32)"));
  CHECK(x.sum().item() == 0);  // no failed call wrote anything
}

TEST_CASE("write-backs that cannot be done safely throw instead of writing into the copy", "[core][index_put][errors]") {
  SECTION("the source was written inside the region since the copy was taken") {
    Tensor x = tg::zeros({4});
    Tensor head = x.narrow(0, 0, 2);
    x.index_put_({0}, 5.0);
    REQUIRE_THROWS_WITH(head.add_(1), Contains("add_") && Contains("written in place since") &&
                                          Contains("index_put_"));
    CHECK(values_of(x) == std::vector<double>{5, 0, 0, 0});
  }
  SECTION("the source was given new storage") {
    Tensor x = tg::zeros({4});
    Tensor head = x.narrow(0, 0, 2);
    tg::detail::set_data(x, tg::ones({4}));
    REQUIRE_THROWS_WITH(head.fill_(3), Contains("fill_") && Contains("new storage"));
  }
  SECTION("a recorded write to one of two live views of one storage") {
    Tensor x = random_leaf({2, 3});
    Tensor y = x.exp();
    Tensor flat = y.view({6});
    REQUIRE_THROWS_WITH(flat.add_(1), Contains("add_") && Contains("shares its storage") && Contains("clone()"));
    REQUIRE_THROWS_WITH(y.index({0}).fill_(0), Contains("fill_") && Contains("shares its storage"));
    // Once the other view is gone the write is fine.
    flat = Tensor();
    y.add_(1);
    CHECK(std::string(y.grad_fn_name()) == "AddBackward");
  }
}

TEST_CASE("slice assignment matches PyTorch forward and backward", "[core][index_put][fixture]") {
  const std::string name = GENERATE(as<std::string>{}, "region_add", "ellipsis_step_put", "slice_scatter",
                                    "select_scatter", "arith_nonleaf", "narrow_copy_fill", "none_chain_mul");
  const std::string suffix = GENERATE(as<std::string>{}, "_f32", "_f64");
  const auto& c = fixture("index_put.txt", name + suffix);
  INFO(c.name);
  const double tol = fixture_tol(c.at("x").dtype());
  Tensor x = leaf(c.at("x"));
  std::vector<std::pair<std::string, Tensor>> inputs{{"x", x}};
  Tensor y;
  if (name == "region_add") {
    Tensor v = leaf(c.at("v"));
    inputs.emplace_back("v", v);
    Tensor t = x.clone();
    t.index({1, 0, Slice(1, 5), Slice(2, 6)}) += v;
    y = t * t;
  } else if (name == "ellipsis_step_put") {
    Tensor v = leaf(c.at("v"));
    inputs.emplace_back("v", v);
    Tensor t = x * 2.0;
    t.index_put_({Ellipsis, -1, Slice(None, None, 2)}, v);
    y = t.exp();
  } else if (name == "slice_scatter" || name == "select_scatter") {
    Tensor src = leaf(c.at("src")), w = leaf(c.at("w"));
    inputs.emplace_back("src", src);
    inputs.emplace_back("w", w);
    y = (name == "slice_scatter" ? tg::slice_scatter(x, src, 1, 1, None, 2) : tg::select_scatter(x, src, 0, -1)) * w;
  } else if (name == "arith_nonleaf") {
    Tensor w = leaf(c.at("w")), z = leaf(c.at("z"));
    inputs.emplace_back("w", w);
    inputs.emplace_back("z", z);
    Tensor t = x + 0.0;
    t.mul_(w);
    t.div_(z);
    t.sub_(w, 0.5);
    t.add_(2.0);
    y = t * t;
  } else if (name == "narrow_copy_fill") {
    Tensor s = leaf(c.at("s"));
    inputs.emplace_back("s", s);
    Tensor t = x * 1.0;
    t.narrow(0, 1, 2).copy_(s);
    t.select(1, 0).fill_(0);
    y = t * t;
  } else {
    Tensor v = leaf(c.at("v"));
    inputs.emplace_back("v", v);
    Tensor t = x.clone();
    t.index({None, 0}).index({Slice(), Slice(1, 3)}) *= v;
    y = t * t;
  }
  TG_REQUIRE_NEAR(y, c.at("y"), tol);
  y.backward(c.at("dy"));
  for (const auto& [input_name, input] : inputs) {
    INFO("d" << input_name);
    TG_REQUIRE_NEAR(input.grad(), c.at("d" + input_name), tol);
  }
}

TEST_CASE("slice assignment passes gradcheck and gradgradcheck in float64", "[core][index_put][gradcheck]") {
  using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<std::pair<const char*, Fn>> cases{
      {"index_put_ with a broadcast value",
       [](const std::vector<Tensor>& in) {
         Tensor t = in[0] * in[0];
         t.index_put_({Slice(None, None, 2), Ellipsis, -1}, in[1].tanh());
         return t * in[0];
       }},
      {"slice_scatter",
       [](const std::vector<Tensor>& in) {
         // src: [2, 3, 1], the last column of a [2, 3, 3] tensor
         return tg::slice_scatter(in[0] * in[0], in[0].index({Ellipsis, Slice(0, 1)}) * in[1].index({Slice(), None}), 2, -1) *
                in[0];
       }},
      {"select_scatter",
       [](const std::vector<Tensor>& in) {
         return tg::select_scatter(in[0].exp(), in[0].select(2, 0) * in[1].tanh(), 2, 1) * in[0];
       }},
      {"add_, sub_, mul_, div_ on a non-leaf",
       [](const std::vector<Tensor>& in) {
         Tensor t = in[0] * 1.0;
         t.mul_(in[0]);
         t.add_(in[1], 0.5);
         t.div_(in[0].pow(2.0) + 1.0);
         t *= in[1];
         t -= 0.5;
         return t;
       }},
      {"a write-back chain (narrow, select, index) with mul_, copy_ and fill_",
       [](const std::vector<Tensor>& in) {
         Tensor t = in[0] * in[0];  // MulBackward saves x, not t: t may be written
         t.narrow(0, 0, 2).select(1, 1).index({Slice(1, None)}) *= in[1];
         t.select(2, 0).narrow(0, 1, 1).copy_(in[0].index({Slice(0, 1), Slice(), 1}) * 2.0);
         t.index({Ellipsis, 2}).fill_(0.5);
         return t * t;
       }},
  };
  for (const auto& [label, fn] : cases) {
    INFO(label);
    tg::manual_seed(5);
    const Tensor x = random_leaf({2, 3, 3}), v = random_leaf({3});
    CHECK(tg::gradcheck(fn, {x, v}));
    CHECK(tg::gradgradcheck(fn, {x, v}));
  }
}

TEST_CASE("slice assignment gives the same bits at any thread count", "[core][index_put][threads]") {
  tg::testing::require_same_bits_at_any_thread_count([] {
    tg::manual_seed(17);
    Tensor x = tg::randn({64, 33, 40}).requires_grad_();
    Tensor v = tg::randn({33, 1}).requires_grad_();
    Tensor t = x * 2.0;
    t.index({Slice(1, None, 3), Slice(), Slice(2, -2)}) += v;
    t.select(2, 0).mul_(x.select(2, 1));
    (t * t).sum().backward();
    return std::vector<Tensor>{t.detach(), x.grad(), v.grad()};
  });
}
