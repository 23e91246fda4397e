// IDX files (data/idx.hpp), plain or gzip-compressed.
#include "tapegrad/data/idx.hpp"

#include <tbb/parallel_invoke.h>
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

// A gzip file inflated straight into one buffer (no bounce buffer and copy: for the 47 MB of
// Fashion-MNIST's training images that copy cost as much as inflating), in as many steps as the
// caller asks for. zlib reports where the compressed stream breaks as the count of input bytes it
// consumed.
class Gunzip {
 public:
  Gunzip(const std::string& compressed, const std::string& path) : compressed_(compressed), path_(path) {
    check(inflateInit2(&stream_, 15 + 16) == Z_OK, kOp, "'", path, "': cannot initialise zlib");  // 16: gzip only
    // The gzip trailer holds the size mod 2^32: a good first guess for the buffer, unless it is
    // more than deflate's largest ratio (1032:1) allows, as in a crafted file. One byte more than
    // the guess: inflate then reports the stream's end with room left, instead of needing a larger
    // buffer (a copy of everything) only to find there is nothing more.
    const size_t n = compressed.size();
    if (n >= 4) {
      uint32_t hint = 0;
      for (int i = 3; i >= 0; --i)
        hint = (hint << 8) | static_cast<unsigned char>(compressed[n - 4 + static_cast<size_t>(i)]);
      if (hint / 1032 <= n) {
        hint_ = hint;
        capacity_ = std::max<size_t>(capacity_, size_t{hint} + 1);
      }
    }
    out_.data.reset(new unsigned char[capacity_]);
    stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  }
  Gunzip(const Gunzip&) = delete;
  Gunzip& operator=(const Gunzip&) = delete;
  ~Gunzip() { inflateEnd(&stream_); }

  // The size the trailer announces (mod 2^32), if plausible.
  std::optional<uint32_t> hint() const { return hint_; }
  const Bytes& bytes() const { return out_; }
  bool ended() const { return ended_; }

  // Inflates until at least `target` bytes are out, or to the end of the data.
  void inflate_until(size_t target) {
    const size_t n = compressed_.size();
    while (!ended_ && out_.size < target) {
      if (stream_.avail_in == 0 && consumed_ < n) {
        const size_t chunk = std::min<size_t>(n - consumed_, std::numeric_limits<uInt>::max());
        stream_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed_.data() + consumed_));
        stream_.avail_in = static_cast<uInt>(chunk);
        consumed_ += chunk;
      }
      if (out_.size == capacity_) {  // full: twice the room
        capacity_ *= 2;
        std::unique_ptr<unsigned char[]> larger(new unsigned char[capacity_]);
        std::memcpy(larger.get(), out_.data.get(), out_.size);
        out_.data = std::move(larger);
      }
      const size_t room = std::min<size_t>({capacity_ - out_.size, std::max<size_t>(target - out_.size, 1),
                                            std::numeric_limits<uInt>::max()});
      stream_.next_out = out_.data.get() + out_.size;
      stream_.avail_out = static_cast<uInt>(room);
      const int status = inflate(&stream_, Z_NO_FLUSH);
      out_.size += room - stream_.avail_out;
      const size_t offset = consumed_ - stream_.avail_in;  // of the next compressed byte
      if (status == Z_STREAM_END) {
        if (offset == n) {
          ended_ = true;
          return;
        }
        // Another gzip member may follow (gzip concatenates them); anything else is corrupt.
        check(n - offset >= 2 && static_cast<unsigned char>(compressed_[offset]) == 0x1f &&
                  static_cast<unsigned char>(compressed_[offset + 1]) == 0x8b,
              kOp, "'", path_, "': unexpected bytes after the gzip stream at byte offset ", offset);
        inflateReset(&stream_);
        continue;
      }
      if (status == Z_BUF_ERROR && stream_.avail_in == 0 && consumed_ == n)
        throw Error(detail::concat(kOp, ": '", path_, "': the gzip stream is truncated at byte offset ", n));
      check(status == Z_OK, kOp, "'", path_, "': corrupt gzip data at byte offset ", offset, ": ",
            stream_.msg != nullptr ? stream_.msg : zError(status));
    }
  }

 private:
  const std::string& compressed_;
  const std::string& path_;
  z_stream stream_{};
  std::optional<uint32_t> hint_;
  size_t capacity_ = size_t{1} << 16;
  size_t consumed_ = 0;  // compressed bytes handed to zlib so far
  bool ended_ = false;
  Bytes out_;
};

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

// The values at `bytes` (count of them, stored as `type`) into a new tensor of `dtype`, or into
// `target` when it is given (of that shape and dtype).
Tensor decode(const unsigned char* bytes, const Shape& shape, const IdxType& type, DType dtype,
              Tensor target = Tensor()) {
  Tensor out = target.defined() ? std::move(target) : empty(shape, dtype);
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

// The dtype read() decodes into: the stored one, or the requested one for stored integers (floats
// convert afterwards, through .to()'s checks).
DType decoded_dtype(const IdxType& type, std::optional<DType> requested) {
  if (!requested || *requested == type.dtype || type.dtype != kInt64) return type.dtype;
  return *requested;
}

// The shape and dtype of the tensor read() will decode into, if the first `size` inflated bytes hold
// a header that read() will accept and the gzip trailer announces exactly the bytes it describes;
// nothing for anything else (read() then finds and reports what is wrong, as without this look).
std::optional<std::pair<Shape, DType>> announced_layout(const unsigned char* bytes, size_t size, uint32_t hint,
                                                        std::optional<DType> requested) {
  if (size < 4 || bytes[0] != 0 || bytes[1] != 0 || bytes[3] == 0) return std::nullopt;
  const IdxType* type = nullptr;
  for (const IdxType& known : kTypes)
    if (known.code == bytes[2]) type = &known;
  const size_t dims = bytes[3], header = 4 + 4 * dims;
  if (type == nullptr || size < header) return std::nullopt;
  Shape shape;
  size_t count = 1;
  for (size_t d = 0; d < dims; ++d) {
    const uint32_t extent = big_endian_u32(bytes + 4 + 4 * d);
    if (extent > uint32_t{std::numeric_limits<int32_t>::max()}) return std::nullopt;
    if (extent != 0 && count > (size_t{1} << 32) / extent) return std::nullopt;
    shape.push_back(extent);
    count *= extent;
  }
  if (header + count * type->width != size_t{hint}) return std::nullopt;
  return std::pair{shape, decoded_dtype(*type, requested)};
}

// Writes one byte of every page of `t`, in parallel: the kernel's clearing of a fresh tensor's
// pages is then done, by the time the values are decoded into it.
void touch_pages(Tensor& t) {
  constexpr int64_t kPage = 4096;
  tg::detail::dispatch_all(kOp, t.dtype(), [&]<typename T>() {
    auto* base = reinterpret_cast<unsigned char*>(t.mutable_data<T>());
    const int64_t bytes = t.numel() * static_cast<int64_t>(sizeof(T));
    tg::detail::parallel_for((bytes + kPage - 1) / kPage, 64, [&](int64_t begin, int64_t end) {
      for (int64_t page = begin; page < end; ++page) base[page * kPage] = 0;
    });
  });
}

Tensor read(const std::string& path, std::optional<DType> requested) try {
  const std::string file = tg::detail::read_file(path, kOp);
  const bool gzipped = file.size() >= 2 && static_cast<unsigned char>(file[0]) == 0x1f &&
                       static_cast<unsigned char>(file[1]) == 0x8b;
  std::optional<Gunzip> gunzip;
  Tensor target;  // the result's tensor when known early: its pages cleared while the rest inflates
  if (gzipped) {
    gunzip.emplace(file, path);
    // Inflating is serial: while one thread inflates the rest, the other takes the page faults of
    // the tensor the header describes (for the 188 MB of float32 training images these cost as
    // much as inflating). Only when the trailer announces exactly what the header describes, so
    // that a damaged or crafted file allocates nothing before it is found to be so.
    gunzip->inflate_until(size_t{1} << 16);  // any header
    const auto layout = gunzip->hint() ? announced_layout(gunzip->bytes().data.get(), gunzip->bytes().size,
                                                          *gunzip->hint(), requested)
                                       : std::nullopt;
    if (layout && !gunzip->ended()) {
      target = empty(layout->first, layout->second);
      tbb::parallel_invoke([&] { gunzip->inflate_until(std::numeric_limits<size_t>::max()); },
                           [&] { touch_pages(target); });
    }
    gunzip->inflate_until(std::numeric_limits<size_t>::max());
  }
  const char* where = gzipped ? " of the decompressed data" : "";
  const auto* bytes = gzipped ? gunzip->bytes().data.get() : reinterpret_cast<const unsigned char*>(file.data());
  const size_t size = gzipped ? gunzip->bytes().size : file.size();
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

  // Integers convert exactly to any dtype as they are read; floats go through .to()'s checks.
  const DType dtype = decoded_dtype(*type, requested);
  if (target.defined() && (target.shape() != shape || target.dtype() != dtype)) target = Tensor();
  Tensor values = decode(bytes + header, shape, *type, dtype, std::move(target));
  return !requested || *requested == dtype ? values : values.to(*requested);
} catch (const std::bad_alloc&) {
  throw Error(detail::concat(kOp, ": out of memory while reading '", path, "'"));
}

}  // namespace

Tensor read_idx(const std::string& path) { return read(path, std::nullopt); }
Tensor read_idx(const std::string& path, DType dtype) { return read(path, dtype); }

}  // namespace tg::data
