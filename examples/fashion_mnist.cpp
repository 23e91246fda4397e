// fashion_mnist — a real training run: an MLP learns the 10 clothing classes of Fashion-MNIST
// (60,000 training and 10,000 test images of 28×28 grey pixels) from Debian's dataset-fashion-mnist.
//
//   Flatten → Linear(784, 512) → LayerNorm(512) → GELU → Dropout(0.1) → Linear(512, 10)
//   AdamW, a per-step linear warm-up then a cosine decay, cross-entropy with label smoothing.
//
//   ./build/examples/fashion_mnist                          # 10 epochs: ≈ 90% test accuracy
//   ./build/examples/fashion_mnist --limit 2000 --epochs 1 --warmup-epochs 0   # a quick look (CI runs this)
//   ./build/examples/fashion_mnist --resume                 # continue from fashion_mnist_out/checkpoint.safetensors
//   ./build/examples/fashion_mnist --help                   # every flag with its default
//
// Each epoch ends with an evaluation on the 10,000 test images, a row in <out>/metrics.csv and a
// checkpoint (<out>/checkpoint.safetensors) holding the model, AdamW's moments, the schedule and
// both random generators (shuffling and dropout), so that --resume continues bitwise identically
// to a run that never stopped. At the end <out>/metrics.png plots the curves when gnuplot is on PATH.
//
// Exit status: 0 after training, 2 on a bad flag, missing data or any other error.
#include <unistd.h>

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

namespace {

namespace fs = std::filesystem;
using Loader = tg::data::DataLoader<tg::data::TensorDataset>;

constexpr char kProgram[] = "fashion_mnist";
constexpr int64_t kClasses = 10;
constexpr int64_t kPixels = 28 * 28;
constexpr int64_t kTrainingImages = 60000;
constexpr int64_t kTestBatch = 1000;  // evaluation needs no small batches: fewer, larger GEMMs

struct Settings {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int64_t epochs = 10;
  int64_t batch = 128;
  double lr = 2e-3;
  double weight_decay = 0.05;
  int64_t warmup_epochs = 1;
  double label_smoothing = 0.1;
  double dropout = 0.1;
  uint64_t seed = 0;
  int threads = 0;  // 0: all cores
  int64_t limit = 0;  // 0: all 60,000 training images
  std::string out = "fashion_mnist_out";
  bool resume = false;
  int64_t stop_after = 0;  // 0: run all epochs
  bool verbose = false;
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

// Pixels to [0, 1], then standardised with the training images' mean and (unbiased) standard
// deviation, as torchvision's ToTensor and Normalize(mean, std) do, but once for the whole set
// rather than per sample in every epoch.
struct Normalisation {
  double mean;
  double std;
};

Normalisation measure(const tg::Tensor& train_images) {
  return {train_images.mean().item() / 255.0, std::sqrt(train_images.var().item()) / 255.0};
}

// Taken by value and replaced step by step, so that each step's result can reuse a buffer that is
// already free (tapegrad's block cache) rather than page-faulting in 188 MB more.
tg::Tensor normalise(tg::Tensor images, const Normalisation& n) {
  images = images - 255.0 * n.mean;
  images = images / (255.0 * n.std);
  return images;
}

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
  return static_cast<int64_t>((logits.argmax(1) == classes).to(tg::kFloat64).sum().item());
}

Epoch train_one_epoch(tg::nn::Module& model, const Loader& loader, tg::optim::Optimizer& optimizer,
                      tg::optim::EpochLRScheduler& schedule, const tg::nn::CrossEntropyOptions& criterion,
                      tg::ProgressBar& bar) {
  model.train();
  double loss_sum = 0.0;
  int64_t correct = 0, seen = 0;
  for (const tg::data::Example& batch : loader) {
    optimizer.zero_grad();
    const tg::Tensor logits = model(batch.data);
    tg::Tensor loss = tg::nn::cross_entropy(logits, batch.target, criterion);
    loss.backward();
    optimizer.step();
    schedule.step();  // the schedule runs per step: warm-up and cosine over all steps of the run
    const int64_t size = batch.target.size(0);
    loss_sum += loss.item() * static_cast<double>(size);
    correct += count_correct(logits, batch.target);
    seen += size;
    bar.update(seen, {{"loss", loss_sum / static_cast<double>(seen)},
                      {"acc", static_cast<double>(correct) / static_cast<double>(seen)}});
  }
  return {.train_loss = loss_sum / static_cast<double>(seen),
          .train_accuracy = static_cast<double>(correct) / static_cast<double>(seen),
          .lr = optimizer.lr()};
}

// Loss and accuracy on `loader`'s images, without recording a tape, dropout off.
std::pair<double, double> evaluate(tg::nn::Module& model, const Loader& loader,
                                   const tg::nn::CrossEntropyOptions& criterion) {
  tg::NoGradGuard no_grad;
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
  return {loss_sum / static_cast<double>(seen), static_cast<double>(correct) / static_cast<double>(seen)};
}

// metrics.csv: a header and one row per finished epoch, rewritten whole after each epoch, so that
// a run stopped at any point and resumed ends with the file an uninterrupted run writes. Numbers
// carry 17 significant digits: two runs compare bit for bit (all but the seconds column).
class MetricsCsv {
 public:
  static constexpr char kHeader[] = "epoch,train_loss,train_acc,test_loss,test_acc,lr,seconds";

  explicit MetricsCsv(fs::path path) : path_(std::move(path)) {}

  // Keeps the rows of the first `epochs` epochs of an earlier run (a run may have written its
  // row and stopped before its checkpoint).
  void keep_previous(int64_t epochs) {
    std::ifstream in(path_);
    std::string line;
    std::getline(in, line);  // the header
    while (static_cast<int64_t>(rows_.size()) < epochs && std::getline(in, line)) rows_.push_back(line);
    if (static_cast<int64_t>(rows_.size()) < epochs)
      std::cerr << kProgram << ": " << path_.string() << " holds " << rows_.size() << " of the " << epochs
                << " epochs in the checkpoint; the curves will miss the others\n";
  }

  void add(int64_t epoch, const Epoch& e) {
    char row[512];
    std::snprintf(row, sizeof row, "%lld,%.17g,%.17g,%.17g,%.17g,%.17g,%.3f", static_cast<long long>(epoch),
                  e.train_loss, e.train_accuracy, e.test_loss, e.test_accuracy, e.lr, e.seconds);
    rows_.emplace_back(row);
    // Written beside and renamed over: a reader never sees half a file.
    const fs::path temporary = path_.string() + ".tmp";
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << kHeader << '\n';
      for (const std::string& r : rows_) out << r << '\n';
      if (!out.flush()) throw std::runtime_error("cannot write " + temporary.string());
    }
    fs::rename(temporary, path_);
  }

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  std::vector<std::string> rows_;
};

// gnuplot's single-quoted string: a quote inside is written twice.
std::string gnuplot_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream directories(path != nullptr ? path : "");
  std::string directory;
  while (std::getline(directories, directory, ':'))
    if (!directory.empty() && ::access((fs::path(directory) / program).c_str(), X_OK) == 0) return true;
  return false;
}

// Loss and accuracy curves side by side, from metrics.csv, through gnuplot (popen: no library).
void plot(const fs::path& csv, const fs::path& png) {
  if (!on_path("gnuplot")) {
    std::cout << "gnuplot not found: metrics.png skipped (the numbers are in " << csv.string() << ")\n";
    return;
  }
  FILE* gnuplot = ::popen("gnuplot", "w");
  if (gnuplot == nullptr) {
    std::cout << "cannot start gnuplot: metrics.png skipped\n";
    return;
  }
  const std::string data = gnuplot_quoted(csv.string());
  std::fprintf(gnuplot,
               "set terminal pngcairo size 1100,420\n"
               "set output %s\n"
               "set datafile separator ','\n"
               "set key autotitle columnhead\n"
               "set xlabel 'epoch'\n"
               "set grid\n"
               "set multiplot layout 1,2\n"
               "set title 'loss (cross-entropy with label smoothing)'\n"
               "plot %s using 1:2 with linespoints title 'train', '' using 1:4 with linespoints title 'test'\n"
               "set title 'accuracy (%%)'\nset key bottom right\n"
               "plot %s using 1:($3*100) with linespoints title 'train', '' using 1:($5*100) with linespoints title 'test'\n"
               "unset multiplot\n",
               gnuplot_quoted(png.string()).c_str(), data.c_str(), data.c_str());
  if (::pclose(gnuplot) != 0 || !fs::exists(png))
    std::cout << "gnuplot failed: " << png.string() << " not written\n";
  else
    std::cout << "plotted " << png.string() << "\n";
}

// Flags through CLI11 (examples/flags.hpp); returns the exit status when the program should stop
// here (--help: 0, a bad flag or value: 2, after CLI11 printed why).
std::optional<int> parse_flags(int argc, char** argv, Settings& s) {
  CLI::App app{"fashion_mnist: train an MLP on Fashion-MNIST (Debian's dataset-fashion-mnist)", kProgram};
  app.add_option("--data", s.data, "directory holding the four Fashion-MNIST IDX files (.gz or plain)");
  app.add_option("--epochs", s.epochs, "epochs to train")->check(examples::positive);
  app.add_option("--batch", s.batch, "training batch size")->check(examples::positive);
  app.add_option("--lr", s.lr, "AdamW's peak learning rate, reached after the warm-up")->check(examples::positive);
  app.add_option("--weight-decay", s.weight_decay, "AdamW's decoupled weight decay")->check(examples::non_negative);
  app.add_option("--warmup-epochs", s.warmup_epochs, "epochs of linear warm-up (per step) before the cosine decay")
      ->check(examples::non_negative);
  app.add_option("--label-smoothing", s.label_smoothing, "cross-entropy's label smoothing")->check(examples::fraction);
  app.add_option("--dropout", s.dropout, "dropout probability after GELU")->check(examples::fraction);
  app.add_option("--seed", s.seed, "seeds the initialisation, the shuffling and dropout")->check(examples::non_negative);
  app.add_option("--threads", s.threads, "threads; 0: all cores")->check(examples::non_negative);
  app.add_option("--limit", s.limit, "train on the first N training images only; 0: all 60000")
      ->check(CLI::Range(int64_t{0}, kTrainingImages));
  app.add_option("--out", s.out, "directory for checkpoint.safetensors, metrics.csv and metrics.png");
  app.add_flag("--resume", s.resume, "continue from <out>/checkpoint.safetensors");
  app.add_option("--stop-after", s.stop_after,
                 "stop after this epoch as if interrupted (the schedule still spans --epochs); 0: never")
      ->check(examples::non_negative);
  app.add_flag("--verbose", s.verbose, "also print the CPU and the GEMM kernel chosen for it");
  // Runs inside parse, so that its error is reported and exits like any other bad value.
  app.callback([&s] {
    if (s.warmup_epochs >= s.epochs)
      throw CLI::ValidationError("--warmup-epochs", "expected fewer than --epochs (" + std::to_string(s.epochs) +
                                                        "), got " + std::to_string(s.warmup_epochs));
  });
  return examples::parse(app, argc, argv);
}

}  // namespace

int main(int argc, char** argv) try {
  Settings settings;
  if (const std::optional<int> status = parse_flags(argc, argv, settings)) return *status;
  const auto run_start = std::chrono::steady_clock::now();
  if (settings.threads > 0) tg::set_num_threads(settings.threads);
  if (settings.verbose) std::cout << "cpu: " << tg::to_string(tg::cpu_info()) << "\n";

  // Data, normalised once up front.
  Split train = read_split(settings.data, "train");
  Split test = read_split(settings.data, "t10k");
  if (settings.limit > 0) {
    std::vector<double> first_rows(static_cast<size_t>(settings.limit));
    std::iota(first_rows.begin(), first_rows.end(), 0.0);
    const tg::Tensor first = tg::tensor(first_rows, {settings.limit}, tg::kInt64);
    train = {train.images.index_select(0, first), train.labels.index_select(0, first)};
  }
  const Normalisation normalisation = measure(train.images);
  train.images = normalise(std::move(train.images), normalisation);
  test.images = normalise(std::move(test.images), normalisation);
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();

  // Random streams, as a PyTorch script would have them: torch.manual_seed(seed) for the
  // initialisation and dropout, a generator of its own for the shuffle. The test loader draws one
  // number per epoch (as PyTorch's iterator does), from a generator nothing else uses.
  tg::manual_seed(settings.seed);
  tg::Generator shuffle_generator(settings.seed);
  tg::Generator test_generator(settings.seed);
  Loader train_loader(tg::data::TensorDataset(train.images, train.labels),
                      {.batch_size = settings.batch, .shuffle = true, .generator = &shuffle_generator});
  Loader test_loader(tg::data::TensorDataset(test.images, test.labels),
                     {.batch_size = kTestBatch, .generator = &test_generator});

  tg::nn::Sequential model(tg::nn::Flatten(), tg::nn::Linear(kPixels, 512), tg::nn::LayerNorm({512}),
                           tg::nn::GELU(), tg::nn::Dropout(settings.dropout), tg::nn::Linear(512, kClasses));
  tg::optim::AdamW optimizer(model.parameters(), {.lr = settings.lr, .weight_decay = settings.weight_decay});
  // Per step: a linear warm-up from lr/100 over the warm-up epochs, then half a cosine down to 0.
  // (Without a warm-up no LinearLR is built at all: its construction would lower the lr that the
  // cosine then starts from.)
  const int64_t steps_per_epoch = train_loader.size();
  const int64_t warmup_steps = settings.warmup_epochs * steps_per_epoch;
  std::optional<tg::optim::LinearLR> warmup;
  if (warmup_steps > 0) warmup.emplace(optimizer, tg::optim::LinearLROptions{.start_factor = 0.01, .total_iters = warmup_steps});
  tg::optim::CosineAnnealingLR cosine(optimizer, (settings.epochs - settings.warmup_epochs) * steps_per_epoch);
  using Phases = std::vector<std::reference_wrapper<const tg::optim::EpochLRScheduler>>;
  tg::optim::SequentialLR schedule(optimizer, warmup ? Phases{*warmup, cosine} : Phases{cosine},
                                   warmup ? std::vector<int64_t>{warmup_steps} : std::vector<int64_t>{});
  const tg::nn::CrossEntropyOptions criterion{.label_smoothing = settings.label_smoothing};

  std::printf("%s: %lld training / %lld test images (mean %.4f, std %.4f after scaling to [0, 1]; read in %.2f s), "
              "%lld epochs of %lld batches of %lld, %d threads\n",
              kProgram, static_cast<long long>(train.labels.size(0)), static_cast<long long>(test.labels.size(0)),
              normalisation.mean, normalisation.std, load_seconds, static_cast<long long>(settings.epochs),
              static_cast<long long>(steps_per_epoch), static_cast<long long>(settings.batch), tg::get_num_threads());
  std::fflush(stdout);

  // Everything a resumed run needs to draw what this one would have drawn next.
  const tg::CheckpointOptions random_state{.generators = {&tg::default_generator(), &shuffle_generator}};
  const fs::path out(settings.out);
  fs::create_directories(out);
  const fs::path checkpoint = out / "checkpoint.safetensors";
  MetricsCsv metrics(out / "metrics.csv");
  int64_t first_epoch = 1;
  if (settings.resume) {
    if (!fs::exists(checkpoint)) throw std::runtime_error("--resume: there is no checkpoint at " + checkpoint.string());
    tg::load(model, optimizer, schedule, checkpoint.string(), random_state);
    const int64_t steps_done = schedule.last_epoch();
    if (steps_done % steps_per_epoch != 0)
      throw std::runtime_error(checkpoint.string() + " stopped after step " + std::to_string(steps_done) +
                               ", not at the end of an epoch of " + std::to_string(steps_per_epoch) +
                               " steps: resume with the --batch and --limit of the run that wrote it");
    first_epoch = steps_done / steps_per_epoch + 1;
    metrics.keep_previous(first_epoch - 1);
    std::cout << "resumed from " << checkpoint.string() << " after epoch " << first_epoch - 1 << "\n";
  }
  const int64_t last_epoch = settings.stop_after > 0 ? std::min(settings.stop_after, settings.epochs) : settings.epochs;

  double training_seconds = 0.0;
  Epoch epoch_metrics;
  for (int64_t epoch = first_epoch; epoch <= last_epoch; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    // On a terminal a bar redrawn in place; elsewhere (a pipe, CI's log) one line per epoch:
    //   epoch 3/10 60000/60000  loss 0.7688  acc 0.8853  test_acc 0.8739  17631 samples/s  in 3.5s
    tg::ProgressBar bar(train.labels.size(0), "epoch " + std::to_string(epoch) + "/" + std::to_string(settings.epochs),
                        std::cout, {.unit = "samples"});
    epoch_metrics = train_one_epoch(model, train_loader, optimizer, schedule, criterion, bar);
    std::tie(epoch_metrics.test_loss, epoch_metrics.test_accuracy) = evaluate(model, test_loader, criterion);
    epoch_metrics.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    training_seconds += epoch_metrics.seconds;
    bar.finish({{"test_acc", epoch_metrics.test_accuracy}});  // the test loss and the lr: in metrics.csv
    metrics.add(epoch, epoch_metrics);
    tg::save(model, optimizer, schedule, checkpoint.string(), random_state);
  }

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
} catch (const std::exception& error) {
  std::cerr << kProgram << ": " << error.what() << "\n";
  return 2;
}
