// read_csv: small files written here, values by hand, and every kind of bad line.
#include "data_test_util.hpp"

using namespace tg;
using data_test::scratch_path;

namespace {

std::string write_csv(const std::string& name, const std::string& text) {
  const std::string path = scratch_path(name);
  data_test::write_bytes(path, text);
  return path;
}

}  // namespace

TEST_CASE("read_csv splits features from the label column", "[data][csv]") {
  const std::string path = write_csv("iris.csv", "sepal_length,sepal_width,species\n5.1,3.5,0\n4.9,3.0,2\n");
  const data::CsvData last = data::read_csv(path);
  REQUIRE(last.features.shape() == Shape{2, 2});
  REQUIRE(last.features.dtype() == kFloat32);
  REQUIRE(last.features.to_vector<float>() == std::vector<float>{5.1f, 3.5f, 4.9f, 3.0f});
  REQUIRE(last.labels.dtype() == kInt64);
  REQUIRE(last.labels.to_vector<int64_t>() == std::vector<int64_t>{0, 2});
  REQUIRE(last.columns == std::vector<std::string>{"sepal_length", "sepal_width"});

  const data::CsvData first = data::read_csv(path, {.label_column = 0, .dtype = kFloat64, .label_dtype = kFloat64});
  REQUIRE(first.features.to_vector<double>() == std::vector<double>{3.5, 0, 3.0, 2});
  REQUIRE(first.labels.to_vector<double>() == std::vector<double>{5.1, 4.9});
  REQUIRE(first.columns == std::vector<std::string>{"sepal_width", "species"});

  const data::CsvData none = data::read_csv(path, {.label_column = std::nullopt, .dtype = kFloat64});
  REQUIRE(none.features.shape() == Shape{2, 3});
  REQUIRE_FALSE(none.labels.defined());
  REQUIRE(data::read_csv(path, {.label_column = -2, .label_dtype = kFloat32}).labels.to_vector<float>() ==
          std::vector<float>{3.5f, 3.0f});
}

TEST_CASE("read_csv takes CRLF, blank lines, spaces, other delimiters and every number form", "[data][csv]") {
  const std::string path = write_csv("forms.csv", "1; 2.5e1 ;  +3\r\n\r\n  \n-0.5;nan;-inf\r\n1e-3;.25;7\n\n");
  const data::CsvData parsed =
      data::read_csv(path, {.header = false, .delimiter = ';', .dtype = kFloat64, .label_dtype = kFloat64});
  REQUIRE(parsed.features.shape() == Shape{3, 2});
  tg::testing::require_ieee_equal(parsed.features, {1, 25, -0.5, tg::testing::kNaN, 1e-3, 0.25}, 0.0);
  tg::testing::require_ieee_equal(parsed.labels, {3, -tg::testing::kInf, 7}, 0.0);
  // A header alone is an empty dataset with the right number of columns.
  const data::CsvData empty = data::read_csv(write_csv("header_only.csv", "a,b,c\n"));
  REQUIRE(empty.features.shape() == Shape{0, 2});
  REQUIRE(empty.labels.shape() == Shape{0});
}

TEST_CASE("read_csv names the file, line, column and byte offset of a bad field", "[data][csv][errors]") {
  const std::string ragged = write_csv("ragged.csv", "a,b,c\n1,2,3\n4,5\n");
  REQUIRE_TG_ERROR(data::read_csv(ragged), Catch::Contains("read_csv") && Catch::Contains(ragged) &&
                                               Catch::Contains("line 3") && Catch::Contains("byte offset 12") &&
                                               Catch::Contains("expected 3 fields as on the first line, got 2"));
  const std::string word = write_csv("word.csv", "1,2,3\n4,x5,6\n");
  REQUIRE_TG_ERROR(data::read_csv(word, {.header = false}),
                   Catch::Contains("line 2, column 2 (byte offset 8)") && Catch::Contains("'x5' is not a number"));
  const std::string empty_field = write_csv("empty_field.csv", "1,,3\n");
  REQUIRE_TG_ERROR(data::read_csv(empty_field, {.header = false}),
                   Catch::Contains("line 1, column 2 (byte offset 2)") && Catch::Contains("empty field"));
  const std::string fraction = write_csv("fraction.csv", "1,2,0.5\n");
  REQUIRE_TG_ERROR(data::read_csv(fraction, {.header = false}),
                   Catch::Contains("column 3 (byte offset 4)") && Catch::Contains("label '0.5' is not an integer"));
  const std::string huge = write_csv("huge.csv", "1,1e999\n");
  REQUIRE_TG_ERROR(data::read_csv(huge, {.header = false}), Catch::Contains("'1e999' is out of range"));
  const std::string small = write_csv("small.csv", "1,2\n");
  REQUIRE_TG_ERROR(data::read_csv(small, {.header = false, .label_column = 2}),
                   Catch::Contains("label_column 2 is out of range for 2 columns"));
  REQUIRE_TG_ERROR(data::read_csv(small, {.dtype = kInt64}), Catch::Contains("read_csv") && Catch::Contains("int64"));
  REQUIRE_TG_ERROR(data::read_csv(small, {.label_dtype = kBool}), Catch::Contains("not bool"));
  REQUIRE_TG_ERROR(data::read_csv(scratch_path("no_such.csv")),
                   Catch::Contains("read_csv") && Catch::Contains("no_such.csv") && Catch::Contains("cannot open"));
}
