/// @file
/// tg::dist — data-parallel training over MPI (the optional tapegrad::distributed library; not in
/// the umbrella header tapegrad/tapegrad.hpp: include this one and link tapegrad::distributed).
///
/// @code
///   tg::dist::Context context = tg::dist::init(argc, argv);
///   tg::dist::DataParallel ddp(model);           // rank 0's parameters, everywhere
///   tg::data::DistributedSampler sampler(n, {.num_replicas = tg::dist::world_size(),
///                                            .rank = tg::dist::rank()});
///   ...
///   ddp.backward(loss);                          // gradients averaged over the ranks
///   optimizer.step();
/// @endcode
#pragma once

/// @namespace tg::dist
/// Data-parallel training over MPI: the process group, collectives and DataParallel.

#include "tapegrad/distributed/collectives.hpp"
#include "tapegrad/distributed/data_parallel.hpp"
#include "tapegrad/distributed/process_group.hpp"
