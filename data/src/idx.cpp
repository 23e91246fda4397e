// IDX files (data/idx.hpp), plain or gzip-compressed.
#include "tapegrad/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <memory>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <cstdio>

#include "dispatch.hpp"
#include "io/file.hpp"
#include "parallel_for.hpp"

namespace tg::data {

namespace {

constexpr char kOp[] = "read_idx";

// A stored element type: its type byte, its width, and the dtype it becomes.
struct IdxType {
  unsigned char code;
  const char* name;
  size_t width;
  DType dtype;
};
constexpr IdxType kTypes[] = {
    {0x08, "unsigned 8-bit", 1, kInt64}, {0x09, "signed 8-bit", 1, kInt64},  {0x0B, "signed 16-bit", 2, kInt64},
    {0x0C, "signed 32-bit", 4, kInt64},  {0x0D, "float32", 4, kFloat32},     {0x0E, "float64", 8, kFloat64}};

// Bytes without a std::string's zero fill: the inflated data is written once, by zlib.
struct Bytes {
  std::unique_ptr<unsigned char[]> data;
  size_t size = 0;
};

// The bytes of a gzip file, inflated straight into the buffer returned (no bounce buffer and
// copy: for the 47 MB of Fashion-MNIST's training images that copy cost as much as inflating).
// zlib reports where the compressed stream breaks as the count of input bytes it consumed.
Bytes gunzip(const std::string& compressed, const std::string& path) {
  z_stream stream{};
  check(inflateInit2(&stream, 15 + 16) == Z_OK, kOp, "'", path, "': cannot initialise zlib");  // 16: gzip only
  struct End {
    z_stream& stream;
    ~End() { inflateEnd(&stream); }
  } end{stream};
  // The gzip trailer holds the size mod 2^32: a good first guess for the buffer, unless it is more
  // than deflate's largest ratio (1032:1) allows, as in a crafted file. One byte more than the
  // guess: inflate then reports the stream's end with room left, instead of needing a larger
  // buffer (a copy of everything) only to find there is nothing more.
  const size_t n = compressed.size();
  size_t capacity = size_t{1} << 16;
  if (n >= 4) {
    uint32_t hint = 0;
    for (int i = 3; i >= 0; --i) hint = (hint << 8) | static_cast<unsigned char>(compressed[n - 4 + static_cast<size_t>(i)]);
    if (hint / 1032 <= n) capacity = std::max<size_t>(capacity, size_t{hint} + 1);
  }
  Bytes out{std::unique_ptr<unsigned char[]>(new unsigned char[capacity]), 0};
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = 0;
  size_t consumed = 0;  // compressed bytes handed to zlib so far
  while (true) {
    if (stream.avail_in == 0 && consumed < n) {
      const size_t chunk = std::min<size_t>(n - consumed, std::numeric_limits<uInt>::max());
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data() + consumed));
      stream.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    if (out.size == capacity) {  // full: twice the room
      capacity *= 2;
      std::unique_ptr<unsigned char[]> larger(new unsigned char[capacity]);
      std::memcpy(larger.get(), out.data.get(), out.size);
      out.data = std::move(larger);
    }
    const size_t room = std::min<size_t>(capacity - out.size, std::numeric_limits<uInt>::max());
    stream.next_out = out.data.get() + out.size;
    stream.avail_out = static_cast<uInt>(room);
    const int status = inflate(&stream, Z_NO_FLUSH);
    out.size += room - stream.avail_out;
    const size_t offset = consumed - stream.avail_in;  // of the next compressed byte
    if (status == Z_STREAM_END) {
      if (offset == n) return out;
      // Another gzip member may follow (gzip concatenates them); anything else is corrupt.
      check(n - offset >= 2 && static_cast<unsigned char>(compressed[offset]) == 0x1f &&
                static_cast<unsigned char>(compressed[offset + 1]) == 0x8b,
            kOp, "'", path, "': unexpected bytes after the gzip stream at byte offset ", offset);
      inflateReset(&stream);
      continue;
    }
    if (status == Z_BUF_ERROR && stream.avail_in == 0 && consumed == n)
      throw Error(detail::concat(kOp, ": '", path, "': the gzip stream is truncated at byte offset ", n));
    check(status == Z_OK, kOp, "'", path, "': corrupt gzip data at byte offset ", offset, ": ",
          stream.msg != nullptr ? stream.msg : zError(status));
  }
}

uint32_t big_endian_u32(const unsigned char* bytes) {
  return (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) | (uint32_t{bytes[2]} << 8) | uint32_t{bytes[3]};
}

// One stored value, big-endian, as the C++ type it holds.
template <typename Stored>
Stored load_big_endian(const unsigned char* bytes) {
  using Bits = std::conditional_t<sizeof(Stored) == 1, uint8_t,
                                  std::conditional_t<sizeof(Stored) == 2, uint16_t,
                                                     std::conditional_t<sizeof(Stored) == 4, uint32_t, uint64_t>>>;
  Bits bits = 0;
  for (size_t i = 0; i < sizeof(Stored); ++i) bits = static_cast<Bits>((bits << 8) | bytes[i]);
  return std::bit_cast<Stored>(bits);
}

// The values at `bytes` (count of them, stored as `type`) into a new tensor of `dtype`.
Tensor decode(const unsigned char* bytes, const Shape& shape, const IdxType& type, DType dtype) {
  Tensor out = empty(shape, dtype);
  const int64_t count = out.numel();
  tg::detail::dispatch_all(kOp, dtype, [&]<typename T>() {
    T* values = out.mutable_data<T>();
    // In parallel chunks: the first write to each page of a fresh tensor of hundreds of MB costs
    // more than the conversion (the kernel clears the page), and both threads can take faults.
    auto fill = [&]<typename Stored>() {
      tg::detail::parallel_for(count, tg::detail::kElementwiseGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          values[i] = static_cast<T>(load_big_endian<Stored>(bytes + static_cast<size_t>(i) * sizeof(Stored)));
      });
    };
    switch (type.code) {
      case 0x08: fill.template operator()<uint8_t>(); break;
      case 0x09: fill.template operator()<int8_t>(); break;
      case 0x0B: fill.template operator()<int16_t>(); break;
      case 0x0C: fill.template operator()<int32_t>(); break;
      case 0x0D: fill.template operator()<float>(); break;
      case 0x0E: fill.template operator()<double>(); break;
    }
  });
  return out;
}

Tensor read(const std::string& path, std::optional<DType> requested) try {
  const std::string file = tg::detail::read_file(path, kOp);
  const bool gzipped = file.size() >= 2 && static_cast<unsigned char>(file[0]) == 0x1f &&
                       static_cast<unsigned char>(file[1]) == 0x8b;
  const Bytes inflated = gzipped ? gunzip(file, path) : Bytes{};
  const char* where = gzipped ? " of the decompressed data" : "";
  const auto* bytes = gzipped ? inflated.data.get() : reinterpret_cast<const unsigned char*>(file.data());
  const size_t size = gzipped ? inflated.size : file.size();
  auto truncated = [&](size_t needed, const char* what) {
    throw Error(detail::concat(kOp, ": '", path, "' is truncated at byte offset ", size, where, ": ", what,
                               " needs ", needed, " bytes"));
  };

  // The magic: 0, 0, the type, the number of dims.
  if (size < 4) truncated(4, "the 4-byte magic number");
  check(bytes[0] == 0 && bytes[1] == 0, kOp, "'", path, "' is not an IDX file: byte offset ", bytes[0] == 0 ? 1 : 0,
        where, " should be 0 (the magic number starts with two zero bytes)");
  const IdxType* type = nullptr;
  for (const IdxType& known : kTypes)
    if (known.code == bytes[2]) type = &known;
  if (type == nullptr) {
    char code[5];
    std::snprintf(code, sizeof code, "0x%02X", bytes[2]);
    throw Error(detail::concat(kOp, ": '", path, "': unknown type byte ", code, " at byte offset 2", where,
                               " (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)"));
  }
  const size_t dims = bytes[3];
  check(dims >= 1, kOp, "'", path, "': the number of dims at byte offset 3", where, " is 0");

  // The dims, then the values.
  const size_t header = 4 + 4 * dims;
  if (size < header) truncated(header, "a header of that many dims");
  Shape shape;
  size_t count = 1;
  for (size_t d = 0; d < dims; ++d) {
    const uint32_t extent = big_endian_u32(bytes + 4 + 4 * d);
    check(extent <= std::numeric_limits<int32_t>::max(), kOp, "'", path, "': dim ", d, " at byte offset ",
          4 + 4 * d, where, " is ", extent, ", more than 2^31 − 1");
    check(extent == 0 || count <= std::numeric_limits<size_t>::max() / 16 / extent, kOp, "'", path,
          "': the dims in the header are too large: ", shape, " times ", extent);
    shape.push_back(extent);
    count *= extent;
  }
  const size_t data_bytes = count * type->width;
  if (size - header < data_bytes)
    throw Error(detail::concat(kOp, ": '", path, "' is truncated at byte offset ", size, where, ": ", count, " ",
                               type->name, " values of shape ", shape, " need ", data_bytes, " bytes from byte offset ",
                               header, ", ", size - header, " are left"));
  check(size - header == data_bytes, kOp, "'", path, "': unexpected bytes after the data at byte offset ",
        header + data_bytes, where, " (", size - header - data_bytes, " more than shape ", shape, " needs)");

  const bool stored_float = type->dtype != kInt64;
  if (!requested || *requested == type->dtype) return decode(bytes + header, shape, *type, type->dtype);
  // Integers convert exactly to any dtype as they are read; floats go through .to()'s checks.
  if (!stored_float) return decode(bytes + header, shape, *type, *requested);
  return decode(bytes + header, shape, *type, type->dtype).to(*requested);
} catch (const std::bad_alloc&) {
  throw Error(detail::concat(kOp, ": out of memory while reading '", path, "'"));
}

}  // namespace

Tensor read_idx(const std::string& path) { return read(path, std::nullopt); }
Tensor read_idx(const std::string& path, DType dtype) { return read(path, dtype); }

}  // namespace tg::data
