// libFuzzer target: any file given to tg::load (model and optimizer) either loads or throws
// tg::Error, and a failed load leaves the model's parameters unchanged.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <tapegrad/tapegrad.hpp>

namespace {

// The architecture of the committed seed checkpoints (tests/io/fixtures/checkpoint_interop.py).
struct Target {
  tg::nn::Sequential model{tg::nn::Linear(3, 4), tg::nn::ReLU(), tg::nn::LayerNorm({4})};
  tg::optim::SGD optimizer{model.parameters(), {.lr = 0.1, .momentum = 0.9}};
  std::string path = "/tmp/tg_fuzz_checkpoint_" + std::to_string(::getpid()) + ".safetensors";
};

// The parameters' bytes (bytes, not values: NaN != NaN would fake a change).
std::string snapshot(tg::nn::Module& model) {
  std::string bytes;
  for (const tg::Tensor& p : model.parameters())
    bytes.append(reinterpret_cast<const char*>(p.data<float>()), static_cast<size_t>(p.numel()) * sizeof(float));
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Target target;
  std::ofstream(target.path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                        static_cast<std::streamsize>(size));
  const std::string before = snapshot(target.model);
  const double lr_before = target.optimizer.lr();
  try {
    tg::load(target.model, target.optimizer, target.path);
  } catch (const tg::Error&) {
    // A failed load must change nothing.
    if (snapshot(target.model) != before || target.optimizer.lr() != lr_before) __builtin_trap();
  }
  return 0;
}
