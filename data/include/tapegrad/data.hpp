/// @file
/// tg::data — datasets, samplers, the DataLoader, and readers for IDX (MNIST) and CSV files.
///
/// @code
///   tg::Tensor images = tg::data::read_idx("train-images-idx3-ubyte.gz").to(tg::kFloat32);
///   tg::Tensor labels = tg::data::read_idx("train-labels-idx1-ubyte.gz");
///   tg::Generator generator(0);
///   tg::data::DataLoader loader(tg::data::TensorDataset(images, labels),
///                               {.batch_size = 128, .shuffle = true, .generator = &generator});
///   for (const tg::data::Example& batch : loader) ...
/// @endcode
#pragma once

/// @namespace tg::data
/// Datasets, samplers, the DataLoader, and readers for IDX (MNIST) and CSV files.

#include "tapegrad/data/csv.hpp"
#include "tapegrad/data/data_loader.hpp"
#include "tapegrad/data/dataset.hpp"
#include "tapegrad/data/idx.hpp"
#include "tapegrad/data/normalize.hpp"  // mean and std of a data set (whole, per feature, per channel); standardising in place
#include "tapegrad/data/progress_bar.hpp"  // tg::ProgressBar (namespace tg): a loop's line of progress
#include "tapegrad/data/sampler.hpp"
#include "tapegrad/data/distributed_sampler.hpp"  // each replica's share, for tg::dist
#include "tapegrad/data/token_blocks.hpp"  // a token sequence in blocks: a language model's batches
#include "tapegrad/data/transforms.hpp"  // torchvision's image transforms: crops, flips, erasing, Normalize
