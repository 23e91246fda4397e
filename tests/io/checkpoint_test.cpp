#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "io_test_util.hpp"
#include "support/tensor_equal.hpp"

using tg::io_test::fixture_path;
using tg::io_test::read_bytes;
using tg::io_test::scratch_path;
using tg::io_test::write_bytes;

namespace {

// The architecture of the Python-written fixtures (checkpoint_interop.py).
tg::nn::Sequential small_model() { return tg::nn::Sequential(tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::LayerNorm({4})); }

// checkpoint_interop.py's value(name, i): offset = index of name among all tensor names, sorted.
double interop_value(const std::string& name, int64_t i) {
  const std::vector<std::string> sorted = {"0.bias",
                                           "0.weight",
                                           "2.bias",
                                           "2.weight",
                                           "optimizer.momentum_buffer.0.bias",
                                           "optimizer.momentum_buffer.0.weight",
                                           "optimizer.momentum_buffer.2.bias",
                                           "optimizer.momentum_buffer.2.weight"};
  const auto offset = std::find(sorted.begin(), sorted.end(), name) - sorted.begin();
  return 0.125 * static_cast<double>(i) - 0.5 + static_cast<double>(offset);
}

tg::Tensor interop_tensor(const std::string& name, const tg::Shape& shape) {
  int64_t n = 1;
  for (int64_t size : shape) n *= size;
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[i] = interop_value(name, i);
  return tg::tensor(values, shape);
}

// checkpoint_interop.py's bf16_value(name, i) = value(name, i) + 1/3, rounded to bfloat16 as
// PyTorch rounds float64 (through float32).
tg::Tensor interop_bf16_tensor(const std::string& name, const tg::Shape& shape) {
  return (interop_tensor(name, shape).to(tg::kFloat64) + 1.0 / 3.0).to(tg::kBFloat16);
}

// Everything a load could change: parameter bytes, lr, step count and momentum buffers.
std::string state_of(tg::nn::Module& model, const tg::optim::SGD* optimizer = nullptr) {
  std::string state;
  const auto append = [&state](const tg::Tensor& t) {
    state.append(reinterpret_cast<const char*>(t.data<float>()), static_cast<size_t>(t.numel()) * sizeof(float));
  };
  for (const tg::Tensor& p : model.parameters()) append(p);
  if (optimizer) {
    state += std::to_string(optimizer->lr()) + "/" + std::to_string(optimizer->step_count());
    for (const tg::Tensor& buffer : optimizer->momentum_buffers())
      if (buffer.defined()) append(buffer);
  }
  return state;
}

// A train_mlp-sized model and a fixed stream of mini-batches, so two runs see the same data.
struct Training {
  tg::nn::Sequential model{tg::nn::Linear(2, 64), tg::nn::ReLU(), tg::nn::LayerNorm({64}), tg::nn::Linear(64, 3)};
  tg::optim::SGD optimizer{model.parameters(), {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4}};

  void run(int from, int to) {
    for (int step = from; step < to; ++step) {
      tg::manual_seed(1000 + static_cast<uint64_t>(step));  // batch `step` is the same in every run
      const tg::Tensor x = tg::randn({64, 2});
      std::vector<int64_t> labels(64);
      for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>((i * 7 + step) % 3);
      optimizer.zero_grad();
      tg::Tensor loss = tg::nn::cross_entropy(model(x), labels);
      loss.backward();
      optimizer.step();
    }
  }
};

}  // namespace

TEST_CASE("save and load restore a model's parameters exactly", "[io][checkpoint]") {
  tg::manual_seed(1);
  tg::nn::Sequential model = small_model();
  const std::string path = scratch_path("model.safetensors");
  tg::save(model, path);
  const std::string saved = state_of(model);
  {
    tg::NoGradGuard no_grad;
    for (tg::Tensor p : model.parameters()) p.fill_(7.0);
  }
  tg::load(model, path);
  REQUIRE(state_of(model) == saved);
}

TEST_CASE("resuming from a checkpoint reproduces an uninterrupted run bit for bit", "[io][checkpoint]") {
  tg::manual_seed(2);
  Training uninterrupted;
  tg::manual_seed(2);
  Training first_half;
  REQUIRE(state_of(uninterrupted.model) == state_of(first_half.model));

  uninterrupted.run(0, 120);
  first_half.run(0, 50);
  const std::string path = scratch_path("resume.safetensors");
  tg::save(first_half.model, first_half.optimizer, path);

  tg::manual_seed(99);  // a different initialisation, overwritten by the checkpoint
  Training resumed;
  resumed.optimizer.set_lr(0.5);
  tg::load(resumed.model, resumed.optimizer, path);
  REQUIRE(resumed.optimizer.step_count() == 50);
  REQUIRE(resumed.optimizer.lr() == 0.1);
  resumed.run(50, 120);
  REQUIRE(state_of(resumed.model, &resumed.optimizer) == state_of(uninterrupted.model, &uninterrupted.optimizer));
}

TEST_CASE("weights written by Python in PyTorch's safetensors layout load, float64 converted", "[io][checkpoint]") {
  tg::nn::Sequential model = small_model();
  tg::load(model, fixture_path("pytorch_weights.safetensors"));
  const auto named = model.named_parameters();
  REQUIRE(named.size() == 4);
  for (const auto& [name, parameter] : named) {
    INFO(name);
    REQUIRE(parameter.dtype() == tg::kFloat32);
    TG_REQUIRE_CLOSE(parameter, interop_tensor(name, parameter.shape()), 0.0);
  }
}

TEST_CASE("a checkpoint with SGD state written by Python loads into model and optimizer", "[io][checkpoint]") {
  tg::nn::Sequential model = small_model();
  tg::optim::SGD optimizer(model.parameters(), {.lr = 1.0});
  tg::load(model, optimizer, fixture_path("tapegrad_sgd.safetensors"));
  REQUIRE(optimizer.lr() == 0.05);
  REQUIRE(optimizer.options().momentum == 0.9);
  REQUIRE(optimizer.options().weight_decay == 1e-4);
  REQUIRE_FALSE(optimizer.options().nesterov);
  REQUIRE(optimizer.step_count() == 7);
  const auto named = model.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    INFO(named[i].first);
    TG_REQUIRE_CLOSE(named[i].second, interop_tensor(named[i].first, named[i].second.shape()), 0.0);
    const std::string buffer_name = "optimizer.momentum_buffer." + named[i].first;
    TG_REQUIRE_CLOSE(optimizer.momentum_buffers()[i], interop_tensor(buffer_name, named[i].second.shape()), 0.0);
  }
}

TEST_CASE("a checkpoint tapegrad writes is read back by the Python script", "[io][checkpoint]") {
  tg::nn::Sequential model = small_model();
  tg::optim::SGD optimizer(model.parameters(), {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
  tg::optim::OptimizerStateDict state = optimizer.state_dict();
  {
    tg::NoGradGuard no_grad;
    int64_t index = 0;
    for (auto& [name, parameter] : model.named_parameters()) {
      parameter.copy_(interop_tensor(name, parameter.shape()));
      state.state[index++]["momentum_buffer"] = interop_tensor("optimizer.momentum_buffer." + name, parameter.shape());
    }
  }
  state.step_count = 7;
  optimizer.load_state_dict(state);
  const std::string path = scratch_path("for_python.safetensors");
  tg::save(model, optimizer, path);
  const std::string command = "python3 " + fixture_path("checkpoint_interop.py") + " --check " + path;
  REQUIRE(std::system(command.c_str()) == 0);
}

TEST_CASE("bfloat16 weights written by PyTorch (BF16) load bit for bit, or converted to float32",
          "[io][checkpoint][bfloat16]") {
  tg::nn::Sequential model = small_model();
  model.to(tg::kBFloat16);
  tg::load(model, fixture_path("pytorch_bf16_weights.safetensors"));
  tg::nn::Sequential float_model = small_model();
  tg::load(float_model, fixture_path("pytorch_bf16_weights.safetensors"));
  const auto named = model.named_parameters(), float_named = float_model.named_parameters();
  REQUIRE(named.size() == 4);
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [name, parameter] = named[i];
    INFO(name);
    REQUIRE(parameter.dtype() == tg::kBFloat16);
    TG_REQUIRE_EQUAL(parameter, interop_bf16_tensor(name, parameter.shape()));
    REQUIRE(float_named[i].second.dtype() == tg::kFloat32);  // exact: bfloat16 → float32
    TG_REQUIRE_EQUAL(float_named[i].second, interop_bf16_tensor(name, parameter.shape()).to(tg::kFloat32));
  }
}

TEST_CASE("a bfloat16 model tapegrad saves is read by Python as torch.bfloat16 and by tapegrad back",
          "[io][checkpoint][bfloat16]") {
  tg::nn::Sequential model = small_model();
  model.to(tg::kBFloat16);
  {
    tg::NoGradGuard no_grad;
    for (auto& [name, parameter] : model.named_parameters()) parameter.copy_(interop_bf16_tensor(name, parameter.shape()));
  }
  const std::string path = scratch_path("bf16_for_python.safetensors");
  tg::save(model, path);
  const std::string command = "python3 " + fixture_path("checkpoint_interop.py") + " --check-bf16 " + path;
  REQUIRE(std::system(command.c_str()) == 0);
  tg::nn::Sequential reloaded = small_model();
  reloaded.to(tg::kBFloat16);
  tg::load(reloaded, path);
  const auto saved = model.named_parameters(), read = reloaded.named_parameters();
  for (size_t i = 0; i < saved.size(); ++i) TG_REQUIRE_EQUAL(read[i].second, saved[i].second);
}

TEST_CASE("a bad checkpoint is refused with the reason, and nothing is changed", "[io][checkpoint][errors]") {
  tg::manual_seed(3);
  Training source;
  source.run(0, 3);
  const std::string good_path = scratch_path("good.safetensors");
  tg::save(source.model, source.optimizer, good_path);
  const std::string good = read_bytes(good_path);

  tg::manual_seed(4);
  Training target;
  target.run(0, 2);
  const std::string before = state_of(target.model, &target.optimizer);
  const std::string bad_path = scratch_path("bad.safetensors");
  const auto refuses = [&](const std::string& bytes, const std::string& reason) {
    write_bytes(bad_path, bytes);
    INFO("expected reason: " << reason);
    REQUIRE_THROWS_WITH(tg::load(target.model, target.optimizer, bad_path), Catch::Contains(reason));
    REQUIRE_THROWS_AS(tg::load(target.model, bad_path), tg::Error);
    REQUIRE(state_of(target.model, &target.optimizer) == before);
  };

  refuses(good.substr(0, good.size() - 100), "truncated");
  refuses(good.substr(0, 5), "truncated");
  std::string flipped = good;
  flipped[flipped.size() - 10] ^= 0x20;  // one bit of the last tensor's data
  refuses(flipped, "corrupted");
  std::string malformed = good;
  malformed[8] = '[';  // the header's opening brace
  refuses(malformed, "malformed header");
  std::string newer = good;
  const std::string version = "\"tapegrad.format_version\":\"" + std::to_string(tg::kCheckpointFormatVersion) + "\"";
  REQUIRE(newer.find(version) != std::string::npos);
  newer.replace(newer.find(version), version.size(), "\"tapegrad.format_version\":\"9\"");
  refuses(newer, "corrupted");  // a changed header fails its checksum...
  refuses(tg::io_test::reseal(newer), "newer");  // ...and a newer file with a valid one names its version

  // The same file against models it does not fit.
  tg::nn::Sequential wider(tg::nn::Linear(2, 65), tg::nn::ReLU(), tg::nn::LayerNorm({65}), tg::nn::Linear(65, 3));
  REQUIRE_THROWS_WITH(tg::load(wider, good_path), Catch::Contains("'0.weight'") && Catch::Contains("[64, 2]") &&
                                                      Catch::Contains("[65, 2]"));
  tg::nn::Sequential deeper(tg::nn::Linear(2, 64), tg::nn::ReLU(), tg::nn::LayerNorm({64}), tg::nn::Linear(64, 3),
                            tg::nn::Linear(3, 3));
  REQUIRE_THROWS_WITH(tg::load(deeper, good_path), Catch::Contains("no tensor for the parameter '4.weight'"));
  tg::nn::Sequential shallower(tg::nn::Linear(2, 64), tg::nn::ReLU(), tg::nn::LayerNorm({64}));
  REQUIRE_THROWS_WITH(tg::load(shallower, good_path), Catch::Contains("'3.bias'") &&
                                                          Catch::Contains("no parameter for"));
  tg::nn::Sequential plain = small_model();
  tg::optim::SGD plain_sgd(plain.parameters(), {.lr = 0.1});
  REQUIRE_THROWS_WITH(tg::load(plain, plain_sgd, fixture_path("pytorch_weights.safetensors")),
                      Catch::Contains("tapegrad.optimizer"));
}

TEST_CASE("a save killed at any moment leaves a checkpoint that loads", "[io][checkpoint][atomic]") {
  // A large model so that one save takes long enough to be interrupted in the middle.
  tg::manual_seed(5);
  tg::nn::Linear model(1500, 1500);
  const std::string path = scratch_path("killed.safetensors");
  tg::save(model, path);
  const std::string old_state = state_of(model);
  {
    tg::NoGradGuard no_grad;
    model.weight.fill_(0.5);
    model.bias.fill_(-0.5);
  }
  const std::string new_state = state_of(model);

  for (int attempt = 0; attempt < 6; ++attempt) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      for (;;) tg::save(model, path);  // until killed
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + 7 * attempt));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    tg::nn::Linear loaded(1500, 1500);
    tg::load(loaded, path);  // must not throw: the old or the new checkpoint, never a mix
    const std::string state = state_of(loaded);
    REQUIRE((state == old_state || state == new_state));
  }
}

TEST_CASE("a save that fails to write (disk full) throws and keeps the previous checkpoint", "[io][checkpoint][atomic]") {
  tg::manual_seed(6);
  tg::nn::Linear model(300, 300);
  const std::string path = scratch_path("full_disk.safetensors");
  tg::save(model, path);
  const std::string old_state = state_of(model);

  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Files may grow to 64 KiB only: the write fails with EFBIG, as it would with ENOSPC.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    {
      tg::NoGradGuard no_grad;
      model.weight.fill_(0.25);  // new values, so that the old file's survival is visible
    }
    try {
      tg::save(model, path);
    } catch (const tg::Error& error) {
      ::_exit(std::strstr(error.what(), "previous file is unchanged") ? 42 : 1);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 42);
  tg::nn::Linear loaded(300, 300);
  tg::load(loaded, path);
  REQUIRE(state_of(loaded) == old_state);
}
