/// @file
/// tg::optim — optimizers and learning-rate schedules.
#pragma once

/// @namespace tg::optim
/// Optimizers and learning-rate schedules.

#include "tapegrad/optim/adagrad.hpp"
#include "tapegrad/optim/adam.hpp"
#include "tapegrad/optim/lbfgs.hpp"
#include "tapegrad/optim/lr_scheduler.hpp"
#include "tapegrad/optim/optimizer.hpp"
#include "tapegrad/optim/rmsprop.hpp"
#include "tapegrad/optim/sgd.hpp"
