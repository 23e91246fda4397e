// The state of random generators inside a checkpoint (tg::save / tg::load with
// CheckpointOptions::generators). Private to the library.
//
// Generator k (in the order the options list them) is one int64 tensor "generator.<k>" of
// GeneratorState::kWords + 4 elements: the twister's words, then the word index, the seed (its
// 64 bits), whether a normal is cached (0 or 1) and the cached normal's 64 bits. Integers, so the
// state comes back bit for bit; a tensor, so the file's CRC covers it like the weights.
#pragma once

#include <string>
#include <vector>

#include "safetensors.hpp"
#include "tapegrad/generator.hpp"

namespace tg::detail {

// Whether a checkpoint's tensor is a generator's state rather than a model parameter.
bool is_generator_tensor(const std::string& name);

void encode_generator_states(const std::vector<Generator*>& generators, NamedTensors& tensors);

// One state per generator of `generators` (the count must match the file's), validated;
// tg::Error naming the file otherwise. Nothing is changed: the caller sets them.
std::vector<GeneratorState> decode_generator_states(const std::vector<Generator*>& generators,
                                                    const SafetensorsContents& contents, const std::string& path);

}  // namespace tg::detail
