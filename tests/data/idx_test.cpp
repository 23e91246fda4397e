// read_idx: small files written byte by byte here (plain and gzipped), every truncation and
// corruption of them, and Debian's Fashion-MNIST when it is installed.
#include <sys/stat.h>

#include <bit>
#include <cstring>

#include "data_test_util.hpp"

using namespace tg;
using data_test::scratch_path;

namespace {

// An IDX file: 0, 0, the type byte, the number of dims, the dims as big-endian uint32, then `payload`.
std::string idx_bytes(unsigned char type, const std::vector<uint32_t>& dims, const std::string& payload) {
  std::string bytes{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (const uint32_t dim : dims)
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((dim >> shift) & 0xff);
  return bytes + payload;
}

// `value`'s bytes, most significant first.
template <typename T>
std::string big_endian(T value) {
  std::string bytes(sizeof(T), '\0');
  std::memcpy(bytes.data(), &value, sizeof(T));
  return {bytes.rbegin(), bytes.rend()};  // the test host is little-endian, as the library requires
}

// The file written plain and gzipped; returns both paths.
std::pair<std::string, std::string> write_both(const std::string& name, const std::string& bytes) {
  const std::string plain = scratch_path(name), gzipped = scratch_path(name + ".gz");
  data_test::write_bytes(plain, bytes);
  data_test::write_gzip(gzipped, bytes);
  return {plain, gzipped};
}

}  // namespace

TEST_CASE("read_idx reads every IDX type into its dtype, plain or gzipped", "[data][idx]") {
  struct Case {
    const char* name;
    unsigned char type;
    std::string payload;
    DType dtype;
    std::vector<double> values;
  };
  const std::vector<Case> cases = {
      {"u8", 0x08, std::string("\x00\x01\x7f\x80\xfe\xff", 6), kInt64, {0, 1, 127, 128, 254, 255}},
      {"i8", 0x09, std::string("\x00\x01\x7f\x80\xfe\xff", 6), kInt64, {0, 1, 127, -128, -2, -1}},
      {"i16", 0x0B,
       big_endian<int16_t>(0) + big_endian<int16_t>(258) + big_endian<int16_t>(-2) + big_endian<int16_t>(32767) +
           big_endian<int16_t>(-32768) + big_endian<int16_t>(1000),
       kInt64, {0, 258, -2, 32767, -32768, 1000}},
      {"i32", 0x0C,
       big_endian<int32_t>(16909060) + big_endian<int32_t>(-1) + big_endian<int32_t>(2147483647) +
           big_endian<int32_t>(-2147483647 - 1) + big_endian<int32_t>(0) + big_endian<int32_t>(7),
       kInt64, {16909060, -1, 2147483647, -2147483648.0, 0, 7}},
      {"f32", 0x0D,
       big_endian(1.5f) + big_endian(-0.1f) + big_endian(3e38f) + big_endian(0.0f) + big_endian(-2.0f) +
           big_endian(1e-40f),
       kFloat32, {1.5, static_cast<double>(-0.1f), static_cast<double>(3e38f), 0, -2, static_cast<double>(1e-40f)}},
      {"f64", 0x0E,
       big_endian(0.1) + big_endian(-1e300) + big_endian(2.0) + big_endian(0.0) + big_endian(5e-324) +
           big_endian(-3.25),
       kFloat64, {0.1, -1e300, 2, 0, 5e-324, -3.25}}};
  for (const Case& c : cases) {
    INFO("type " << c.name);
    const auto [plain, gzipped] = write_both(std::string("types_") + c.name + ".idx", idx_bytes(c.type, {2, 3}, c.payload));
    for (const std::string& path : {plain, gzipped}) {
      const Tensor values = data::read_idx(path);
      REQUIRE(values.shape() == Shape{2, 3});
      REQUIRE(values.dtype() == c.dtype);
      REQUIRE(tg::testing::values(values) == c.values);
    }
  }
}

TEST_CASE("read_idx(path, dtype) converts as it reads", "[data][idx]") {
  const auto [plain, gzipped] = write_both("convert.idx", idx_bytes(0x08, {4}, std::string("\x00\x02\xff\x10", 4)));
  const Tensor as_float = data::read_idx(gzipped, kFloat32);
  REQUIRE(as_float.dtype() == kFloat32);
  REQUIRE(as_float.to_vector<float>() == std::vector<float>{0, 2, 255, 16});
  REQUIRE(data::read_idx(plain, kBool).to_vector<bool>() == std::vector<bool>{false, true, true, true});
  const std::string floats = scratch_path("convert_f32.idx");
  data_test::write_bytes(floats, idx_bytes(0x0D, {2}, big_endian(2.75f) + big_endian(-1.0f)));
  REQUIRE(data::read_idx(floats, kFloat64).to_vector<double>() == std::vector<double>{2.75, -1.0});
  REQUIRE(data::read_idx(floats, kInt64).to_vector<int64_t>() == std::vector<int64_t>{2, -1});  // as .to()
}

TEST_CASE("read_idx reads a large gzipped file into a tensor prepared while it inflates", "[data][idx]") {
  // More than the first 64 KiB step of inflating, so the result's tensor is made from the header
  // and its pages are touched while the rest inflates (idx.cpp); every value must still be the file's.
  const uint32_t rows = 300, columns = 301;
  std::string payload(size_t{rows} * columns, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>((i * 7919 + i / 251) & 0xff);
  const auto [plain, gzipped] = write_both("large.idx", idx_bytes(0x08, {rows, columns}, payload));
  const Tensor as_float = data::read_idx(gzipped, kFloat32);
  REQUIRE(as_float.shape() == Shape{rows, columns});
  const std::vector<float> values = as_float.to_vector<float>();
  bool all_equal = true;
  for (size_t i = 0; i < payload.size(); ++i)
    all_equal = all_equal && values[i] == static_cast<float>(static_cast<unsigned char>(payload[i]));
  REQUIRE(all_equal);
  REQUIRE(data::read_idx(gzipped).to_vector<int64_t>() == data::read_idx(plain).to_vector<int64_t>());
  // The same file with its last byte missing: reported as before, nothing decoded.
  const std::string cut = scratch_path("large_cut.idx.gz");
  data_test::write_gzip(cut, idx_bytes(0x08, {rows, columns}, payload.substr(0, payload.size() - 1)));
  REQUIRE_TG_ERROR(data::read_idx(cut, kFloat32), Catch::Contains("is truncated at byte offset"));
}

TEST_CASE("read_idx reads a file with a zero dim and one of several gzip members", "[data][idx]") {
  const auto [plain, gzipped] = write_both("empty.idx", idx_bytes(0x08, {0, 28, 28}, ""));
  REQUIRE(data::read_idx(plain).shape() == Shape{0, 28, 28});
  REQUIRE(data::read_idx(gzipped).shape() == Shape{0, 28, 28});
  // gzip allows concatenated members: the header in one, the data in the next.
  const std::string first = scratch_path("members_1.gz"), second = scratch_path("members_2.gz");
  data_test::write_gzip(first, idx_bytes(0x08, {3}, ""));
  data_test::write_gzip(second, std::string("\x05\x06\x07", 3));
  const std::string joined = scratch_path("members.idx.gz");
  data_test::write_bytes(joined, data_test::read_bytes(first) + data_test::read_bytes(second));
  REQUIRE(data::read_idx(joined).to_vector<int64_t>() == std::vector<int64_t>{5, 6, 7});
}

TEST_CASE("read_idx reports a file truncated at any byte with the file and the offset", "[data][idx][errors]") {
  const std::string whole = idx_bytes(0x0B, {2, 2}, big_endian<int16_t>(1) + big_endian<int16_t>(2) +
                                                        big_endian<int16_t>(3) + big_endian<int16_t>(4));
  const std::string path = scratch_path("truncated.idx");
  for (size_t length = 0; length < whole.size(); ++length) {
    INFO("the first " << length << " bytes");
    data_test::write_bytes(path, whole.substr(0, length));
    REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("read_idx") && Catch::Contains(path) &&
                                               Catch::Contains("truncated at byte offset " + std::to_string(length)));
  }
  // Compressed, every cut of the gzip stream is found by zlib (or, cut after the data, by the size check).
  data_test::write_gzip(path + ".gz", whole);
  const std::string compressed = data_test::read_bytes(path + ".gz");
  for (size_t length = 2; length < compressed.size(); ++length) {
    INFO("the first " << length << " compressed bytes");
    data_test::write_bytes(path, compressed.substr(0, length));
    REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains(path) && Catch::Contains("byte offset"));
  }
}

TEST_CASE("read_idx names the byte where a corrupt file goes wrong", "[data][idx][errors]") {
  const std::string path = scratch_path("corrupt.idx");
  const std::string good = idx_bytes(0x08, {3}, "abc");
  auto with_byte = [&](size_t offset, char value) {
    std::string bytes = good;
    bytes[offset] = value;
    return bytes;
  };
  data_test::write_bytes(path, with_byte(0, 1));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("not an IDX file: byte offset 0"));
  data_test::write_bytes(path, with_byte(1, 8));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("not an IDX file: byte offset 1"));
  data_test::write_bytes(path, with_byte(2, 0x0A));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("unknown type byte 0x0A at byte offset 2"));
  data_test::write_bytes(path, idx_bytes(0x08, {}, ""));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("number of dims at byte offset 3 is 0"));
  data_test::write_bytes(path, good + "d");
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("unexpected bytes after the data at byte offset 11"));
  data_test::write_bytes(path, idx_bytes(0x08, {0x80000000u}, ""));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("dim 0 at byte offset 4"));
  data_test::write_bytes(path, idx_bytes(0x0E, {0x7fffffffu, 0x7fffffffu, 0x7fffffffu}, ""));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("too large"));
  // Decompressed: the offset is counted in the decompressed data.
  data_test::write_gzip(path, with_byte(2, 0x0A));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("byte offset 2 of the decompressed data"));
  // A damaged deflate stream or checksum: zlib's verdict, with the compressed offset.
  data_test::write_gzip(path, idx_bytes(0x08, {64}, std::string(64, 'x')));
  std::string compressed = data_test::read_bytes(path);
  compressed[compressed.size() - 6] ^= 0x55;  // inside the CRC-32 of the trailer
  data_test::write_bytes(path, compressed);
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("corrupt gzip data at byte offset"));
  data_test::write_bytes(path, compressed.substr(0, 10) + std::string("\xff\xff\xff", 3) + compressed.substr(13));
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("corrupt gzip data at byte offset"));
  // A trailer that claims 4 GiB of data: zlib's length check refuses it (nothing that size is reserved).
  data_test::write_gzip(path, idx_bytes(0x08, {64}, std::string(64, 'x')));
  std::string lying = data_test::read_bytes(path);
  lying.replace(lying.size() - 4, 4, std::string(4, '\xff'));
  data_test::write_bytes(path, lying);
  REQUIRE_TG_ERROR(data::read_idx(path), Catch::Contains("corrupt gzip data at byte offset"));
}

TEST_CASE("read_idx refuses a missing file and what is not a regular file", "[data][idx][errors]") {
  REQUIRE_TG_ERROR(data::read_idx(scratch_path("no_such_file.idx")),
                   Catch::Contains("read_idx") && Catch::Contains("no_such_file.idx") && Catch::Contains("cannot open"));
  REQUIRE_TG_ERROR(data::read_idx(TG_DATA_SCRATCH_DIR), Catch::Contains("is a directory"));
  const std::string fifo = scratch_path("idx_fifo");
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE_TG_ERROR(data::read_idx(fifo), Catch::Contains("is a FIFO"));
  ::unlink(fifo.c_str());
}

// Debian's dataset-fashion-mnist. The expected values come from reading the files with Python's
// gzip and NumPy (first labels, class counts, pixel sums).
TEST_CASE("read_idx reads Debian's Fashion-MNIST", "[data][idx][fashion-mnist]") {
  const std::string dir = "/usr/share/datasets/fashion-mnist/";
  struct stat status {};
  if (::stat((dir + "train-labels-idx1-ubyte.gz").c_str(), &status) != 0) {
    WARN("dataset-fashion-mnist is not installed: skipped");
    return;
  }
  const Tensor train_labels = data::read_idx(dir + "train-labels-idx1-ubyte.gz");
  REQUIRE(train_labels.shape() == Shape{60000});
  REQUIRE(train_labels.dtype() == kInt64);
  const std::vector<int64_t> labels = train_labels.to_vector<int64_t>();
  REQUIRE(std::vector<int64_t>(labels.begin(), labels.begin() + 10) == std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5});
  std::vector<int64_t> counts(10, 0);
  int64_t out_of_range = 0;
  for (const int64_t label : labels) {
    if (label >= 0 && label < 10) ++counts[static_cast<size_t>(label)];
    else ++out_of_range;
  }
  REQUIRE(out_of_range == 0);
  REQUIRE(counts == std::vector<int64_t>(10, 6000));

  const Tensor train_images = data::read_idx(dir + "train-images-idx3-ubyte.gz", kFloat32);
  REQUIRE(train_images.shape() == Shape{60000, 28, 28});
  const std::vector<float> pixels = train_images.to_vector<float>();
  int64_t first_image = 0, all_images = 0;
  for (size_t i = 0; i < pixels.size(); ++i) {
    all_images += static_cast<int64_t>(pixels[i]);
    if (i < 784) first_image += static_cast<int64_t>(pixels[i]);
  }
  REQUIRE(first_image == 76247);
  REQUIRE(all_images == 3431114169);

  const Tensor test_images = data::read_idx(dir + "t10k-images-idx3-ubyte.gz");
  REQUIRE(test_images.shape() == Shape{10000, 28, 28});
  REQUIRE(test_images.dtype() == kInt64);
  int64_t test_sum = 0;
  for (const int64_t pixel : test_images.to_vector<int64_t>()) test_sum += pixel;
  REQUIRE(test_sum == 573469082);
  REQUIRE(data::read_idx(dir + "t10k-labels-idx1-ubyte.gz").to_vector<int64_t>().front() == 9);
}
