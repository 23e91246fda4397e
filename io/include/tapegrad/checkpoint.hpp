/// @file
/// Checkpoints: a model's parameters and buffers (BatchNorm's running statistics), and optionally an optimizer's and a learning-rate scheduler's
/// state (any optimizer, any scheduler, through their state dicts), in one safetensors file that
/// Python opens with `safetensors` or NumPy, and that tapegrad loads back.
///
/// @code
///   tg::save(model, optimizer, scheduler, "run.safetensors");   // every few epochs
///   ...
///   tg::load(model, optimizer, scheduler, "run.safetensors");   // resume: the same numbers as never stopping
/// @endcode
///
/// Writes are atomic (a temporary file in the same directory, fsync'ed, renamed over the old one):
/// a crash or a full disk during a save leaves the previous checkpoint intact (a process killed
/// mid-save may leave a ".tapegrad-<pid>-<n>.tmp" behind; it is never read). A save replaces only
/// a regular file, keeping its mode, and writes through a symbolic link to its target; see
/// write_file_atomically in core/src/io/file.hpp for what it refuses. Saves to one path from
/// several threads or processes at once all succeed, the last one wins, and a load meanwhile
/// reads one whole checkpoint (the previous one, or one of theirs). Loads verify everything —
/// the format, a CRC-32C of the whole file (header and data), the format version, every
/// parameter's presence and shape — before changing anything, and throw tg::Error saying what is
/// wrong; on error the model, the optimizer and the scheduler are left exactly as they were.
///
/// Tensors are stored under the model's parameter and buffer names ("0.weight", "ln.bias",
/// "1.running_mean"; an int64 buffer such as num_batches_tracked as I64), so weights
/// exported from PyTorch with `safetensors.torch.save_file(model.state_dict(), path)` load into
/// the same architecture built with tapegrad (float64 files load into float32 models and back,
/// converted as PyTorch's load_state_dict does). The optimizer's per-parameter state is stored as
/// "optimizer.<state name>.<parameter name>" ("optimizer.momentum_buffer.0.weight"), its parameter
/// groups (options and parameter names), its step count and the scheduler's last_epoch, base_lrs (and
/// ReduceLROnPlateau's counters)
/// in the header's __metadata__ under "tapegrad.*" (io/src/optimizer_state.hpp has the layout).
/// Files of format version 1 (SGD with one group) still load.
///
/// Tied parameters (nn::Parameter::tie) are stored once, under their first name in
/// named_parameters() order; every other name of the tensor is a `__metadata__` entry
/// `"<alias>": "<stored name>"` ("lm_head.weight": "wte.weight"), the convention of Python's
/// `safetensors.torch.save_model`, so `safetensors.torch.load_model` restores the tie too. A load
/// takes a tied tensor's values from whichever of its names the file holds, directly or as such an
/// alias; a file holding two different tensors for the names of one tied tensor is refused.
///
/// Random generators are saved only when listed in the options, and restored into the generators
/// the load lists (as many as were saved, in the same order), so that a resumed run draws the same
/// dropout masks and shuffles as one that never stopped:
///
/// @code
///   const tg::CheckpointOptions rng = {.generators = {&tg::default_generator(), &shuffle_generator}};
///   tg::save(model, optimizer, scheduler, "run.safetensors", rng);
///   tg::load(model, optimizer, scheduler, "run.safetensors", rng);
/// @endcode
#pragma once

#include <string>
#include <vector>

#include "tapegrad/generator.hpp"

#include "tapegrad/nn/module.hpp"
#include "tapegrad/optim/lr_scheduler.hpp"
#include "tapegrad/optim/optimizer.hpp"

namespace tg {

/// The version of the checkpoint layout this build writes and the newest it reads. 3: a CRC-32C of
/// the whole file, header included; 2: parameter groups and any optimizer's state, scheduler
/// state; 1: the state of an SGD with one group. Versions 1 and 2 (a checksum of the data only)
/// still load.
inline constexpr int kCheckpointFormatVersion = 3;

/// What a checkpoint carries beside the model, the optimizer and the scheduler.
struct CheckpointOptions {
  /// Saved as "generator.0", "generator.1", ... (their full state, bit for bit); a load restores
  /// them only when it lists as many generators as the file holds, and leaves every generator
  /// alone when it lists none.
  std::vector<Generator*> generators;
};

/// Writes the model's parameters to the checkpoint `path`, atomically.
void save(nn::Module& model, const std::string& path, const CheckpointOptions& options = {});
/// Loads the model's parameters from the checkpoint `path`, all verified before anything changes.
void load(nn::Module& model, const std::string& path, const CheckpointOptions& options = {});
/// Writes the model's parameters and the optimizer's state to the checkpoint `path`, atomically.
void save(nn::Module& model, const optim::Optimizer& optimizer, const std::string& path,
          const CheckpointOptions& options = {});
/// Loads the model's parameters and the optimizer's state, all verified before anything changes.
void load(nn::Module& model, optim::Optimizer& optimizer, const std::string& path,
          const CheckpointOptions& options = {});
/// Writes the model's parameters, the optimizer's and the scheduler's state to `path`, atomically.
void save(nn::Module& model, const optim::Optimizer& optimizer, const optim::LRScheduler& scheduler,
          const std::string& path, const CheckpointOptions& options = {});
/// Loads the model's parameters, the optimizer's and the scheduler's state, all verified before
/// anything changes: a resumed run continues with the same numbers.
void load(nn::Module& model, optim::Optimizer& optimizer, optim::LRScheduler& scheduler, const std::string& path,
          const CheckpointOptions& options = {});

}  // namespace tg
