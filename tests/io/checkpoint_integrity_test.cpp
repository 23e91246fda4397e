// What a checkpoint protects: a checksum over the whole file (every single-bit flip is refused),
// strictly parsed metadata, names that map one-to-one onto the file's keys, and version-1 files.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "io_test_util.hpp"

using tg::io_test::fixture_path;
using tg::io_test::read_bytes;
using tg::io_test::reseal;
using tg::io_test::scratch_path;
using tg::io_test::write_bytes;

namespace {

// A small model with momentum buffers, so that every kind of checkpoint content is present.
struct Trained {
  tg::nn::Sequential model{tg::nn::Linear(2, 3), tg::nn::LayerNorm({3})};
  tg::optim::SGD optimizer{model.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true}};

  explicit Trained(uint64_t seed) {
    tg::manual_seed(seed);
    for (tg::Tensor p : model.parameters()) {
      tg::NoGradGuard no_grad;
      p.uniform_(-1.0, 1.0);
    }
    optimizer.zero_grad();
    tg::Tensor loss = tg::nn::mse_loss(model(tg::randn({4, 2})), tg::randn({4, 3}));
    loss.backward();
    optimizer.step();
  }

  // Every bit a load could change: parameter and buffer bytes, options and step count.
  std::string state() {
    std::string bytes;
    const auto append = [&bytes](const tg::Tensor& t) {
      bytes.append(reinterpret_cast<const char*>(t.data<float>()), static_cast<size_t>(t.numel()) * sizeof(float));
    };
    for (const tg::Tensor& p : model.parameters()) append(p);
    for (const tg::Tensor& b : optimizer.momentum_buffers())
      if (b.defined()) append(b);
    const tg::optim::SGDOptions& o = optimizer.options();
    return bytes + tg::detail::concat(o.lr, "/", o.momentum, "/", o.dampening, "/", o.weight_decay, "/", o.nesterov,
                                      "/", optimizer.step_count());
  }
};

// `bytes` (a checkpoint) with its metadata edited by `edit` and the header re-encoded, then
// resealed with a valid whole-file checksum: what reaches the checks behind the checksum.
template <typename Edit>
std::string with_metadata(const std::string& bytes, Edit&& edit) {
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  edit(header["__metadata__"]);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return reseal(out + text + bytes.substr(8 + length));
}

// A module that declares whatever members a test gives it.
struct Declared : tg::nn::Module {
  std::vector<std::pair<std::string, tg::nn::Parameter>> parameters_by_name;
  std::vector<std::pair<std::string, tg::nn::Linear>> children;
  void members(tg::nn::Members& m) override {
    for (auto& [name, child] : children) m.module(name, child);
    for (auto& [name, parameter] : parameters_by_name) m.parameter(name, parameter);
  }
  tg::Tensor forward(const tg::Tensor& x) override { return x; }
};

}  // namespace

TEST_CASE("every single-bit flip anywhere in a checkpoint is refused, and changes nothing", "[io][checkpoint][integrity]") {
  Trained source(11);
  const std::string good_path = scratch_path("flip_source.safetensors");
  tg::save(source.model, source.optimizer, good_path);
  const std::string good = read_bytes(good_path);

  Trained target(12);
  const std::string before = target.state();
  const std::string path = scratch_path("flipped.safetensors");
  write_bytes(path, good);
  // Rewritten in place, never truncated: ext4 flushes a truncated-then-rewritten file to disk on
  // close, which would make 8 writes per byte take half a minute.
  const int file = ::open(path.c_str(), O_WRONLY);
  REQUIRE(file >= 0);
  size_t refused = 0;
  for (size_t byte = 0; byte < good.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      const char flipped = static_cast<char>(good[byte] ^ (1 << bit));
      REQUIRE(::pwrite(file, &flipped, 1, static_cast<off_t>(byte)) == 1);
      bool model_refused = false, both_refused = false;
      try {
        tg::load(target.model, path);
      } catch (const tg::Error&) {
        model_refused = true;
      }
      try {
        tg::load(target.model, target.optimizer, path);
      } catch (const tg::Error&) {
        both_refused = true;
      }
      INFO("byte " << byte << " bit " << bit << " of " << good.size() << " bytes");
      REQUIRE(model_refused);
      REQUIRE(both_refused);
      ++refused;
      REQUIRE(::pwrite(file, &good[byte], 1, static_cast<off_t>(byte)) == 1);
    }
  }
  ::close(file);
  REQUIRE(target.state() == before);
  REQUIRE(refused == good.size() * 8);
  // And the unflipped file does load: the flips, not the file, were refused.
  tg::load(target.model, target.optimizer, good_path);
  REQUIRE(target.state() == source.state());
}

TEST_CASE("the checksum is the CRC-32C of the whole file with its own digits read as zeros", "[io][checkpoint][integrity]") {
  Trained source(13);
  const std::string path = scratch_path("checksum.safetensors");
  tg::save(source.model, source.optimizer, path);
  const std::string bytes = read_bytes(path);
  REQUIRE(tg::io_test::file_checksum_offset(bytes) != std::string::npos);
  REQUIRE(reseal(bytes) == bytes);  // the bit-by-bit reference computes the digits that were written
  REQUIRE(bytes.find("\"tapegrad.format_version\":\"3\"") != std::string::npos);
  REQUIRE(tg::kCheckpointFormatVersion == 3);
}

TEST_CASE("checkpoint metadata is parsed strictly", "[io][checkpoint][integrity]") {
  Trained source(14);
  const std::string good_path = scratch_path("strict_source.safetensors");
  tg::save(source.model, source.optimizer, good_path);
  const std::string good = read_bytes(good_path);
  Trained target(15);
  const std::string before = target.state();
  const std::string path = scratch_path("strict.safetensors");

  const auto refused = [&](const std::string& key, const std::string& value) {
    write_bytes(path, with_metadata(good, [&](nlohmann::json& metadata) { metadata[key] = value; }));
    INFO(key << " = \"" << value << "\"");
    REQUIRE_THROWS_WITH(tg::load(target.model, target.optimizer, path),
                        Catch::Contains("malformed '" + key + "'") || Catch::Contains("format version"));
    REQUIRE(target.state() == before);
  };
  for (const char* value : {"0x10", " 7", "7 ", "+7", "-1", "7.0", "1e3", "007", "", "99999999999999999999"})
    refused("tapegrad.optimizer.step_count", value);
  for (const char* value : {"0x3", "3.0", "03", "0", "-3", ""}) refused("tapegrad.format_version", value);
  // The options are JSON (tapegrad.optimizer.param_groups), whose grammar has no True or 0x10.
  const auto refused_groups = [&](const std::string& from, const std::string& to) {
    const std::string key = "tapegrad.optimizer.param_groups";
    write_bytes(path, with_metadata(good, [&](nlohmann::json& metadata) {
                  std::string text = metadata[key].get<std::string>();
                  REQUIRE(text.find(from) != std::string::npos);
                  metadata[key] = text.replace(text.find(from), from.size(), to);
                }));
    INFO(from << " -> " << to);
    REQUIRE_THROWS_WITH(tg::load(target.model, target.optimizer, path), Catch::Contains("malformed '" + key + "'"));
    REQUIRE(target.state() == before);
  };
  refused_groups("\"nesterov\":true", "\"nesterov\":True");
  refused_groups("\"lr\":0.1", "\"lr\":0x10");

  // What save writes still loads after a re-encoding of the header.
  write_bytes(path, with_metadata(good, [](nlohmann::json& metadata) { metadata["tapegrad.optimizer.step_count"] = "0"; }));
  tg::load(target.model, target.optimizer, path);
  REQUIRE(target.optimizer.step_count() == 0);
}

TEST_CASE("a checkpoint missing its version or its checksum is refused", "[io][checkpoint][integrity]") {
  Trained source(16);
  const std::string good_path = scratch_path("keys_source.safetensors");
  tg::save(source.model, source.optimizer, good_path);
  const std::string good = read_bytes(good_path);
  const std::string path = scratch_path("keys.safetensors");
  Trained target(17);

  write_bytes(path, with_metadata(good, [](nlohmann::json& metadata) { metadata.erase("tapegrad.format_version"); }));
  REQUIRE_THROWS_WITH(tg::load(target.model, path), Catch::Contains("but no 'tapegrad.format_version'"));
  write_bytes(path, with_metadata(good, [](nlohmann::json& metadata) { metadata.erase("tapegrad.file_crc32c"); }));
  REQUIRE_THROWS_WITH(tg::load(target.model, path), Catch::Contains("has no 'tapegrad.file_crc32c'"));
  // A version-1 file must carry its data checksum.
  write_bytes(path, with_metadata(good, [](nlohmann::json& metadata) {
                metadata.erase("tapegrad.file_crc32c");
                metadata["tapegrad.format_version"] = "1";
              }));
  REQUIRE_THROWS_WITH(tg::load(target.model, path), Catch::Contains("has no 'tapegrad.crc32c'"));
}

TEST_CASE("a version-1 checkpoint still loads, and its data checksum is still verified", "[io][checkpoint][integrity]") {
  // tapegrad_sgd.safetensors is in the version-1 layout (checkpoint_interop.py --write).
  const std::string v1 = read_bytes(fixture_path("tapegrad_sgd.safetensors"));
  REQUIRE(v1.find("\"tapegrad.format_version\": \"1\"") != std::string::npos);
  tg::nn::Sequential model(tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::LayerNorm({4}));
  tg::optim::SGD optimizer(model.parameters(), {.lr = 1.0});
  tg::load(model, optimizer, fixture_path("tapegrad_sgd.safetensors"));
  REQUIRE(optimizer.step_count() == 7);

  std::string flipped = v1;
  flipped[flipped.size() - 3] ^= 0x01;
  const std::string path = scratch_path("v1_flipped.safetensors");
  write_bytes(path, flipped);
  REQUIRE_THROWS_WITH(tg::load(model, optimizer, path), Catch::Contains("corrupted"));
}

TEST_CASE("a dotted or reserved member name is refused when the module is walked", "[io][checkpoint][names]") {
  Declared dotted;
  dotted.children.emplace_back("lin", tg::nn::Linear(2, 2));
  dotted.parameters_by_name.emplace_back("lin.bias", tg::nn::Parameter("lin.bias", tg::ones({2})));
  REQUIRE_THROWS_WITH(dotted.parameters(), Catch::Contains("'lin.bias'"));

  Declared reserved;
  reserved.parameters_by_name.emplace_back("__metadata__", tg::nn::Parameter("m", tg::ones({2})));
  REQUIRE_THROWS_WITH(reserved.named_parameters(), Catch::Contains("'__metadata__'"));

  Declared empty;
  empty.children.emplace_back("", tg::nn::Linear(2, 2));
  REQUIRE_THROWS_AS(empty.parameters(), tg::Error);

  // Refused by save too, before a file is created.
  const std::string path = scratch_path("dotted.safetensors");
  std::remove(path.c_str());
  REQUIRE_THROWS_AS(tg::save(dotted, path), tg::Error);
  REQUIRE(::access(path.c_str(), F_OK) != 0);
}

TEST_CASE("two parameters with the same name are refused before save writes anything", "[io][checkpoint][names]") {
  Declared twice;
  twice.parameters_by_name.emplace_back("w", tg::nn::Parameter("a", tg::ones({2})));
  twice.parameters_by_name.emplace_back("w", tg::nn::Parameter("b", tg::zeros({2})));
  const std::string path = scratch_path("twice.safetensors");
  std::remove(path.c_str());
  REQUIRE_THROWS_WITH(tg::save(twice, path), Catch::Contains("two tensors are named 'w'"));
  REQUIRE(::access(path.c_str(), F_OK) != 0);

  // And an existing file stays as it was.
  Declared once;
  once.parameters_by_name.emplace_back("w", tg::nn::Parameter("a", tg::full({2}, 3.0)));
  tg::save(once, path);
  const std::string before = read_bytes(path);
  REQUIRE_THROWS_AS(tg::save(twice, path), tg::Error);
  REQUIRE(read_bytes(path) == before);
  REQUIRE_THROWS_WITH(tg::load(twice, path), Catch::Contains("two tensors are named 'w'"));
}

TEST_CASE("a name that is not UTF-8 is a tg::Error, not a JSON library exception", "[io][checkpoint][names]") {
  Declared latin1;
  latin1.parameters_by_name.emplace_back("gr\xfc\xdf", tg::nn::Parameter("w", tg::ones({2})));
  const std::string path = scratch_path("latin1.safetensors");
  std::remove(path.c_str());
  REQUIRE_THROWS_WITH(tg::save(latin1, path), Catch::Contains("UTF-8") && Catch::Contains("gr\\xfc\\xdf"));
  REQUIRE(::access(path.c_str(), F_OK) != 0);
}
