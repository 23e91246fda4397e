// char_gpt — a character-level GPT trained on the King James Bible (Debian's bible-kjv and
// bible-kjv-text) or on any UTF-8 text file, nanoGPT's shakespeare_char recipe on a CPU.
//
//   ./build/examples/char_gpt                               # 2,000 iterations of the default GPT (0.8M parameters)
//   ./build/examples/char_gpt --max-iters 20 --text FILE    # a quick look at any text
//   ./build/examples/char_gpt --resume --sample 500         # continue (or, once finished, just sample)
//   ./build/examples/char_gpt --help                        # every flag with its default
//   mpirun -np 2 ./build/examples/char_gpt --distributed --threads 1   # data-parallel, 2 ranks
//
// Training (model.hpp has the model): iterations it = 0 .. max_iters − 1 each take one AdamW step
// on a batch drawn as nanoGPT's get_batch does (random offsets into the training text). Before the
// step of every it % eval_interval == 0, and after the last, the mean loss of eval_iters batches of
// training and of validation text is measured (eval mode, no tape), written as a row of
// <out>/metrics.csv (with bits per character = loss / ln 2), and <out>/checkpoint.safetensors is
// saved: the model, AdamW's moments and step count, and the random generators, so that --resume
// continues bitwise identically to a run that never stopped. At the end <out>/metrics.png plots
// the curves when gnuplot is on PATH, and the last line reads
//   final val loss 1.4422 (2.0806 bits per character)
//
// --sample N: after training, N characters generated from --prompt with a key/value cache
// (--temperature, --top-k), and the characters per second.
//
// --distributed (under mpirun, when tapegrad::distributed was built): every rank trains the same
// model (tg::dist::DataParallel) on its own batches (rank r seeds its generators with --seed + r);
// --batch-size is per rank, evaluations average every rank's batches, and rank 0 alone prints and
// writes. The checkpoint holds every rank's generators: --resume needs the same number of ranks.
//
// Exit status: 0 after training, 2 on a bad flag, missing data or any other error.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numbers>
#include <optional>
#include <string>
#include <vector>
#include <tapegrad/tapegrad.hpp>

#include "../flags.hpp"
#include "../job.hpp"
#include "../metrics.hpp"
#include "model.hpp"
#include "text.hpp"

namespace {

namespace fs = std::filesystem;

constexpr char kProgram[] = "char_gpt";

struct Settings {
  std::string text;  // empty: the Bible
  int64_t max_iters = 2000;
  int64_t batch_size = 12;
  int64_t block_size = 64;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  double lr = 1e-3;
  int64_t warmup_iters = 100;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;
  uint64_t seed = 0;
  int threads = 0;
  std::string out = "char_gpt_out";
  bool resume = false;
  int64_t stop_after = 0;
  int64_t sample = 0;
  double temperature = 0.8;
  int64_t top_k = 0;
  std::string prompt = "\n";
  bool verbose = false;
  bool distributed = false;
};

std::optional<int> parse_flags(int argc, char** argv, Settings& s) {
  CLI::App app{"char_gpt: train a character-level GPT on the King James Bible (Debian's bible-kjv) or a text file",
               kProgram};
  app.add_option("--text", s.text, "train on this UTF-8 text file (its last 10% validates) instead of the Bible");
  app.add_option("--max-iters", s.max_iters, "training iterations (optimizer steps)")->check(examples::non_negative);
  app.add_option("--batch-size", s.batch_size, "blocks per batch (per rank with --distributed)")->check(examples::positive);
  app.add_option("--block-size", s.block_size, "characters of context")->check(examples::positive);
  app.add_option("--n-layer", s.n_layer, "transformer layers")->check(examples::positive);
  app.add_option("--n-head", s.n_head, "attention heads per layer (must divide --n-embd)")->check(examples::positive);
  app.add_option("--n-embd", s.n_embd, "width of the residual stream")->check(examples::positive);
  app.add_option("--dropout", s.dropout, "dropout probability")->check(examples::fraction);
  app.add_option("--lr", s.lr, "AdamW's peak learning rate (the cosine ends at lr/10)")->check(examples::positive);
  app.add_option("--warmup-iters", s.warmup_iters, "iterations of linear warm-up")->check(examples::non_negative);
  app.add_option("--weight-decay", s.weight_decay, "AdamW's decoupled weight decay on Linear weights")
      ->check(examples::non_negative);
  app.add_option("--grad-clip", s.grad_clip, "clip the gradients' global norm to this; 0: no clipping")
      ->check(examples::non_negative);
  app.add_option("--eval-interval", s.eval_interval, "evaluate (and save a checkpoint) every this many iterations")
      ->check(examples::positive);
  app.add_option("--eval-iters", s.eval_iters, "batches of training and of validation text per evaluation")
      ->check(examples::positive);
  app.add_option("--seed", s.seed, "seeds the initialisation, dropout and the batches")->check(examples::non_negative);
  app.add_option("--threads", s.threads, "threads; 0: all cores")->check(examples::non_negative);
  app.add_option("--out", s.out, "directory for checkpoint.safetensors, metrics.csv and metrics.png");
  app.add_flag("--resume", s.resume, "continue from <out>/checkpoint.safetensors");
  app.add_option("--stop-after", s.stop_after,
                 "stop after this many iterations as if interrupted (a multiple of --eval-interval; the schedule "
                 "still spans --max-iters); 0: never")
      ->check(examples::non_negative);
  app.add_option("--sample", s.sample, "characters to generate after training (KV cache)")->check(examples::non_negative);
  app.add_option("--temperature", s.temperature, "sampling: logits are divided by this")->check(examples::positive);
  app.add_option("--top-k", s.top_k, "sampling: draw among the k likeliest characters; 0: all")
      ->check(examples::non_negative);
  app.add_option("--prompt", s.prompt, "sampling: the text generation continues (at most --block-size characters)");
  app.add_flag("--verbose", s.verbose, "also print the CPU and the GEMM kernel chosen for it");
  app.add_flag("--distributed", s.distributed,
               "train data-parallel on the ranks of an MPI job (mpirun -np N); --batch-size is per rank");
  app.callback([&s] {
    if (s.n_embd % s.n_head != 0)
      throw CLI::ValidationError("--n-head", "expected a divisor of --n-embd (" + std::to_string(s.n_embd) + "), got " +
                                                 std::to_string(s.n_head));
    if (s.stop_after % s.eval_interval != 0)
      throw CLI::ValidationError("--stop-after", "expected a multiple of --eval-interval (" +
                                                     std::to_string(s.eval_interval) + "), got " +
                                                     std::to_string(s.stop_after));
  });
  return examples::parse(app, argc, argv);
}

// The tokens of UTF-8 `text` as int64 [N].
tg::Tensor token_tensor(const char_gpt::Vocabulary& vocabulary, const std::string& text) {
  const std::vector<int64_t> ids = vocabulary.encode(text);
  std::vector<double> values(ids.begin(), ids.end());
  return tg::tensor(values, {static_cast<int64_t>(values.size())}, tg::kInt64);
}

// bzip2 -9's size of `text` in bits per character, for scale (a compressor that knows no
// English; the GPT should beat it), by piping the text through the bzip2 program; nullopt
// when bzip2 is not on PATH or fails.
std::optional<double> bzip2_bits_per_character(const std::string& text, int64_t characters, const fs::path& scratch) {
  if (!examples::on_path("bzip2") || characters == 0) return std::nullopt;
  {
    std::ofstream out(scratch, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return std::nullopt;
  }
  FILE* pipe = ::popen(("bzip2 -9 -c < '" + scratch.string() + "'").c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  size_t bytes = 0, read = 0;
  char buffer[1 << 16];
  while ((read = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) bytes += read;
  const int status = ::pclose(pipe);
  fs::remove(scratch);
  if (status != 0) return std::nullopt;
  return 8.0 * static_cast<double>(bytes) / static_cast<double>(characters);
}

// A checkpoint's random generators, as save and load list them: per rank (in rank order), the
// default generator (initialisation, dropout) and the batches' generator. Alone: this process's
// own. Neither copied nor moved: `options` points into it.
struct RandomState {
  RandomState(const examples::Job& job, tg::Generator& batches) {
    if (!job.distributed()) {
      options.generators = {&tg::default_generator(), &batches};
      return;
    }
    ranks.resize(2 * static_cast<size_t>(job.world_size()));
    for (tg::Generator& generator : ranks) options.generators.push_back(&generator);
  }
  RandomState(const RandomState&) = delete;
  RandomState& operator=(const RandomState&) = delete;

  std::vector<tg::Generator> ranks;  // distributed: rank r's dropout at 2r, its batches at 2r + 1
  tg::CheckpointOptions options;
};

struct Evaluation {
  double train_loss = 0.0;
  double val_loss = 0.0;
};

// nanoGPT's estimate_loss: the mean loss of eval_iters batches of training text, then of
// validation text, drawn from `batches`, in eval mode without a tape; over every rank's batches.
Evaluation evaluate(char_gpt::GPT& model, const tg::data::TokenBlocks& train, const tg::data::TokenBlocks& val,
                    const Settings& s, tg::Generator& batches, const examples::Job& job) {
  tg::NoGradGuard no_grad;
  model.eval();
  std::vector<double> sums;
  for (const tg::data::TokenBlocks* split : {&train, &val}) {
    double sum = 0.0;
    for (int64_t i = 0; i < s.eval_iters; ++i) {
      const tg::data::Example batch = split->sample(s.batch_size, batches);
      sum += char_gpt::loss_of(model, batch.data, batch.target).item();
    }
    sums.push_back(sum);
  }
  model.train();
  sums = job.sum(sums);
  const double count = static_cast<double>(s.eval_iters * job.world_size());
  return {sums[0] / count, sums[1] / count};
}

void plot(const fs::path& csv, const fs::path& png) {
  examples::plot(csv, png,
                 "set xlabel 'iteration'\n"
                 "set grid\n"
                 "set multiplot layout 1,2\n"
                 "set title 'loss (cross-entropy, nats)'\n"
                 "plot data using 1:2 with linespoints title 'train', '' using 1:3 with linespoints title 'val'\n"
                 "set title 'bits per character'\n"
                 "plot data using 1:4 with linespoints title 'train', '' using 1:5 with linespoints title 'val'\n"
                 "unset multiplot\n");
}

int run(const Settings& s, examples::Job& job) {
  const auto run_start = std::chrono::steady_clock::now();
  if (s.threads > 0) tg::set_num_threads(s.threads);
  std::ostream silent(nullptr);
  std::ostream& log = job.leads() ? std::cout : silent;
  if (s.verbose) log << "cpu: " << tg::to_string(tg::cpu_info()) << "\n";

  // Data: the split text, its vocabulary (the characters of both parts), the tokens.
  const char_gpt::Corpus corpus = s.text.empty() ? char_gpt::read_bible() : char_gpt::read_text_file(s.text);
  const char_gpt::Vocabulary vocabulary(corpus.train + corpus.val);
  const tg::Tensor train_tokens = token_tensor(vocabulary, corpus.train);
  const tg::Tensor val_tokens = token_tensor(vocabulary, corpus.val);
  for (const auto& [name, tokens] : {std::pair{"training", &train_tokens}, std::pair{"validation", &val_tokens}})
    if (tokens->numel() < s.block_size + 1)
      throw std::runtime_error(std::string("the ") + name + " text has " + std::to_string(tokens->numel()) +
                               " characters, fewer than --block-size + 1 = " + std::to_string(s.block_size + 1) +
                               ": give a longer text or a smaller --block-size");
  const tg::data::TokenBlocks train(train_tokens, s.block_size), val(val_tokens, s.block_size);

  // Random streams as the PyTorch twin has them: the default generator (torch.manual_seed) for
  // the initialisation and dropout, one generator of its own for every batch, training and
  // evaluation alike. Distributed: rank r seeds seed + r (the initialisation is rank 0's on every
  // rank: DataParallel broadcasts it).
  const uint64_t rank_seed = s.seed + static_cast<uint64_t>(job.rank());
  tg::manual_seed(rank_seed);
  tg::Generator batches(rank_seed);
  char_gpt::GPT model({.vocab_size = vocabulary.size(), .block_size = s.block_size, .n_layer = s.n_layer,
                       .n_head = s.n_head, .n_embd = s.n_embd, .dropout = s.dropout});
  char_gpt::init_gpt2(model);
  job.replicate(model);
  const char_gpt::OptimizerConfig schedule{.lr = s.lr, .min_lr = s.lr / 10, .warmup_iters = s.warmup_iters,
                                           .lr_decay_iters = s.max_iters, .weight_decay = s.weight_decay,
                                           .grad_clip = s.grad_clip};
  const std::unique_ptr<tg::optim::AdamW> optimizer = char_gpt::make_optimizer(model, schedule);

  int64_t parameters = 0;
  for (const tg::Tensor& p : model.parameters()) parameters += p.numel();
  if (job.leads()) {
    if (s.text.empty())
      std::printf("%s: %s: %lld verses in %lld chapters; every 10th chapter (%lld) validates\n", kProgram,
                  corpus.source.c_str(), static_cast<long long>(corpus.verses), static_cast<long long>(corpus.chapters),
                  static_cast<long long>(corpus.val_chapters));
    else
      std::printf("%s: %s: the first 90%% of the characters train, the last 10%% validate\n", kProgram,
                  corpus.source.c_str());
    std::printf("%lld training / %lld validation characters, %lld distinct; GPT of %.2fM parameters (n_layer %lld, "
                "n_head %lld, n_embd %lld, block_size %lld), batch %lld, %d threads\n",
                static_cast<long long>(train_tokens.numel()), static_cast<long long>(val_tokens.numel()),
                static_cast<long long>(vocabulary.size()), static_cast<double>(parameters) / 1e6,
                static_cast<long long>(s.n_layer), static_cast<long long>(s.n_head), static_cast<long long>(s.n_embd),
                static_cast<long long>(s.block_size), static_cast<long long>(s.batch_size), tg::get_num_threads());
    if (job.distributed())
      std::printf("distributed: %d ranks, each %lld blocks per step (%lld in all)\n", job.world_size(),
                  static_cast<long long>(s.batch_size), static_cast<long long>(s.batch_size * job.world_size()));
    std::fflush(stdout);
  }

  RandomState random(job, batches);
  const fs::path out(s.out);
  if (job.leads()) fs::create_directories(out);
  const fs::path checkpoint = out / "checkpoint.safetensors";
  examples::MetricsCsv metrics(out / "metrics.csv", "iter,train_loss,val_loss,train_bpc,val_bpc,lr,seconds");
  const int64_t last = s.stop_after > 0 ? std::min(s.stop_after, s.max_iters) : s.max_iters;
  int64_t first = 0;
  if (s.resume) {
    if (!fs::exists(checkpoint)) throw std::runtime_error("--resume: there is no checkpoint at " + checkpoint.string());
    tg::load(model, *optimizer, checkpoint.string(), random.options);
    if (job.distributed()) {
      tg::default_generator().set_state(random.ranks[2 * static_cast<size_t>(job.rank())].get_state());
      batches.set_state(random.ranks[2 * static_cast<size_t>(job.rank()) + 1].get_state());
    }
    first = optimizer->step_count();
    if (first > s.max_iters || (first % s.eval_interval != 0 && first != s.max_iters))
      throw std::runtime_error(checkpoint.string() + " stopped after iteration " + std::to_string(first) +
                               ", which this run's --max-iters " + std::to_string(s.max_iters) + " and --eval-interval " +
                               std::to_string(s.eval_interval) + " never checkpoint: resume with the run's own flags");
    // The rows of the evaluations up to `first`, its own included.
    if (job.leads()) metrics.keep_previous((first + s.eval_interval - 1) / s.eval_interval + 1);
    log << "resumed from " << checkpoint.string() << " after iteration " << first << "\n";
  }

  const double ln2 = std::numbers::ln2;
  const int64_t tokens_per_step = s.batch_size * s.block_size * job.world_size();
  double train_seconds = 0.0;
  int64_t steps_run = 0;
  std::optional<Evaluation> final_evaluation;
  const auto save_state = [&] {
    if (job.distributed()) {
      const std::vector<tg::GeneratorState> dropout = job.gather(tg::default_generator());
      const std::vector<tg::GeneratorState> batch = job.gather(batches);
      for (size_t r = 0; r < dropout.size(); ++r) {
        random.ranks[2 * r].set_state(dropout[r]);
        random.ranks[2 * r + 1].set_state(batch[r]);
      }
    }
    if (job.leads()) tg::save(model, *optimizer, checkpoint.string(), random.options);
  };
  for (int64_t it = first; it <= last;) {
    // An evaluation and a checkpoint before this iteration's step (a resumed run has its own).
    if ((it % s.eval_interval == 0 || it == last) && !(s.resume && it == first)) {
      const auto start = std::chrono::steady_clock::now();
      const Evaluation e = evaluate(model, train, val, s, batches, job);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      log << "iter " << it << ": train loss " << e.train_loss << ", val loss " << e.val_loss << " ("
          << e.val_loss / ln2 << " bits per character)\n";
      if (job.leads()) {
        char tail[32];
        std::snprintf(tail, sizeof tail, ",%.3f", seconds);
        metrics.add(examples::csv_row(it, {e.train_loss, e.val_loss, e.train_loss / ln2, e.val_loss / ln2,
                                           char_gpt::get_lr(it, schedule)}) + tail);
      }
      save_state();
      final_evaluation = e;
    }
    if (it == last) break;
    // The iterations up to the next evaluation, under one bar:
    //   iter 250-500/2000 250/250  loss 1.713  tok/s 2.1e+04  2.3 it/s  in 1:49
    const int64_t stop = std::min(last, (it / s.eval_interval + 1) * s.eval_interval);
    tg::ProgressBar bar(stop - it, "iter " + std::to_string(it) + "-" + std::to_string(stop) + "/" +
                                       std::to_string(s.max_iters), log, {.unit = "it"});
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0.0;
    for (const int64_t segment_start = it; it < stop; ++it) {
      const tg::data::Example batch = train.sample(s.batch_size, batches);
      const char_gpt::StepResult step = char_gpt::train_step(model, *optimizer, schedule, it, batch.data, batch.target,
                                                             [&job](const tg::Tensor& loss) { job.backward(loss); });
      loss_sum += step.loss;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      bar.update(it + 1 - segment_start,
                 {{"loss", step.loss}, {"tok/s", static_cast<double>(tokens_per_step * (it + 1 - segment_start)) / seconds}});
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    train_seconds += seconds;
    steps_run += bar.total();
    bar.finish({{"mean_loss", loss_sum / static_cast<double>(bar.total())}});
  }
  if (!job.leads()) return 0;

  if (steps_run > 0)
    std::printf("%.1f ms per step, %.0f tokens/s at %d threads (%lld steps; %.1f s in all)\n",
                1e3 * train_seconds / static_cast<double>(steps_run),
                static_cast<double>(tokens_per_step * steps_run) / train_seconds, tg::get_num_threads(),
                static_cast<long long>(steps_run),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count());
  std::cout << "wrote " << metrics.path().string() << " and " << checkpoint.string() << "\n";
  plot(metrics.path(), out / "metrics.png");

  if (s.sample > 0) {
    std::vector<int64_t> prompt = vocabulary.encode(s.prompt);
    tg::Generator sampling(s.seed);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int64_t> tokens = char_gpt::generate(
        model, prompt, {.max_new_tokens = s.sample, .temperature = s.temperature, .top_k = s.top_k}, sampling);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "---- sample (temperature " << s.temperature << ", top-k " << s.top_k << ")\n"
              << vocabulary.decode(tokens) << "\n----\n";
    std::printf("sampled %lld characters in %.2f s: %.0f characters/s (key/value cache)\n",
                static_cast<long long>(s.sample), seconds, static_cast<double>(s.sample) / seconds);
  }
  if (const std::optional<double> bzip2 = bzip2_bits_per_character(
          corpus.val, static_cast<int64_t>(val_tokens.numel()), out / "validation.txt"))
    std::printf("for scale: bzip2 -9 compresses the validation text to %.4f bits per character\n", *bzip2);
  if (final_evaluation)
    std::printf("final val loss %.4f (%.4f bits per character)\n", final_evaluation->val_loss,
                final_evaluation->val_loss / ln2);
  else
    std::printf("nothing left to train: %s had finished its %lld iterations\n", checkpoint.string().c_str(),
                static_cast<long long>(s.max_iters));
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (const std::optional<int> status = parse_flags(argc, argv, settings)) return *status;
  return examples::run_job(argc, argv, settings.distributed, kProgram,
                           [&](examples::Job& job) { return run(settings, job); });
}
