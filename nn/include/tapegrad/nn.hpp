/// @file
/// tg::nn — modules, functional forms and losses.
///
/// @code
///   tg::nn::Sequential model(tg::nn::Linear(5, 6), tg::nn::ReLU(), tg::nn::LayerNorm({6}));
///   tg::Tensor loss = tg::nn::mse_loss(model(x), target);
///   loss.backward();
///   for (auto& [name, p] : model.named_parameters()) std::cout << name << p.grad() << '\n';
/// @endcode
#pragma once

/// @namespace tg::nn
/// Modules, functional forms and losses.

#include "tapegrad/nn/activation.hpp"
#include "tapegrad/nn/batch_norm.hpp"
#include "tapegrad/nn/clip_grad.hpp"
#include "tapegrad/nn/conv.hpp"
#include "tapegrad/nn/dropout.hpp"
#include "tapegrad/nn/embedding.hpp"
#include "tapegrad/nn/functional.hpp"
#include "tapegrad/nn/group_norm.hpp"
#include "tapegrad/nn/init.hpp"
#include "tapegrad/nn/layer_norm.hpp"
#include "tapegrad/nn/linear.hpp"
#include "tapegrad/nn/loss.hpp"
#include "tapegrad/nn/module.hpp"
#include "tapegrad/nn/module_dict.hpp"
#include "tapegrad/nn/module_list.hpp"
#include "tapegrad/nn/multihead_attention.hpp"
#include "tapegrad/nn/padding.hpp"
#include "tapegrad/nn/pooling.hpp"
#include "tapegrad/nn/rms_norm.hpp"
#include "tapegrad/nn/rnn.hpp"
#include "tapegrad/nn/sequential.hpp"
#include "tapegrad/nn/softmax.hpp"
#include "tapegrad/nn/transformer.hpp"
#include "tapegrad/nn/upsampling.hpp"
#include "tapegrad/nn/utils/rnn.hpp"
