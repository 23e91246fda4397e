// The state of an optimizer and of a learning-rate scheduler inside a checkpoint, through their
// state dicts (any optimizer, any scheduler). Private to the library; tg::save / tg::load call it.
//
// The layout with parameter groups (format version 2), beside the model's tensors:
//   tensors   "optimizer.<state name>.<parameter name>"   e.g. "optimizer.momentum_buffer.0.weight"
//   metadata  "tapegrad.optimizer"                 "SGD"
//             "tapegrad.optimizer.step_count"      "7"
//             "tapegrad.optimizer.param_groups"    [{"lr": 0.1, ..., "nesterov": false,
//                                                    "params": ["0.weight", "0.bias"]}, ...]  (JSON)
//             "tapegrad.scheduler"                 "StepLR"
//             "tapegrad.scheduler.last_epoch"      "3"
//             "tapegrad.scheduler.base_lrs"        [0.1, 0.01]  (JSON)
//             "tapegrad.scheduler.counters"        {"best": "inf", "num_bad_epochs": "0", ...}  (JSON;
//                                                  ReduceLROnPlateau only, absent before it existed)
// Adam's, RMSprop's and Adagrad's per-parameter "step" is a 0-d tensor "optimizer.step.<parameter name>".
// The layout before it (format version 1) held one SGD group: the same tensors, and
// "tapegrad.sgd.<option>" and "tapegrad.sgd.step_count" in the metadata; it still loads, told
// apart by its keys (there is no "tapegrad.optimizer.param_groups").
#pragma once

#include <string>

#include "safetensors.hpp"
#include "tapegrad/nn/module.hpp"
#include "tapegrad/optim/lr_scheduler.hpp"
#include "tapegrad/optim/optimizer.hpp"

namespace tg::detail {

// Whether a checkpoint's tensor belongs to the optimizer's state rather than to the model.
bool is_optimizer_tensor(const std::string& name);

// Appends the optimizer's state to a checkpoint of `model`. Every parameter of the optimizer must
// be one of the model's (tg::Error otherwise): the file names them as the model does.
void encode_optimizer_state(nn::Module& model, const optim::Optimizer& optimizer, NamedTensors& tensors,
                            Metadata& metadata);
// The optimizer's state as a checkpoint (of any format version) holds it, indexed as `optimizer`'s
// parameters; tg::Error naming the file when it holds none, another optimizer's, groups other than
// the optimizer's, or state for parameters the optimizer does not have. The optimizer checks the
// rest (shapes, option values) when it loads the result.
optim::OptimizerStateDict decode_optimizer_state(nn::Module& model, const optim::Optimizer& optimizer,
                                                 const SafetensorsContents& contents, const std::string& path);

void encode_scheduler_state(const optim::LRScheduler& scheduler, Metadata& metadata);
optim::SchedulerStateDict decode_scheduler_state(const optim::LRScheduler& scheduler,
                                                 const SafetensorsContents& contents, const std::string& path);

}  // namespace tg::detail
