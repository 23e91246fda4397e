// The umbrella header: everything a tapegrad program needs.
//
//   #include <tapegrad/tapegrad.hpp>
//
//   tg::nn::Sequential model(tg::nn::Linear(2, 32), tg::nn::ReLU(), tg::nn::LayerNorm({32}),
//                            tg::nn::Linear(32, 3));
//   tg::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
//   for (int step = 0; step < 100; ++step) {
//     opt.zero_grad();
//     tg::Tensor loss = tg::nn::cross_entropy(model(x), labels);
//     loss.backward();
//     opt.step();
//   }
#pragma once

#include "tapegrad/autograd.hpp"
#include "tapegrad/cpu.hpp"
#include "tapegrad/dtype.hpp"
#include "tapegrad/error.hpp"
#include "tapegrad/gradcheck.hpp"
#include "tapegrad/npy.hpp"
#include "tapegrad/memory.hpp"
#include "tapegrad/parallel.hpp"
#include "tapegrad/tensor.hpp"
#include "tapegrad/nn.hpp"
#include "tapegrad/optim.hpp"
#include "tapegrad/checkpoint.hpp"
#include "tapegrad/data.hpp"  // tg::data: datasets, samplers, DataLoader, IDX and CSV readers
