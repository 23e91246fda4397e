// safetensors' I64 and BOOL tensors: a file in PyTorch's layout (make_int_bool_safetensors.py)
// loads into a float model, each tensor converted as .to() converts; unknown dtypes are refused.
#include <catch2/catch.hpp>

#include <string>

#include "io_test_util.hpp"
#include "support/tensor_equal.hpp"

using tg::io_test::fixture_path;
using tg::io_test::read_bytes;
using tg::io_test::scratch_path;
using tg::io_test::write_bytes;

TEST_CASE("safetensors I64 and BOOL tensors load, converted to the parameters' dtype", "[io][checkpoint][dtype]") {
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  tg::nn::Sequential model(tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::LayerNorm({4}));
  model.to(dtype);
  tg::load(model, fixture_path("int_bool_weights.safetensors"));
  // The values make_int_bool_safetensors.py stores.
  std::vector<double> weight(12);
  for (int64_t i = 0; i < 12; ++i) weight[static_cast<size_t>(i)] = static_cast<double>(i - 6);
  weight[11] = 1099511627776.0;  // 2^40
  const auto& lin = model.at<tg::nn::Linear>(0);
  const auto& norm = model.at<tg::nn::LayerNorm>(2);
  TG_REQUIRE_EQUAL(lin.weight, tg::tensor(weight, {4, 3}, dtype));
  TG_REQUIRE_EQUAL(lin.bias, tg::tensor({1, 0, 0, 1}, {}, dtype));
  TG_REQUIRE_EQUAL(norm.weight, tg::tensor({-2, 0, 3, 5}, {}, dtype));
  TG_REQUIRE_EQUAL(norm.bias, tg::tensor({0, 1, 1, 1}, {}, dtype));  // bytes 0, 1, 2, 255
}

TEST_CASE("safetensors dtypes tapegrad does not read are refused, naming the ones it reads", "[io][checkpoint][dtype][errors]") {
  std::string bytes = read_bytes(fixture_path("int_bool_weights.safetensors"));
  const size_t at = bytes.find("\"I64\"");
  REQUIRE(at != std::string::npos);
  bytes.replace(at, 5, "\"I32\"");  // same length: the header stays valid JSON of the same size
  const std::string path = scratch_path("i32_weights.safetensors");
  write_bytes(path, bytes);
  tg::nn::Sequential model(tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::LayerNorm({4}));
  REQUIRE_THROWS_WITH(tg::load(model, path), Catch::Contains("I32") && Catch::Contains("F32, F64, BF16, I64 and BOOL"));
}
