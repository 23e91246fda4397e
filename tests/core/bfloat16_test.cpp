// The bfloat16 dtype: the element type's rounding (hand-derived bits), the vectorised row
// conversions at every vector level, creation and random draws against PyTorch
// (tests/fixtures/bfloat16.txt, make_bfloat16_fixtures.py), the ops that only move values,
// printing (strings printed by torch 1.13), type promotion (torch.result_type), the ops that compute
// bfloat16 in float32 against PyTorch's bfloat16 results, and the refusals that name the cast.
// The conversions between dtypes are in dtype_test.cpp (dtype_conversions.txt), the elementwise
// ops' bfloat16 rows in elementwise_opinfo_test.cpp.
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bfloat16_kernels.hpp"
#include "core_test_util.hpp"
#include "support/bfloat16_ulps.hpp"
#include "support/tensor_equal.hpp"
#include "support/vector_isa_levels.hpp"

using tg::BFloat16;
using tg::Tensor;
using tg::testing::fixture;

namespace {

uint16_t bits_of(float value) { return BFloat16(value).bits; }
float float_of_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

// A fixture's float64 values as a bfloat16 tensor (exact: they are bfloat16 values).
Tensor bf16(const tg::testing::FixtureCase& c, const std::string& key) { return c.at(key).to(tg::kBFloat16); }

std::string str(const Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

}  // namespace

TEST_CASE("bfloat16: the dtype's name, size and kind", "[core][bfloat16]") {
  CHECK(tg::name(tg::kBFloat16) == "bfloat16");
  CHECK(tg::element_size(tg::kBFloat16) == 2);
  CHECK(tg::is_floating_point(tg::kBFloat16));
  CHECK(tg::dtype_of<BFloat16>() == tg::kBFloat16);
  CHECK(sizeof(BFloat16) == 2);
  CHECK(std::numeric_limits<BFloat16>::digits == 8);
  CHECK(static_cast<float>(std::numeric_limits<BFloat16>::max()) == 0x1.FEp127f);
  CHECK(static_cast<float>(std::numeric_limits<BFloat16>::epsilon()) == 0x1p-7f);
  CHECK(static_cast<float>(std::numeric_limits<BFloat16>::denorm_min()) == 0x1p-133f);
}

TEST_CASE("bfloat16: float32 rounds to nearest even, as c10's round_to_nearest_even", "[core][bfloat16]") {
  // 1 + 2^-8 lies halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): to even, down.
  CHECK(bits_of(1.0f + 0x1p-8f) == 0x3F80);
  // 1 + 3·2^-8 lies halfway between 0x3F81 (odd) and 0x3F82 (even): up.
  CHECK(bits_of(1.0f + 3 * 0x1p-8f) == 0x3F82);
  CHECK(bits_of(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);  // past the tie: up
  CHECK(bits_of(-(1.0f + 0x1p-8f)) == 0xBF80);
  CHECK(bits_of(-0.0f) == 0x8000);
  CHECK(bits_of(INFINITY) == 0x7F80);
  CHECK(bits_of(-INFINITY) == 0xFF80);
  // Every NaN, whatever its sign and payload, becomes the quiet NaN 0x7FC0.
  CHECK(bits_of(NAN) == 0x7FC0);
  CHECK(bits_of(-NAN) == 0x7FC0);
  CHECK(bits_of(float_of_bits(0x7F800001)) == 0x7FC0);  // a signalling NaN that rounding would make inf
  CHECK(bits_of(float_of_bits(0xFFFFFFFF)) == 0x7FC0);
  // Denormals are kept and rounded like any value: 2^-133 is the smallest bfloat16 denormal; half of
  // it is a tie that rounds to even (0), three halves round up to 2·2^-133.
  CHECK(bits_of(0x1p-133f) == 0x0001);
  CHECK(bits_of(0x1p-134f) == 0x0000);
  CHECK(bits_of(3 * 0x1p-134f) == 0x0002);
  CHECK(bits_of(0x1p-149f) == 0x0000);
  // The largest finite value, and the rounding point past it: the carry reaches the exponent, inf.
  CHECK(bits_of(0x1.FEp127f) == 0x7F7F);
  CHECK(bits_of(0x1.FEFFFEp127f) == 0x7F7F);
  CHECK(bits_of(0x1.FFp127f) == 0x7F80);
  CHECK(bits_of(std::numeric_limits<float>::max()) == 0x7F80);
  // bfloat16 → float is exact: the bits moved up.
  CHECK(static_cast<float>(BFloat16::from_bits(0x3F81)) == 1.0f + 0x1p-7f);
  CHECK(std::isnan(static_cast<float>(BFloat16::from_bits(0x7FC0))));
  // double → bfloat16 goes through float (two roundings), as PyTorch: 1 + 2^-8 + 2^-40 is past the
  // tie as a double but rounds to the tie itself as a float, then to even.
  CHECK(static_cast<BFloat16>(1.0 + 0x1p-8 + 0x1p-40).bits == 0x3F80);
}

TEST_CASE("bfloat16: the row conversions give BFloat16's bits at every vector level", "[core][bfloat16][vector_isa]") {
  // Every bfloat16 pattern in the upper half, with lower halves at and around the rounding point
  // (ties, one off each side) and the extremes: NaN payloads, denormals, the rounding to inf.
  std::vector<float> in;
  for (uint32_t upper = 0; upper < 0x10000; ++upper)
    for (uint32_t lower : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xC000u, 0xFFFFu})
      in.push_back(float_of_bits(upper << 16 | lower));
  std::vector<uint16_t> expected(in.size());
  for (size_t i = 0; i < in.size(); ++i) expected[i] = bits_of(in[i]);
  const int64_t n = static_cast<int64_t>(in.size());
  tg::testing::require_same_at_every_level_and_thread_count([&] {
    std::vector<BFloat16> out(in.size());
    tg::detail::float_to_bfloat16(in.data(), out.data(), n);
    std::vector<uint16_t> bits(in.size());
    std::memcpy(bits.data(), out.data(), bits.size() * 2);
    CHECK(bits == expected);
    // And back: exact.
    std::vector<float> back(in.size());
    tg::detail::bfloat16_to_float(out.data(), back.data(), n);
    bool exact = true;
    for (size_t i = 0; i < in.size(); ++i)
      exact = exact && std::bit_cast<uint32_t>(back[i]) == static_cast<uint32_t>(bits[i]) << 16;
    CHECK(exact);
    return bits;
  });
}

TEST_CASE("bfloat16: creation, arange and random draws give PyTorch's values", "[core][bfloat16][fixture]") {
  CHECK(tg::zeros({2, 3}, tg::kBFloat16).dtype() == tg::kBFloat16);
  TG_REQUIRE_EQUAL(tg::ones({3}, tg::kBFloat16).to(tg::kFloat32), tg::ones({3}));
  // full rounds the value once through float: torch.full((2,), 0.1, dtype=torch.bfloat16) holds 0.10009765625.
  CHECK(tg::full({2}, 0.1, tg::kBFloat16).to_vector<BFloat16>()[1].bits == 0x3DCD);
  CHECK(tg::tensor({1.0, 2.5, -0.1}, {3}, tg::kBFloat16).to_vector<BFloat16>()[2].bits == 0xBDCD);
  CHECK(tg::scalar_tensor(-0.1, tg::kBFloat16).item() == -0.10009765625);
  CHECK(tg::zeros_like(tg::ones({2}, tg::kBFloat16)).dtype() == tg::kBFloat16);
  // A std::vector of BFloat16 keeps its bits; of float, it is rounded once.
  const std::vector<BFloat16> halves = {BFloat16::from_bits(0x3F81), BFloat16::from_bits(0x7FC0)};
  CHECK(tg::tensor(halves).dtype() == tg::kBFloat16);
  CHECK(tg::tensor(halves).to_vector<BFloat16>()[0].bits == 0x3F81);
  CHECK(tg::tensor(std::vector<float>{1.0f + 0x1p-8f}, {}, tg::kBFloat16).to_vector<BFloat16>()[0].bits == 0x3F80);
  CHECK(tg::empty({4}, tg::kBFloat16).numel() == 4);
  for (const char* name : {"arange_0_10_0p1", "arange_1p3_50p7_0p37", "arange_m3_300_1p1", "arange_0_5_1"}) {
    INFO(name);
    const auto& c = fixture("bfloat16.txt", name);
    const Tensor y = tg::arange(c.scalar("start"), c.scalar("end"), c.scalar("step"), tg::kBFloat16);
    TG_REQUIRE_EQUAL(y, bf16(c, "y"));
  }
  for (int n : {5, 16, 37}) {
    INFO(n << " values");
    tg::manual_seed(7);
    TG_REQUIRE_EQUAL(tg::rand({n}, tg::kBFloat16), bf16(fixture("bfloat16.txt", "rand_" + std::to_string(n)), "y"));
    tg::manual_seed(11);
    TG_REQUIRE_EQUAL(tg::randn({n}, tg::kBFloat16), bf16(fixture("bfloat16.txt", "randn_" + std::to_string(n)), "y"));
  }
  tg::manual_seed(3);
  Tensor u = tg::empty({20}, tg::kBFloat16);
  u.uniform_(-1.3, 2.7);
  TG_REQUIRE_EQUAL(u, bf16(fixture("bfloat16.txt", "uniform_20"), "y"));
}

TEST_CASE("bfloat16: .to() is differentiable both ways and item/to_vector read the values", "[core][bfloat16]") {
  const Tensor x = tg::tensor({1.0, -2.5, 3.0}, {3}, tg::kBFloat16).requires_grad_();
  // A bfloat16 leaf's gradient is bfloat16, as in PyTorch: 0.1 rounded once on the way back.
  (x.to(tg::kFloat32) * tg::tensor({0.1f, 1.0f, 2.0f})).sum().backward();
  REQUIRE(x.grad().dtype() == tg::kBFloat16);
  CHECK(x.grad().to_vector<BFloat16>()[0].bits == 0x3DCD);
  CHECK(x.grad().to_vector<BFloat16>()[2] == BFloat16(2.0f));
  // float32 → bfloat16: the gradient comes back to float32 (exactly: bfloat16 → float32 is exact).
  const Tensor w = tg::tensor({0.3f, 1.0f}).requires_grad_();
  const Tensor rounded = w.to(tg::kBFloat16);
  CHECK(rounded.to_vector<BFloat16>()[0] == BFloat16(0.3f));
  (rounded * 3.0).sum().backward();
  REQUIRE(w.grad().dtype() == tg::kFloat32);
  CHECK(w.grad().to_vector<float>() == std::vector<float>{3.0f, 3.0f});
  // item in every type, converted as .to() converts; item() is exact.
  const Tensor one = tg::scalar_tensor(2.75, tg::kBFloat16);
  CHECK(one.item() == 2.75);
  CHECK(one.item<float>() == 2.75f);
  CHECK(one.item<int64_t>() == 2);
  CHECK(one.item<bool>());
  CHECK(one.item<BFloat16>().bits == 0x4030);
  REQUIRE_THROWS_WITH(tg::scalar_tensor(INFINITY, tg::kBFloat16).item<int64_t>(), Catch::Contains("item: cannot convert"));
}

TEST_CASE("bfloat16: the ops that only move values keep the dtype and the bits", "[core][bfloat16]") {
  const Tensor x = tg::arange(0, 6, 1, tg::kBFloat16).reshape({2, 3}) * 0.1;  // 0.1 rounded first
  REQUIRE(x.dtype() == tg::kBFloat16);
  const Tensor x32 = x.to(tg::kFloat32);
  const auto same = [](const Tensor& bf, const Tensor& f32) {
    REQUIRE(bf.dtype() == tg::kBFloat16);
    TG_REQUIRE_EQUAL(bf.to(tg::kFloat32), f32);  // bfloat16 → float32 is exact: equal values, equal bits
  };
  same(x.transpose(0, 1), x32.transpose(0, 1));
  same(x.t().contiguous(), x32.t());
  same(tg::cat({x, x}, 1), tg::cat({x32, x32}, 1));
  same(tg::stack({x, x}, 0), tg::stack({x32, x32}, 0));
  same(x.index({1}), x32.index({1}));
  same(x.narrow(1, 1, 2), x32.narrow(1, 1, 2));
  same(x.flatten(), x32.flatten());
  same(x.unsqueeze(0).expand({2, 2, 3}), x32.unsqueeze(0).expand({2, 2, 3}));
  same(x.clone(), x32);
  same(tg::where(x > 0.25, x, tg::zeros_like(x)), tg::where(x32 > 0.25, x32, tg::zeros_like(x32)));
  same(x.masked_fill(x < 0.15, -1.0), x32.masked_fill(x32 < 0.15, -1.0));
  TG_REQUIRE_EQUAL(x == x.clone(), tg::ones({2, 3}, tg::kBool));
  TG_REQUIRE_EQUAL(x.lt(0.25), x32.lt(0.25));
  // The gradient of an expand of a bfloat16 leaf is summed in float32 and rounded once.
  const Tensor leaf = tg::tensor({1.0, 2.0}, {2}, tg::kBFloat16).requires_grad_();
  leaf.unsqueeze(0).expand({3, 2}).to(tg::kFloat32).sum().backward();
  TG_REQUIRE_EQUAL(leaf.grad(), tg::full({2}, 3.0, tg::kBFloat16));
  // Selections pass bfloat16 gradients through; index_select and gather add theirs in float32.
  const Tensor picked = tg::tensor({1.0, 2.0, 3.0}, {3}, tg::kBFloat16).requires_grad_();
  const Tensor rows = tg::tensor(std::vector<int64_t>{2, 0, 2});
  const Tensor chosen = tg::where(tg::tensor(std::vector<bool>{true, false, true}), picked, tg::zeros_like(picked));
  (chosen + picked.index_select(0, rows) + picked.gather(0, rows)).to(tg::kFloat32).sum().backward();
  TG_REQUIRE_EQUAL(picked.grad(), tg::tensor({3.0, 0.0, 5.0}, {3}, tg::kBFloat16));
  // A leaf used twice: its two bfloat16 gradients add in float32, rounded once.
  const Tensor twice = tg::tensor({1.0}, {1}, tg::kBFloat16).requires_grad_();
  (twice * 0.1 + twice * 3.0).sum().backward();
  CHECK(twice.grad().item() == static_cast<double>(BFloat16(static_cast<float>(BFloat16(0.1f)) + 3.0f)));
}

TEST_CASE("bfloat16: printing follows PyTorch and names the dtype", "[core][bfloat16]") {
  // Strings printed by torch 1.13 ("torch.bfloat16" written "bfloat16", as tapegrad names dtypes).
  CHECK(str(tg::tensor({1.5, -2.25, 0.1}, {3}, tg::kBFloat16)) == "tensor([ 1.5000, -2.2500,  0.1001], dtype=bfloat16)");
  CHECK(str(tg::scalar_tensor(3.0, tg::kBFloat16)) == "tensor(3., dtype=bfloat16)");
  CHECK(str(tg::tensor({1, 2, 3, 4}, {2, 2}, tg::kBFloat16)) == "tensor([[1., 2.],\n        [3., 4.]], dtype=bfloat16)");
  CHECK(str(tg::tensor({1e-5, 1000.0}, {2}, tg::kBFloat16)) == "tensor([1.0014e-05, 1.0000e+03], dtype=bfloat16)");
  CHECK(str(tg::zeros({0}, tg::kBFloat16)) == "tensor([], dtype=bfloat16)");
  CHECK(str(tg::tensor({1.5, 2.0}, {2}, tg::kBFloat16).requires_grad_()) ==
        "tensor([1.5000, 2.0000], dtype=bfloat16, requires_grad=True)");
  CHECK(str(tg::tensor({NAN, INFINITY, 3.0}, {3}, tg::kBFloat16)) == "tensor([nan, inf, 3.], dtype=bfloat16)");
}

TEST_CASE("bfloat16: type promotion as torch.result_type", "[core][bfloat16][dtype]") {
  // torch.promote_types: bfloat16 with float32 is float32, with float64 float64, with int64 or
  // bool bfloat16; a 0-d operand raises only the category (torch.result_type).
  const Tensor b = tg::ones({3}, tg::kBFloat16);
  const Tensor mask = tg::tensor(std::vector<bool>{true, false, true});
  CHECK(tg::where(mask, b, tg::ones({3})).dtype() == tg::kFloat32);
  CHECK(tg::where(mask, tg::ones({3}), b).dtype() == tg::kFloat32);
  CHECK(tg::where(mask, b, tg::ones({3}, tg::kFloat64)).dtype() == tg::kFloat64);
  CHECK(tg::where(mask, b, tg::ones({3}, tg::kInt64)).dtype() == tg::kBFloat16);
  CHECK(tg::where(mask, b, tg::ones({3}, tg::kBool)).dtype() == tg::kBFloat16);
  CHECK(tg::where(mask, b, tg::scalar_tensor(2.0)).dtype() == tg::kBFloat16);               // 0-d float32
  CHECK(tg::maximum(b, tg::scalar_tensor(2.0, tg::kFloat64)).dtype() == tg::kBFloat16);      // 0-d float64
  CHECK(tg::maximum(b, tg::ones({3})).dtype() == tg::kFloat32);
  CHECK(tg::maximum(tg::ones({3}, tg::kInt64), tg::scalar_tensor(2.5, tg::kBFloat16)).dtype() == tg::kBFloat16);
  CHECK(tg::maximum(tg::scalar_tensor(1.0, tg::kBFloat16), tg::scalar_tensor(2.0)).dtype() == tg::kFloat32);
  CHECK(tg::atan2(b, tg::ones({3}, tg::kInt64)).dtype() == tg::kBFloat16);
  CHECK(tg::fmod(b, tg::ones({3}, tg::kInt64)).dtype() == tg::kBFloat16);
  CHECK((b * 2.0).dtype() == tg::kBFloat16);  // a number takes the tensor's dtype
  CHECK((b == tg::ones({3})).dtype() == tg::kBool);
  // The float tensors of PyTorch's rule too: float32 with a float64 0-d stays float32.
  CHECK(tg::where(mask, tg::ones({3}), tg::scalar_tensor(2.0, tg::kFloat64)).dtype() == tg::kFloat32);
  // maximum of bfloat16 with float32 computes in float32, the bfloat16 operand's gradient bfloat16.
  const Tensor leaf = tg::tensor({1.0, 5.0, -1.0}, {3}, tg::kBFloat16).requires_grad_();
  tg::maximum(leaf, tg::full({3}, 2.0)).sum().backward();
  TG_REQUIRE_EQUAL(leaf.grad(), tg::tensor({0.0, 1.0, 0.0}, {3}, tg::kBFloat16));
}

TEST_CASE("bfloat16: reductions, softmax and products round once, and match PyTorch's bfloat16 results",
          "[core][bfloat16][fixture]") {
  // Two references per op (make_bfloat16_fixtures.py). The exact one, the op in float64 on the same
  // bfloat16 values: an op computed in float32 and rounded once is within 1 ulp of it, forward and
  // backward (the float32 error is far below half a bfloat16 ulp). And PyTorch's bfloat16 results,
  // which torch 1.13 does not always compute that way: its small bfloat16 products round each
  // product and partial sum to bfloat16 (a·b of [5, 6]·[6, 3] is exact in 27% of elements), and its
  // log_softmax rounds x − max first; so they are compared normwise, within 8 ulps of the largest
  // value (products of 4 to 6 terms: one rounding of up to half an ulp of a partial sum per term).
  struct Case {
    const char* name;
    std::function<Tensor(const std::vector<Tensor>&)> fn;
    std::vector<const char*> operands;
  };
  const std::vector<Case> cases = {
      {"softmax", [](const auto& in) { return tg::softmax(in[0], 1); }, {"x"}},
      {"log_softmax", [](const auto& in) { return tg::log_softmax(in[0], 1); }, {"x"}},
      {"logsumexp", [](const auto& in) { return tg::logsumexp(in[0], {1}); }, {"x"}},
      {"sum_all", [](const auto& in) { return in[0].sum(); }, {"x"}},
      {"sum_dim0", [](const auto& in) { return in[0].sum({0}); }, {"x"}},
      {"mean_dim1", [](const auto& in) { return in[0].mean({1}); }, {"x"}},
      {"matmul", [](const auto& in) { return tg::matmul(in[0], in[1]); }, {"a", "b"}},
      {"bmm", [](const auto& in) { return tg::bmm(in[0], in[1]); }, {"a", "b"}},
      {"baddbmm", [](const auto& in) { return tg::baddbmm(in[0], in[1], in[2], 0.5, 2.0); }, {"input", "a", "b"}},
      {"scalar_mul", [](const auto& in) { return in[0] * 0.1; }, {"x"}},
  };
  using tg::testing::require_within_bfloat16_ulps;
  using tg::testing::UlpsOf;
  for (const Case& op : cases) {
    INFO(op.name);
    const auto& c = fixture("bfloat16.txt", op.name);
    std::vector<Tensor> in;
    for (const char* key : op.operands) in.push_back(bf16(c, key).requires_grad_());
    const Tensor y = op.fn(in);
    require_within_bfloat16_ulps(y, c.at("y_f64"), 1);
    require_within_bfloat16_ulps(y, c.at("y"), 8, UlpsOf::Largest);
    y.backward(bf16(c, "dy"));
    for (size_t k = 0; k < in.size(); ++k) {
      const std::string key = std::string("d") + op.operands[k];
      INFO("gradient " << key);
      require_within_bfloat16_ulps(in[k].grad(), c.at(key + "_f64"), 1);
      require_within_bfloat16_ulps(in[k].grad(), c.at(key), 8, UlpsOf::Largest);
    }
  }
}

TEST_CASE("bfloat16: cumsum, max, argmax and in-place arithmetic compute in float32 and round once", "[core][bfloat16]") {
  const Tensor x = tg::tensor({0.1, 3.0, -2.5, 1000.0}, {4}, tg::kBFloat16);
  const Tensor x32 = x.to(tg::kFloat32);
  TG_REQUIRE_EQUAL(x.cumsum(0), x32.cumsum(0).to(tg::kBFloat16));
  TG_REQUIRE_EQUAL(x.max(), x32.max().to(tg::kBFloat16));
  TG_REQUIRE_EQUAL(x.min(0).indices, x32.min(0).indices);
  CHECK(x.argmax().item<int64_t>() == 3);
  Tensor y = x.clone();
  y += x;
  y *= 0.1;  // 0.1 rounded to bfloat16 first, as PyTorch's number operand
  TG_REQUIRE_EQUAL(y, ((x32 + x32).to(tg::kBFloat16).to(tg::kFloat32) * static_cast<double>(BFloat16(0.1f)))
                          .to(tg::kBFloat16));
}

TEST_CASE("bfloat16: ops without a bfloat16 route refuse it, naming the cast", "[core][bfloat16][errors]") {
  const Tensor x = tg::ones({2, 3}, tg::kBFloat16);
  const auto refuses = [](const std::function<void()>& op, const std::string& name) {
    REQUIRE_THROWS_WITH(op(), Catch::StartsWith(name + ": ") && Catch::Contains("bfloat16") &&
                                  Catch::Contains(".to(tg::kFloat32)"));
  };
  refuses([&] { (void)x.sort(1); }, "sort");
  refuses([&] { (void)x.topk(1, 1); }, "topk");
  // .npy has no bfloat16.
  REQUIRE_THROWS_WITH(tg::encode_npy(x), Catch::Contains("save_npy") && Catch::Contains(".to(tg::kFloat32)"));
}

TEST_CASE("bfloat16: + − · / of different dtypes promote as PyTorch, each gradient in its operand's dtype",
          "[core][bfloat16][promotion]") {
  // torch: float32 ∘ bfloat16 is float32, bfloat16 ∘ float64 is float64, float32 [n] ∘ a float64
  // 0-d tensor float32 (a 0-d operand raises only the category); each computed in the promoted
  // dtype on the exactly widened operands.
  const Tensor x = tg::tensor({1.5, -2.25, 3.0}, {3});
  const Tensor y = tg::tensor({0.1, 7.0, -0.3}, {3}).to(tg::kBFloat16);
  const Tensor y32 = y.to(tg::kFloat32);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }}};
  for (const auto& [name, op] : ops) {
    INFO(name);
    const Tensor lx = x.detach().requires_grad_(), ly = y.detach().requires_grad_();
    const Tensor z = op(lx, ly);
    REQUIRE(z.dtype() == tg::kFloat32);
    CHECK(tg::testing::equal(z, op(x, y32)));
    CHECK(tg::testing::equal(op(ly, lx), op(y32, x)));
    z.sum().backward();
    CHECK(lx.grad().dtype() == tg::kFloat32);
    CHECK(ly.grad().dtype() == tg::kBFloat16);
    // The float32 gradient of the promoted operand, rounded once to bfloat16.
    const Tensor y32_leaf = y32.detach().requires_grad_();
    op(x, y32_leaf).sum().backward();
    CHECK(tg::testing::equal(ly.grad(), y32_leaf.grad().to(tg::kBFloat16)));
    CHECK(op(y, y.to(tg::kFloat64)).dtype() == tg::kFloat64);
    CHECK(op(x, tg::scalar_tensor(2.0, tg::kFloat64)).dtype() == tg::kFloat32);
  }
  // cat and stack (torch.cat promotes too): float32, each gradient back in its tensor's dtype.
  const Tensor lx = x.detach().requires_grad_(), ly = y.detach().requires_grad_();
  const Tensor joined = tg::cat({ly, lx});
  REQUIRE(joined.dtype() == tg::kFloat32);
  CHECK(tg::testing::equal(joined, tg::cat({y32, x})));
  CHECK(tg::stack({lx, ly}).dtype() == tg::kFloat32);
  (joined * tg::tensor({1, 2, 3, 4, 5, 6}, {6})).sum().backward();
  CHECK(tg::testing::equal(ly.grad(), tg::tensor({1, 2, 3}, {3}, tg::kBFloat16)));
  CHECK(tg::testing::equal(lx.grad(), tg::tensor({4, 5, 6}, {3})));
}
