// Random generators' state in a checkpoint: the layout is in generator_state.hpp.
#include "generator_state.hpp"

#include <bit>
#include <cstdint>

#include "tapegrad/error.hpp"
#include "tapegrad/tensor.hpp"

namespace tg::detail {

namespace {

constexpr const char* kTensorPrefix = "generator.";
constexpr int64_t kWords = GeneratorState::kWords;
constexpr int64_t kLength = kWords + 4;  // words, index, seed, has_cached_normal, cached_normal

std::string tensor_name(size_t k) { return kTensorPrefix + std::to_string(k); }

}  // namespace

bool is_generator_tensor(const std::string& name) { return name.rfind(kTensorPrefix, 0) == 0; }

void encode_generator_states(const std::vector<Generator*>& generators, NamedTensors& tensors) {
  for (size_t k = 0; k < generators.size(); ++k) {
    check(generators[k] != nullptr, "save", "generator ", k, " of the checkpoint options is null");
    const GeneratorState state = generators[k]->get_state();
    Tensor packed = empty({kLength}, kInt64);
    int64_t* out = packed.mutable_data<int64_t>();
    for (int64_t i = 0; i < kWords; ++i) out[i] = state.words[static_cast<size_t>(i)];
    out[kWords] = state.index;
    out[kWords + 1] = std::bit_cast<int64_t>(state.seed);
    out[kWords + 2] = state.has_cached_normal ? 1 : 0;
    out[kWords + 3] = std::bit_cast<int64_t>(state.cached_normal);
    tensors.emplace_back(tensor_name(k), packed);
  }
}

std::vector<GeneratorState> decode_generator_states(const std::vector<Generator*>& generators,
                                                    const SafetensorsContents& contents, const std::string& path) {
  size_t stored = 0;
  for (const auto& [name, tensor] : contents.tensors) stored += is_generator_tensor(name) ? 1 : 0;
  check(stored == generators.size(), "load", "'", path, "' holds the state of ", stored, " random generator(s), but ",
        generators.size(), " were given to restore");
  std::vector<GeneratorState> states;
  for (size_t k = 0; k < generators.size(); ++k) {
    check(generators[k] != nullptr, "load", "generator ", k, " of the checkpoint options is null");
    const auto it = contents.tensors.find(tensor_name(k));
    check(it != contents.tensors.end(), "load", "'", path, "' has no tensor '", tensor_name(k), "'");
    const Tensor& packed = it->second;
    check(packed.dtype() == kInt64 && packed.shape() == Shape{kLength}, "load", "'", path, "': '", tensor_name(k),
          "' is a ", packed.dtype(), " tensor of shape ", packed.shape(), ", expected int64 of shape [", kLength,
          "] (corrupted?)");
    const int64_t* in = packed.data<int64_t>();
    GeneratorState state;
    for (int64_t i = 0; i < kWords; ++i) {
      check(in[i] >= 0 && in[i] <= int64_t{UINT32_MAX}, "load", "'", path, "': '", tensor_name(k), "' word ", i,
            " is ", in[i], ", not a 32-bit word (corrupted?)");
      state.words[static_cast<size_t>(i)] = static_cast<uint32_t>(in[i]);
    }
    check(in[kWords] >= 0 && in[kWords] <= kWords, "load", "'", path, "': '", tensor_name(k), "' has the word index ",
          in[kWords], ", expected [0, ", kWords, "] (corrupted?)");
    check(in[kWords + 2] == 0 || in[kWords + 2] == 1, "load", "'", path, "': '", tensor_name(k),
          "' has a cached-normal flag of ", in[kWords + 2], " (corrupted?)");
    state.index = static_cast<uint32_t>(in[kWords]);
    state.seed = std::bit_cast<uint64_t>(in[kWords + 1]);
    state.has_cached_normal = in[kWords + 2] == 1;
    state.cached_normal = std::bit_cast<double>(in[kWords + 3]);
    states.push_back(state);
  }
  return states;
}

}  // namespace tg::detail
