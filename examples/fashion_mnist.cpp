// fashion_mnist — a real training run: an MLP, or a convolutional network, learns the 10 clothing
// classes of Fashion-MNIST (60,000 training and 10,000 test images of 28×28 grey pixels) from
// Debian's dataset-fashion-mnist.
//
//   --model mlp (the default):
//   Flatten → Linear(784, 512) → LayerNorm(512) → GELU → Dropout(0.1) → Linear(512, 10)
//   AdamW, a per-step linear warm-up then a cosine decay, cross-entropy with label smoothing.
//
//   --model cnn:
//   [Conv2d(c→c', 3, padding 1, no bias) → BatchNorm2d → ReLU] × 2 → MaxPool2d(2), for 1→32→32 then
//   32→64→64; Flatten → Dropout(0.25) → Linear(64·7·7, 10). Each training image is augmented as it
//   is loaded (tg::data::transforms, on the DataLoader's prefetching threads): RandomCrop(28,
//   padding 2) and RandomHorizontalFlip. AdamW under OneCycleLR (per step), label smoothing 0.1,
//   batches of 128, 15 epochs.
//
//   ./build/examples/fashion_mnist                          # 10 epochs: ≈ 90% test accuracy
//   ./build/examples/fashion_mnist --model cnn              # 15 epochs: ≈ 93% (the PyTorch twin: bench/fashion_mnist_cnn_torch.py)
//   ./build/examples/fashion_mnist --limit 2000 --epochs 1  # a quick look (CI runs this), without warm-up
//   ./build/examples/fashion_mnist --resume                 # continue from fashion_mnist_out/checkpoint.safetensors
//   ./build/examples/fashion_mnist --help                   # every flag with its default
//   mpirun -np 2 ./build/examples/fashion_mnist --distributed --threads 1   # data-parallel, 2 ranks
//
// Each epoch ends with an evaluation on the 10,000 test images, a row in <out>/metrics.csv and a
// checkpoint (<out>/checkpoint.safetensors) holding the model (BatchNorm's running statistics
// too), AdamW's moments, the schedule and both random generators (shuffling and dropout; the
// augmentation draws from generators seeded by the shuffling one), so that --resume continues bitwise identically
// to a run that never stopped. At the end <out>/metrics.png plots the curves when gnuplot is on PATH.
//
// --distributed (under mpirun, when tapegrad::distributed was built): every rank trains the same
// model (tg::dist::DataParallel) on its DistributedSampler share of the images, reshuffled each
// epoch from --seed + epoch. As in PyTorch's DDP, --batch is per rank: a step of N ranks sees
// N × --batch images, and an epoch has 1/N as many steps. Each rank evaluates every N-th test
// image; the logged loss and accuracy are sums over all ranks. Rank 0 alone prints, writes the
// files and the checkpoint, which holds every rank's dropout generator (they differ: rank r
// seeds its own with --seed + r); --resume loads it on every rank, with the same number of ranks.
//
// Exit status: 0 after training, 2 on a bad flag, missing data or any other error (under
// --distributed, an error on one rank aborts the whole MPI job instead, so that no rank hangs).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>
#include <tapegrad/tapegrad.hpp>

#include "flags.hpp"
#include "job.hpp"
#include "metrics.hpp"

namespace {

namespace fs = std::filesystem;
using Loader = tg::data::DataLoader<tg::data::TensorDataset>;

constexpr char kProgram[] = "fashion_mnist";
constexpr int64_t kClasses = 10;
constexpr int64_t kPixels = 28 * 28;
constexpr int64_t kTrainingImages = 60000;
constexpr int64_t kTestBatch = 1000;  // evaluation needs no small batches: fewer, larger GEMMs
constexpr int64_t kTestImages = 10000;

// The CNN's defaults where they differ from the MLP's (the flags' defaults).
constexpr int64_t kCnnEpochs = 15;
constexpr double kCnnLr = 3e-3;  // OneCycleLR's max_lr
constexpr double kCnnDropout = 0.25;

struct Settings {
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string model = "mlp";  // mlp or cnn
  int64_t epochs = 10;
  int64_t batch = 128;
  double lr = 2e-3;
  double weight_decay = 0.05;
  int64_t warmup_epochs = 1;  // the default is shortened to fit a run of fewer epochs (mlp only)
  int64_t warmup_epochs_asked = -1;  // the default's value when it was shortened; -1: not shortened
  double label_smoothing = 0.1;
  double dropout = 0.1;
  uint64_t seed = 0;
  int threads = 0;  // 0: all cores
  std::string matmul_precision = "highest";
  std::string autocast = "none";
  int64_t limit = 0;  // 0: all 60,000 training images
  int64_t test_limit = 0;  // 0: all 10,000 test images
  std::string out = "fashion_mnist_out";
  bool resume = false;
  int64_t stop_after = 0;  // 0: run all epochs
  bool verbose = false;
  bool distributed = false;
};

// Images and their classes: images float32 [N, 28, 28], labels int64 [N].
struct Split {
  tg::Tensor images;
  tg::Tensor labels;
};

// The IDX file `name` in `directory`, gzip-compressed as Debian ships it or plain as unpacked.
std::string find_idx(const std::string& directory, const std::string& name) {
  for (const std::string& candidate : {name + ".gz", name})
    if (fs::exists(fs::path(directory) / candidate)) return (fs::path(directory) / candidate).string();
  throw std::runtime_error("no " + name + "(.gz) in " + directory +
                   ": install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist), "
                   "or point --data at a directory holding the Fashion-MNIST IDX files");
}

Split read_split(const std::string& directory, const std::string& prefix) {
  return {tg::data::read_idx(find_idx(directory, prefix + "-images-idx3-ubyte"), tg::kFloat32),
          tg::data::read_idx(find_idx(directory, prefix + "-labels-idx1-ubyte"))};
}

// Standardised with the training images' mean and (unbiased) standard deviation, as torchvision's
// ToTensor and Normalize(mean, std) do, but once for the whole set rather than per sample in every
// epoch, and in place: a copy of the 188 MB of training images would cost more to page in than
// the arithmetic. The moments are those of the pixels 0 ... 255; printed, they are scaled to [0, 1].
struct Epoch {
  double train_loss = 0.0;      // mean over the epoch's samples, with dropout and label smoothing
  double train_accuracy = 0.0;  // of the training batches' predictions, as they were trained on
  double test_loss = 0.0;       // the same criterion on the test images, in eval mode
  double test_accuracy = 0.0;
  double lr = 0.0;              // at the end of the epoch
  double seconds = 0.0;         // training and evaluation
};

// Correct predictions in a batch: logits [B, 10], classes int64 [B].
int64_t count_correct(const tg::Tensor& logits, const tg::Tensor& classes) {
  return (logits.argmax(1) == classes).sum().item<int64_t>();
}

// One pass over `loader`, this process's share of the images; the returned figures are the job's
// (summed over the ranks). The bar counts the whole job's images and shows this rank's running
// loss and accuracy until the job's figures are known at the end.
template <typename L>
Epoch train_one_epoch(tg::nn::Module& model, const L& loader, tg::optim::Optimizer& optimizer,
                      tg::optim::EpochLRScheduler& schedule, const tg::nn::CrossEntropyOptions& criterion,
                      tg::ProgressBar& bar, examples::Job& job, bool autocast) {
  model.train();
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0;
  for (const tg::data::Example& batch : loader) {
    optimizer.zero_grad();
    tg::Tensor logits, loss;
    {
      const tg::autocast region({.enabled = autocast});  // --autocast bf16: the forward pass and the loss
      logits = model(batch.data);
      loss = tg::nn::cross_entropy(logits, batch.target, criterion);
    }
    job.backward(loss);  // distributed: the gradients averaged over the ranks
    optimizer.step();
    schedule.step();  // the schedule runs per step: warm-up and cosine over all steps of the run
    const int64_t size = batch.target.size(0);
    loss_sum += loss.item() * static_cast<double>(size);
    correct += count_correct(logits, batch.target);
    seen += size;
    bar.update(seen * job.world_size(), {{"loss", loss_sum / static_cast<double>(seen)},
                                         {"acc", static_cast<double>(correct) / static_cast<double>(seen)}});
  }
  const std::vector<double> sums = job.sum({loss_sum, static_cast<double>(correct), static_cast<double>(seen)});
  const Epoch epoch{.train_loss = sums[0] / sums[2], .train_accuracy = sums[1] / sums[2], .lr = optimizer.lr()};
  bar.update(static_cast<int64_t>(sums[2]), {{"loss", epoch.train_loss}, {"acc", epoch.train_accuracy}});
  return epoch;
}

// Loss and accuracy on `loader`'s images (summed over the ranks' shares), without recording a
// tape, dropout off.
std::pair<double, double> evaluate(tg::nn::Module& model, const Loader& loader,
                                   const tg::nn::CrossEntropyOptions& criterion, const examples::Job& job,
                                   bool autocast) {
  tg::NoGradGuard no_grad;
  const tg::autocast region({.enabled = autocast});
  model.eval();
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0;
  for (const tg::data::Example& batch : loader) {
    const tg::Tensor logits = model(batch.data);
    const int64_t size = batch.target.size(0);
    loss_sum += tg::nn::cross_entropy(logits, batch.target, criterion).item() * static_cast<double>(size);
    correct += count_correct(logits, batch.target);
    seen += size;
  }
  model.train();
  const std::vector<double> sums = job.sum({loss_sum, static_cast<double>(correct), static_cast<double>(seen)});
  return {sums[0] / sums[2], sums[1] / sums[2]};
}

// metrics.csv's row for an epoch: 17 significant digits (two runs compare bit for bit), but for
// the seconds.
constexpr char kMetricsHeader[] = "epoch,train_loss,train_acc,test_loss,test_acc,lr,seconds";
std::string metrics_row(int64_t epoch, const Epoch& e) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, ",%.3f", e.seconds);
  return examples::csv_row(epoch, {e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy, e.lr}) + seconds;
}

// Loss and accuracy curves side by side, from metrics.csv.
void plot(const fs::path& csv, const fs::path& png) {
  examples::plot(csv, png,
                 "set xlabel 'epoch'\n"
                 "set grid\n"
                 "set multiplot layout 1,2\n"
                 "set title 'loss (cross-entropy with label smoothing)'\n"
                 "plot data using 1:2 with linespoints title 'train', '' using 1:4 with linespoints title 'test'\n"
                 "set title 'accuracy (%)'\nset key bottom right\n"
                 "plot data using 1:($3*100) with linespoints title 'train', '' using 1:($5*100) with linespoints title 'test'\n"
                 "unset multiplot\n");
}

// Flags through CLI11 (examples/flags.hpp); returns the exit status when the program should stop
// here (--help: 0, a bad flag or value: 2, after CLI11 printed why).
std::optional<int> parse_flags(int argc, char** argv, Settings& s) {
  CLI::App app{"fashion_mnist: train an MLP or a CNN on Fashion-MNIST (Debian's dataset-fashion-mnist)", kProgram};
  app.add_option("--data", s.data, "directory holding the four Fashion-MNIST IDX files (.gz or plain)");
  app.add_option("--model", s.model, "mlp, or cnn: a convolutional network trained on augmented images")
      ->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--epochs", s.epochs, "epochs to train (cnn: 15)")->check(examples::positive);
  app.add_option("--batch", s.batch, "training batch size")->check(examples::positive);
  app.add_option("--lr", s.lr, "AdamW's peak learning rate, reached after the warm-up (cnn: OneCycleLR's max_lr, 0.003)")
      ->check(examples::positive);
  app.add_option("--weight-decay", s.weight_decay, "AdamW's decoupled weight decay")->check(examples::non_negative);
  app.add_option("--warmup-epochs", s.warmup_epochs, "epochs of linear warm-up (per step) before the cosine decay (the default shrinks to --epochs - 1 "
                 "when that is less)")
      ->check(examples::non_negative);
  app.add_option("--label-smoothing", s.label_smoothing, "cross-entropy's label smoothing")->check(examples::fraction);
  app.add_option("--dropout", s.dropout, "dropout probability after GELU (cnn: before the last Linear, 0.25)")
      ->check(examples::fraction);
  app.add_option("--seed", s.seed, "seeds the initialisation, the shuffling and dropout")->check(examples::non_negative);
  app.add_option("--threads", s.threads, "threads; 0: all cores")->check(examples::non_negative);
  examples::add_matmul_precision_flag(app, s.matmul_precision);
  examples::add_autocast_flag(app, s.autocast);
  app.add_option("--limit", s.limit, "train on the first N training images only; 0: all 60000")
      ->check(CLI::Range(int64_t{0}, kTrainingImages));
  app.add_option("--test-limit", s.test_limit, "evaluate on the first N test images only; 0: all 10000")
      ->check(CLI::Range(int64_t{0}, kTestImages));
  app.add_option("--out", s.out, "directory for checkpoint.safetensors, metrics.csv and metrics.png");
  app.add_flag("--resume", s.resume, "continue from <out>/checkpoint.safetensors");
  app.add_option("--stop-after", s.stop_after,
                 "stop after this epoch as if interrupted (the schedule still spans --epochs); 0: never")
      ->check(examples::non_negative);
  app.add_flag("--verbose", s.verbose,
               "also print the CPU and the GEMM kernel chosen for it (distributed: the time spent waiting for gradients)");
  app.add_flag("--distributed", s.distributed,
               "train data-parallel on the ranks of an MPI job (mpirun -np N); --batch is per rank");
  // Runs inside parse, so that its error is reported and exits like any other bad value. The
  // cosine decay needs at least one epoch: a default warm-up that leaves it none (--epochs 1) is
  // shortened, and train() says so; a warm-up asked for on the command line is not overridden.
  app.callback([&s, &app] {
    if (s.model == "cnn") {
      // The CNN's own defaults, for the flags not given; its OneCycleLR has its own warm-up.
      if (app.count("--epochs") == 0) s.epochs = kCnnEpochs;
      if (app.count("--lr") == 0) s.lr = kCnnLr;
      if (app.count("--dropout") == 0) s.dropout = kCnnDropout;
      if (app.count("--warmup-epochs") > 0)
        throw CLI::ValidationError("--warmup-epochs", "is the MLP's; --model cnn warms up within OneCycleLR");
      s.warmup_epochs = 0;
      return;
    }
    if (s.warmup_epochs < s.epochs) return;
    if (app.count("--warmup-epochs") > 0)
      throw CLI::ValidationError("--warmup-epochs", "expected fewer than --epochs (" + std::to_string(s.epochs) +
                                                        "), got " + std::to_string(s.warmup_epochs));
    s.warmup_epochs_asked = s.warmup_epochs;
    s.warmup_epochs = s.epochs - 1;
  });
  return examples::parse(app, argc, argv);
}


// The model --model names. The CNN: two stages of [Conv2d(3×3, padding 1) → BatchNorm2d → ReLU] × 2
// then a 2×2 max-pool (28 → 14 → 7 pixels a side), then one Linear on the 64 maps of 7 × 7. The
// convolutions have no bias: the BatchNorm after each subtracts the channel's mean, which would
// cancel it, and adds a bias (beta) of its own.
tg::nn::Sequential make_model(const Settings& s) {
  namespace nn = tg::nn;
  if (s.model == "mlp")
    return nn::Sequential(nn::Flatten(), nn::Linear(kPixels, 512), nn::LayerNorm({512}), nn::GELU(),
                          nn::Dropout(s.dropout), nn::Linear(512, kClasses));
  const nn::Conv2dOptions conv{.bias = false, .padding = 1};
  return nn::Sequential(nn::Conv2d(1, 32, 3, conv), nn::BatchNorm2d(32), nn::ReLU(),    // [B, 32, 28, 28]
                        nn::Conv2d(32, 32, 3, conv), nn::BatchNorm2d(32), nn::ReLU(),   //
                        nn::MaxPool2d(2),                                                // [B, 32, 14, 14]
                        nn::Conv2d(32, 64, 3, conv), nn::BatchNorm2d(64), nn::ReLU(),   // [B, 64, 14, 14]
                        nn::Conv2d(64, 64, 3, conv), nn::BatchNorm2d(64), nn::ReLU(),   //
                        nn::MaxPool2d(2),                                                // [B, 64, 7, 7]
                        nn::Flatten(), nn::Dropout(s.dropout), nn::Linear(64 * 7 * 7, kClasses));
}

// The per-step learning-rate schedule. MLP: a linear warm-up from lr/100 over the warm-up epochs,
// then half a cosine down to 0 (both start from AdamW's lr, the optimizer's initial_lr, whatever
// the warm-up's constructor set; without a warm-up there is no LinearLR, it needs total_iters
// >= 1). CNN: OneCycleLR with PyTorch's defaults (up from lr/25 over the first 30% of the steps,
// then down to lr/25e4, while AdamW's beta1 goes 0.95 → 0.85 → 0.95). Neither copied nor moved:
// SequentialLR refers to its phases.
struct Schedule {
  Schedule(tg::optim::Optimizer& optimizer, const Settings& s, int64_t steps_per_epoch) {
    if (s.model == "cnn") {
      one_cycle.emplace(optimizer, s.lr, s.epochs * steps_per_epoch);
      return;
    }
    const int64_t warmup_steps = s.warmup_epochs * steps_per_epoch;
    if (warmup_steps > 0)
      warmup.emplace(optimizer, tg::optim::LinearLROptions{.start_factor = 0.01, .total_iters = warmup_steps});
    cosine.emplace(optimizer, (s.epochs - s.warmup_epochs) * steps_per_epoch);
    using Phases = std::vector<std::reference_wrapper<const tg::optim::EpochLRScheduler>>;
    sequential.emplace(optimizer, warmup ? Phases{*warmup, *cosine} : Phases{*cosine},
                       warmup ? std::vector<int64_t>{warmup_steps} : std::vector<int64_t>{});
  }
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  tg::optim::EpochLRScheduler& get() {
    return one_cycle ? static_cast<tg::optim::EpochLRScheduler&>(*one_cycle) : *sequential;
  }

  std::optional<tg::optim::LinearLR> warmup;
  std::optional<tg::optim::CosineAnnealingLR> cosine;
  std::optional<tg::optim::SequentialLR> sequential;
  std::optional<tg::optim::OneCycleLR> one_cycle;
};

// A checkpoint's random generators, as save and load list them. Alone: the dropout (default) and
// the shuffle generators. Distributed: every rank's dropout generator, in rank order (the
// DistributedSampler needs none: it reseeds from --seed + epoch), held in `ranks_dropout`.
// Neither copied nor moved: `options` points into it.
struct RandomState {
  RandomState(const examples::Job& job, tg::Generator& shuffle_generator) {
    if (!job.distributed()) {
      options.generators = {&tg::default_generator(), &shuffle_generator};
      return;
    }
    ranks_dropout.resize(static_cast<size_t>(job.world_size()));
    for (tg::Generator& generator : ranks_dropout) options.generators.push_back(&generator);
  }
  RandomState(const RandomState&) = delete;
  RandomState& operator=(const RandomState&) = delete;

  std::vector<tg::Generator> ranks_dropout;
  tg::CheckpointOptions options;
};

// The whole run, on this process's share of the work.
int train(const Settings& settings, examples::Job& job) {
  const auto run_start = std::chrono::steady_clock::now();
  if (settings.threads > 0) tg::set_num_threads(settings.threads);
  tg::set_float32_matmul_precision(settings.matmul_precision);
  const bool autocast = settings.autocast == "bf16";
  // Ranks other than 0 print nothing: their bars and messages go to a stream with no buffer.
  std::ostream silent(nullptr);
  std::ostream& log = job.leads() ? std::cout : silent;
  if (settings.verbose) log << "cpu: " << tg::to_string(tg::cpu_info()) << "\n";
  if (settings.warmup_epochs_asked >= 0)
    log << "warm-up shortened from the default " << settings.warmup_epochs_asked << " epoch to "
        << settings.warmup_epochs << ", since --epochs " << settings.epochs
        << " must leave the cosine decay at least one\n";

  // Data, normalised once up front.
  Split train = read_split(settings.data, "train");
  Split test = read_split(settings.data, "t10k");
  if (settings.limit > 0) {
    std::vector<double> first_rows(static_cast<size_t>(settings.limit));
    std::iota(first_rows.begin(), first_rows.end(), 0.0);
    const tg::Tensor first = tg::tensor(first_rows, {settings.limit}, tg::kInt64);
    train = {train.images.index_select(0, first), train.labels.index_select(0, first)};
  }
  if (settings.test_limit > 0) {
    const tg::Tensor first = tg::arange(settings.test_limit);
    test = {test.images.index_select(0, first), test.labels.index_select(0, first)};
  }
  const tg::data::Moments pixels = tg::data::moments(train.images);
  tg::data::normalize_(train.images, pixels.mean, pixels.stddev);
  tg::data::normalize_(test.images, pixels.mean, pixels.stddev);
  const bool cnn = settings.model == "cnn";
  if (cnn) {  // images with one channel: [N, 1, 28, 28], sharing the storage
    train.images = train.images.unsqueeze(1);
    test.images = test.images.unsqueeze(1);
  }
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();

  // Distributed: each rank evaluates every world_size-th test image (no padding, unlike the
  // DistributedSampler: the job's test figures count each image once).
  const int64_t test_images = test.labels.size(0);
  if (job.distributed()) {
    std::vector<double> shard;
    for (int64_t i = job.rank(); i < test.labels.size(0); i += job.world_size()) shard.push_back(static_cast<double>(i));
    const tg::Tensor rows = tg::tensor(shard, {static_cast<int64_t>(shard.size())}, tg::kInt64);
    test = {test.images.index_select(0, rows), test.labels.index_select(0, rows)};
  }

  // Random streams, as a PyTorch script would have them: torch.manual_seed(seed) for the
  // initialisation and dropout, a generator of its own for the shuffle. The test loader draws one
  // number per epoch (as PyTorch's iterator does), from a generator nothing else uses.
  // Distributed: rank r seeds seed + r, so that the ranks drop different units (the initialisation
  // is rank 0's on every rank: DataParallel broadcasts it); the shuffle is the sampler's.
  tg::manual_seed(settings.seed + static_cast<uint64_t>(job.rank()));
  tg::Generator shuffle_generator(settings.seed);
  tg::Generator test_generator(settings.seed);
  // CNN: each training image augmented as it is loaded, on the prefetching threads while the model
  // trains on the batch before. The pixels are standardised already, so the crop pads with the
  // standardised black, the value torchvision's ToTensor → RandomCrop → Normalize pads with. The
  // draws come from a generator of each batch's own, seeded from the loader's (shuffle) generator.
  namespace T = tg::data::transforms;
  const T::Compose augment({T::RandomCrop(28, 2, {.fill = -pixels.mean / pixels.stddev}), T::RandomHorizontalFlip()});
  const tg::data::DataLoaderOptions augmented{.batch_size = settings.batch,
                                              .prefetch = cnn ? 2 : 0,
                                              .transform = cnn ? T::sample_transform(augment) : nullptr};
  const tg::data::TensorDataset train_set(train.images, train.labels);
  tg::data::DataLoaderOptions train_options = augmented;
  train_options.shuffle = true;
  train_options.generator = &shuffle_generator;
  Loader train_loader(train_set, train_options);
  Loader test_loader(tg::data::TensorDataset(test.images, test.labels),
                     {.batch_size = kTestBatch, .generator = &test_generator});
  // Distributed: this rank's share of the training images, PyTorch's DistributedSampler's.
  const auto shared_train_set = std::make_shared<const tg::data::TensorDataset>(train_set);
  tg::data::DistributedSampler sampler(train.labels.size(0), {.num_replicas = job.world_size(), .rank = job.rank(),
                                                              .shuffle = true, .seed = settings.seed});

  tg::nn::Sequential model = make_model(settings);
  job.replicate(model);
  tg::optim::AdamW optimizer(model.parameters(), {.lr = settings.lr, .weight_decay = settings.weight_decay});
  // Distributed: the steps of a rank's share (equal on every rank), the last batch possibly short.
  const int64_t steps_per_epoch =
      job.distributed() ? (sampler.size() + settings.batch - 1) / settings.batch : train_loader.size();
  Schedule schedules(optimizer, settings, steps_per_epoch);
  tg::optim::EpochLRScheduler& schedule = schedules.get();
  const tg::nn::CrossEntropyOptions criterion{.label_smoothing = settings.label_smoothing};

  if (job.leads()) {
    std::printf("%s%s: %lld training / %lld test images (mean %.4f, std %.4f after scaling to [0, 1]; read in %.2f s), "
                "%lld epochs of %lld batches of %lld, %d threads%s\n",
                kProgram, cnn ? " --model cnn" : "", static_cast<long long>(train.labels.size(0)),
                static_cast<long long>(test_images), pixels.mean / 255, pixels.stddev / 255,
                load_seconds, static_cast<long long>(settings.epochs), static_cast<long long>(steps_per_epoch),
                static_cast<long long>(settings.batch), tg::get_num_threads(),
                (std::string(settings.matmul_precision == "highest" ? "" : ", matmul precision " + settings.matmul_precision) +
                 (autocast ? ", autocast bf16" : ""))
                    .c_str());
    if (job.distributed())
      std::printf("distributed: %d ranks, each %lld training images per epoch in batches of %lld (%lld per step in all)\n",
                  job.world_size(), static_cast<long long>(sampler.size()), static_cast<long long>(settings.batch),
                  static_cast<long long>(settings.batch * job.world_size()));
    std::fflush(stdout);
  }

  // Everything a resumed run needs to draw what this one would have drawn next.
  RandomState random(job, shuffle_generator);
  const fs::path out(settings.out);
  if (job.leads()) fs::create_directories(out);
  const fs::path checkpoint = out / "checkpoint.safetensors";
  examples::MetricsCsv metrics(out / "metrics.csv", kMetricsHeader);
  int64_t first_epoch = 1;
  if (settings.resume) {
    if (!fs::exists(checkpoint)) throw std::runtime_error("--resume: there is no checkpoint at " + checkpoint.string());
    // Distributed: tg::load throws unless the file holds one generator per rank (a run on another
    // number of ranks wrote it); this rank continues with its own.
    tg::load(model, optimizer, schedule, checkpoint.string(), random.options);
    if (job.distributed())
      tg::default_generator().set_state(random.ranks_dropout[static_cast<size_t>(job.rank())].get_state());
    const int64_t steps_done = schedule.last_epoch();
    if (steps_done % steps_per_epoch != 0)
      throw std::runtime_error(checkpoint.string() + " stopped after step " + std::to_string(steps_done) +
                               ", not at the end of an epoch of " + std::to_string(steps_per_epoch) +
                               " steps: resume with the --batch and --limit of the run that wrote it");
    first_epoch = steps_done / steps_per_epoch + 1;
    if (job.leads()) metrics.keep_previous(first_epoch - 1);
    log << "resumed from " << checkpoint.string() << " after epoch " << first_epoch - 1 << "\n";
  }
  const int64_t last_epoch = settings.stop_after > 0 ? std::min(settings.stop_after, settings.epochs) : settings.epochs;

  double training_seconds = 0.0;
  Epoch epoch_metrics;
  for (int64_t epoch = first_epoch; epoch <= last_epoch; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    // On a terminal a bar redrawn in place; elsewhere (a pipe, CI's log) one line per epoch:
    //   epoch 3/10 60000/60000  loss 0.7688  acc 0.8853  test_acc 0.8739  17631 samples/s  in 3.5s
    const int64_t job_images = job.distributed() ? sampler.size() * job.world_size() : train.labels.size(0);
    tg::ProgressBar bar(job_images, "epoch " + std::to_string(epoch) + "/" + std::to_string(settings.epochs), log,
                        {.unit = "samples"});
    if (job.distributed()) {
      sampler.set_epoch(epoch - 1);  // a new shuffle each epoch, the same on every rank
      // No generator: as PyTorch's DataLoader(sampler=...), each epoch draws its one number from
      // the default generator.
      // CNN: augmented, the draws seeded from that number.
      const tg::data::DataLoader share(tg::data::Subset(shared_train_set, sampler.indices()), augmented);
      epoch_metrics = train_one_epoch(model, share, optimizer, schedule, criterion, bar, job, autocast);
    } else {
      epoch_metrics = train_one_epoch(model, train_loader, optimizer, schedule, criterion, bar, job, autocast);
    }
    std::tie(epoch_metrics.test_loss, epoch_metrics.test_accuracy) = evaluate(model, test_loader, criterion, job, autocast);
    epoch_metrics.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    training_seconds += epoch_metrics.seconds;
    bar.finish({{"test_acc", epoch_metrics.test_accuracy}});  // the test loss and the lr: in metrics.csv
    if (settings.verbose && job.distributed())
      log << "  rank 0 waited " << job.take_synchronize_seconds() << " s of the epoch's " << epoch_metrics.seconds
          << " s for the gradients (communication not hidden by backward, and the slowest rank)\n";
    // Distributed: every rank's dropout generator to rank 0 (a collective: every rank joins).
    if (job.distributed()) {
      const std::vector<tg::GeneratorState> states = job.gather(tg::default_generator());
      for (size_t r = 0; r < states.size(); ++r) random.ranks_dropout[r].set_state(states[r]);
    }
    if (job.leads()) {
      metrics.add(metrics_row(epoch, epoch_metrics));
      tg::save(model, optimizer, schedule, checkpoint.string(), random.options);
    }
  }
  if (!job.leads()) return 0;

  const int64_t epochs_run = last_epoch - first_epoch + 1;
  if (epochs_run > 0)
    std::printf("final test accuracy %.2f%%; %.2f s per epoch (training and evaluation) at %d threads, "
                "%.2f s in all\n",
                100.0 * epoch_metrics.test_accuracy, training_seconds / static_cast<double>(epochs_run),
                tg::get_num_threads(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count());
  std::cout << "wrote " << metrics.path().string() << " and " << checkpoint.string() << "\n";
  plot(metrics.path(), out / "metrics.png");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (const std::optional<int> status = parse_flags(argc, argv, settings)) return *status;
  return examples::run_job(argc, argv, settings.distributed, kProgram,
                           [&](examples::Job& job) { return train(settings, job); });
}
