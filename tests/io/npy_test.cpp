#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "io_test_util.hpp"
#include "support/tensor_equal.hpp"

using tg::io_test::fixture_path;
using tg::io_test::read_bytes;
using tg::io_test::scratch_path;

namespace {

// make_npy_fixtures.py stores value(i) = 0.25 i - 1 at flat index i of every valid array.
tg::Tensor expected_values(const tg::Shape& shape, tg::DType dtype) {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = 0.25 * static_cast<double>(i) - 1.0;
  return shape.empty() ? tg::scalar_tensor(values[0], dtype) : tg::tensor(values, shape, dtype);
}

}  // namespace

TEST_CASE("load_npy reads NumPy's files and save_npy writes them back byte for byte", "[io][npy]") {
  struct Case {
    const char* file;
    tg::Shape shape;
    tg::DType dtype;
  };
  const Case c = GENERATE(Case{"f32_2x3_v1.npy", {2, 3}, tg::kFloat32}, Case{"f64_3_v1.npy", {3}, tg::kFloat64},
                          Case{"f64_scalar_v1.npy", {}, tg::kFloat64},
                          Case{"f32_2x1x3x2_v2.npy", {2, 1, 3, 2}, tg::kFloat32},
                          Case{"f32_0x3_v1.npy", {0, 3}, tg::kFloat32});
  INFO(c.file);
  const tg::Tensor loaded = tg::load_npy(fixture_path(c.file));
  REQUIRE(loaded.shape() == c.shape);
  REQUIRE(loaded.dtype() == c.dtype);
  TG_REQUIRE_CLOSE(loaded, expected_values(c.shape, c.dtype), 0.0);

  // NumPy writes version 2.0 only when asked to; tapegrad writes 1.0 whenever the header fits.
  const std::string numpy_bytes = read_bytes(fixture_path(c.file));
  const std::string ours = tg::encode_npy(loaded);
  if (numpy_bytes[6] == 1) REQUIRE(ours == numpy_bytes);
  const size_t data_bytes = static_cast<size_t>(loaded.numel()) * tg::element_size(loaded.dtype());
  REQUIRE((ours.size() - data_bytes) % 64 == 0);  // the data starts 64-byte aligned, as NumPy does
  const std::string path = scratch_path(std::string("roundtrip_") + c.file);
  tg::save_npy(loaded, path);
  TG_REQUIRE_CLOSE(tg::load_npy(path), loaded, 0.0);
}

TEST_CASE("save_npy then load_npy keeps every bit of random tensors", "[io][npy]") {
  tg::manual_seed(3);
  const tg::DType dtype = GENERATE(tg::kFloat32, tg::kFloat64);
  const tg::Tensor original = tg::randn({3, 4, 5}, dtype);
  const std::string path = scratch_path("random.npy");
  tg::save_npy(original, path);
  const tg::Tensor back = tg::load_npy(path);
  REQUIRE(back.shape() == original.shape());
  REQUIRE(back.dtype() == dtype);
  TG_REQUIRE_CLOSE(back, original, 0.0);
}

TEST_CASE("load_npy refuses valid NumPy files it does not support, saying why", "[io][npy][errors]") {
  REQUIRE_THROWS_WITH(tg::load_npy(fixture_path("bad_fortran.npy")), Catch::Contains("Fortran order"));
  REQUIRE_THROWS_WITH(tg::load_npy(fixture_path("bad_int32.npy")), Catch::Contains("'<i4'"));
  REQUIRE_THROWS_WITH(tg::load_npy(fixture_path("bad_bigendian.npy")), Catch::Contains("'>f4'"));
  REQUIRE_THROWS_AS(tg::load_npy(fixture_path("bad_int32.npy")), tg::Error);
}

TEST_CASE("load_npy reports truncated, corrupted and missing files", "[io][npy][errors]") {
  const std::string good = read_bytes(fixture_path("f32_2x3_v1.npy"));
  SECTION("data cut short") {
    REQUIRE_THROWS_WITH(tg::decode_npy(good.substr(0, good.size() - 3)), Catch::Contains("truncated"));
  }
  SECTION("header cut short") {
    REQUIRE_THROWS_WITH(tg::decode_npy(good.substr(0, 40)), Catch::Contains("truncated"));
  }
  SECTION("extra bytes after the data") {
    REQUIRE_THROWS_WITH(tg::decode_npy(good + "xx"), Catch::Contains("needs 24 data bytes but has 26"));
  }
  SECTION("not a .npy file") {
    REQUIRE_THROWS_WITH(tg::decode_npy("PK\x03\x04 a zip file"), Catch::Contains("not a .npy file"));
  }
  SECTION("unsupported version") {
    std::string v3 = good;
    v3[6] = 3;
    REQUIRE_THROWS_WITH(tg::decode_npy(v3), Catch::Contains("version 3.0"));
  }
  SECTION("malformed header") {
    std::string broken = good;
    broken.replace(broken.find("'shape'"), 7, "'shope'");
    REQUIRE_THROWS_WITH(tg::decode_npy(broken), Catch::Contains("malformed header") && Catch::Contains("shope"));
    std::string unbalanced = good;
    unbalanced[unbalanced.find(')')] = ']';
    REQUIRE_THROWS_WITH(tg::decode_npy(unbalanced), Catch::Contains("malformed header"));
  }
  SECTION("a shape too large to address is an error, not an allocation") {
    std::string huge = good;
    const size_t at = huge.find("(2, 3)");
    huge.replace(at, 6, "(4611686018427387904, 4)");
    huge.erase(huge.find("}") + 1, 18);  // keep the header length: drop as much padding as was added
    REQUIRE_THROWS_AS(tg::decode_npy(huge), tg::Error);
  }
  SECTION("missing file") {
    REQUIRE_THROWS_WITH(tg::load_npy(scratch_path("does_not_exist.npy")), Catch::Contains("cannot open"));
  }
}

TEST_CASE("save_npy creates files with the permissions of any new file, not mkstemp's 0600", "[io][npy]") {
  const std::string plain = scratch_path("plain_file.bin"), saved = scratch_path("saved.npy");
  std::remove(plain.c_str());
  std::remove(saved.c_str());
  std::ofstream(plain) << "x";
  tg::save_npy(tg::ones({2}), saved);
  struct stat plain_stat{}, saved_stat{};
  REQUIRE(::stat(plain.c_str(), &plain_stat) == 0);
  REQUIRE(::stat(saved.c_str(), &saved_stat) == 0);
  REQUIRE((saved_stat.st_mode & 0777) == (plain_stat.st_mode & 0777));
}

TEST_CASE("load_npy reads NumPy's int64 and bool files exactly and save_npy writes them back byte for byte",
          "[io][npy][dtype]") {
  // The values make_npy_fixtures.py stores.
  const tg::Tensor ints = tg::testing::int64_tensor({0, -1, 7, (int64_t{1} << 53) + 1,
                                                     std::numeric_limits<int64_t>::max(),
                                                     std::numeric_limits<int64_t>::min()})
                              .reshape({2, 3});
  const tg::Tensor mask = tg::tensor({1, 0, 0, 1}, {2, 2}, tg::kBool);
  for (const auto& [file, expected] : {std::pair{"i8_2x3_v1.npy", ints}, std::pair{"b1_2x2_v1.npy", mask}}) {
    INFO(file);
    const tg::Tensor loaded = tg::load_npy(fixture_path(file));
    TG_REQUIRE_EQUAL(loaded, expected);
    REQUIRE(tg::encode_npy(loaded) == read_bytes(fixture_path(file)));
    const std::string path = scratch_path(std::string("roundtrip_") + file);
    tg::save_npy(expected, path);
    TG_REQUIRE_EQUAL(tg::load_npy(path), expected);
  }
  // Any nonzero byte is true, as NumPy reads it, and comes back as a proper 0/1 bool.
  const tg::Tensor nonzero = tg::load_npy(fixture_path("b1_nonzero_bytes_v1.npy"));
  TG_REQUIRE_EQUAL(nonzero, tg::tensor({0, 1, 1, 1}, {}, tg::kBool));
  const std::string rewritten = tg::encode_npy(nonzero);
  REQUIRE(rewritten.substr(rewritten.size() - 4) == std::string("\x00\x01\x01\x01", 4));
}
