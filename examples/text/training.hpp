// The training run the character models share (examples/char_gpt, examples/char_lstm): their
// common flags, the data (corpus.hpp) as tokens and batches, the loop with its evaluations,
// progress bar, metrics.csv/png and checkpoints, --resume, --sample and the final report. A
// program brings its model, its optimizer and what a step, a loss and a generated text are:
//
//   examples::text::Settings s(/*batch_size*/ 32, /*block_size*/ 128, /*out*/ "char_lstm_out");
//   examples::text::add_data_flags(app, s);   // --text --max-iters --batch-size --block-size
//   ... the program's own flags ...
//   examples::text::add_run_flags(app, s);    // --eval-interval ... --distributed
//   const examples::text::Data data = examples::text::load_data(s, job);
//   tg::manual_seed(examples::text::rank_seed(s, job));
//   Model model(...); Adam optimizer(...);
//   return examples::text::train(kProgram, s, data, {.module = model, .optimizer = optimizer, ...}, job);
//
// Training: iterations it = 0 .. max_iters − 1 each take one optimizer step on a batch drawn as
// nanoGPT's get_batch does (random offsets into the training text). Before the step of every
// it % eval_interval == 0, and after the last, the mean loss of eval_iters batches of training
// and of validation text is measured (eval mode, no tape), written as a row of <out>/metrics.csv
// (with bits per character = loss / ln 2), and <out>/checkpoint.safetensors is saved: the model,
// the optimizer's state and step count, and the random generators, so that --resume continues
// bitwise identically to a run that never stopped. At the end <out>/metrics.png plots the curves
// when gnuplot is on PATH, and the last line reads
//   final val loss 1.4422 (2.0806 bits per character)
//
// --sample N: after training, N characters generated from --prompt (--temperature, --top-k), and
// the characters per second.
//
// --distributed (under mpirun, when tapegrad::distributed was built): every rank trains the same
// model (tg::dist::DataParallel, through examples::Job) on its own batches (rank r seeds its
// generators with --seed + r); --batch-size is per rank, evaluations average every rank's batches,
// and rank 0 alone prints and writes. The checkpoint holds every rank's generators: --resume needs
// the same number of ranks.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <tapegrad/tapegrad.hpp>

#include "../flags.hpp"
#include "../job.hpp"
#include "../metrics.hpp"
#include "corpus.hpp"
#include "sample.hpp"

namespace examples::text {

// The flags every character model has, with the defaults they share and each program's own.
struct Settings {
  Settings(int64_t batch_size, int64_t block_size, std::string out)
      : batch_size(batch_size), block_size(block_size), out(std::move(out)) {}

  std::string text;  // empty: the Bible
  int64_t max_iters = 2000;
  int64_t batch_size;
  int64_t block_size;
  int64_t eval_interval = 250;
  int64_t eval_iters = 20;
  uint64_t seed = 0;
  int threads = 0;
  std::string matmul_precision = "highest";
  std::string autocast = "none";
  std::string out;
  bool resume = false;
  int64_t stop_after = 0;
  int64_t sample = 0;
  double temperature = 0.8;
  int64_t top_k = 0;
  std::string prompt = "\n";
  bool verbose = false;
  bool distributed = false;
};

// --text --max-iters --batch-size --block-size: what the model reads.
inline void add_data_flags(CLI::App& app, Settings& s) {
  app.add_option("--text", s.text, "train on this UTF-8 text file (its last 10% validates) instead of the Bible");
  app.add_option("--max-iters", s.max_iters, "training iterations (optimizer steps)")->check(non_negative);
  app.add_option("--batch-size", s.batch_size, "blocks per batch (per rank with --distributed)")->check(positive);
  app.add_option("--block-size", s.block_size, "characters of context")->check(positive);
}

// --eval-interval ... --distributed: how the run evaluates, saves, resumes, samples and reports.
// `prompt_help` says what limits the prompt, if anything.
inline void add_run_flags(CLI::App& app, Settings& s, const std::string& prompt_help = "") {
  app.add_option("--eval-interval", s.eval_interval, "evaluate (and save a checkpoint) every this many iterations")
      ->check(positive);
  app.add_option("--eval-iters", s.eval_iters, "batches of training and of validation text per evaluation")
      ->check(positive);
  app.add_option("--seed", s.seed, "seeds the initialisation, dropout and the batches")->check(non_negative);
  app.add_option("--threads", s.threads, "threads; 0: all cores")->check(non_negative);
  add_matmul_precision_flag(app, s.matmul_precision);
  add_autocast_flag(app, s.autocast);
  app.add_option("--out", s.out, "directory for checkpoint.safetensors, metrics.csv and metrics.png");
  app.add_flag("--resume", s.resume, "continue from <out>/checkpoint.safetensors");
  app.add_option("--stop-after", s.stop_after,
                 "stop after this many iterations as if interrupted (a multiple of --eval-interval; the schedule "
                 "still spans --max-iters); 0: never")
      ->check(non_negative);
  app.add_option("--sample", s.sample, "characters to generate after training")->check(non_negative);
  app.add_option("--temperature", s.temperature, "sampling: logits are divided by this")->check(positive);
  app.add_option("--top-k", s.top_k, "sampling: draw among the k likeliest characters; 0: all")->check(non_negative);
  app.add_option("--prompt", s.prompt, "sampling: the text generation continues" + prompt_help);
  app.add_flag("--verbose", s.verbose, "also print the CPU and the GEMM kernel chosen for it");
  app.add_flag("--distributed", s.distributed,
               "train data-parallel on the ranks of an MPI job (mpirun -np N); --batch-size is per rank");
}

// The checks between run flags, for the program's app.callback (CLI::ValidationError).
inline void check_run_flags(const Settings& s) {
  if (s.stop_after % s.eval_interval != 0)
    throw CLI::ValidationError("--stop-after", "expected a multiple of --eval-interval (" +
                                                   std::to_string(s.eval_interval) + "), got " +
                                                   std::to_string(s.stop_after));
}

// The tokens of UTF-8 `text` as int64 [N].
inline tg::Tensor token_tensor(const Vocabulary& vocabulary, const std::string& text) {
  const std::vector<int64_t> ids = vocabulary.encode(text);
  std::vector<double> values(ids.begin(), ids.end());
  return tg::tensor(values, {static_cast<int64_t>(values.size())}, tg::kInt64);
}

// The split text, its vocabulary (the characters of both parts), the tokens and their batches.
struct Data {
  std::chrono::steady_clock::time_point start;  // when load_data began: the run's start
  Corpus corpus;
  Vocabulary vocabulary;
  tg::Tensor train_tokens, val_tokens;  // int64 [N]
  tg::data::TokenBlocks train, val;
};

// --threads, --verbose's CPU line (on the leading rank), then the Bible or --text split, checked
// long enough for --block-size. Errors are std::runtime_error saying what to change.
inline Data load_data(const Settings& s, const Job& job) {
  const auto start = std::chrono::steady_clock::now();
  if (s.threads > 0) tg::set_num_threads(s.threads);
  tg::set_float32_matmul_precision(s.matmul_precision);
  if (s.verbose && job.leads()) std::cout << "cpu: " << tg::to_string(tg::cpu_info()) << "\n";
  Corpus corpus = s.text.empty() ? read_bible() : read_text_file(s.text);
  Vocabulary vocabulary(corpus.train + corpus.val);
  tg::Tensor train_tokens = token_tensor(vocabulary, corpus.train);
  tg::Tensor val_tokens = token_tensor(vocabulary, corpus.val);
  for (const auto& [name, tokens] : {std::pair{"training", &train_tokens}, std::pair{"validation", &val_tokens}})
    if (tokens->numel() < s.block_size + 1)
      throw std::runtime_error(std::string("the ") + name + " text has " + std::to_string(tokens->numel()) +
                               " characters, fewer than --block-size + 1 = " + std::to_string(s.block_size + 1) +
                               ": give a longer text or a smaller --block-size");
  tg::data::TokenBlocks train(train_tokens, s.block_size), val(val_tokens, s.block_size);
  return {start, std::move(corpus), std::move(vocabulary), std::move(train_tokens), std::move(val_tokens), std::move(train),
          std::move(val)};
}

// The seed of this rank's generators (initialisation, dropout, batches): --seed + rank, as the
// PyTorch twins seed theirs. Distributed, the initialisation is rank 0's on every rank anyway
// (DataParallel broadcasts it).
inline uint64_t rank_seed(const Settings& s, const Job& job) { return s.seed + static_cast<uint64_t>(job.rank()); }

// bzip2 -9's size of `text` in bits per character, for scale (a compressor that knows no
// English; the model should beat it), by piping the text through the bzip2 program; nullopt
// when bzip2 is not on PATH or fails.
inline std::optional<double> bzip2_bits_per_character(const std::string& text, int64_t characters,
                                                      const std::filesystem::path& scratch) {
  if (!on_path("bzip2") || characters == 0) return std::nullopt;
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
  std::filesystem::remove(scratch);
  if (status != 0) return std::nullopt;
  return 8.0 * static_cast<double>(bytes) / static_cast<double>(characters);
}

// What train() needs of a program's model.
struct Model {
  tg::nn::Module& module;
  tg::optim::Optimizer& optimizer;
  std::string name;     // "GPT"
  std::string details;  // "n_layer 4, n_head 4, n_embd 128, block_size 64"
  // The mean cross-entropy of the batch x [B, T] against its next characters y [B, T].
  std::function<tg::Tensor(const tg::Tensor& x, const tg::Tensor& y)> loss;
  // One training step at iteration `it` on `batch` (backward through Job::backward); its loss.
  std::function<double(int64_t it, const tg::data::Example& batch)> step;
  // The learning rate of iteration `it`, for metrics.csv.
  std::function<double(int64_t it)> lr;
  // `prompt` followed by `count` generated characters (sample_next with --temperature, --top-k).
  std::function<std::vector<int64_t>(const std::vector<int64_t>& prompt, int64_t count, const Settings& s,
                                     tg::Generator& generator)>
      generate;
  std::string generation;  // how generate keeps its context, printed with the rate: "key/value cache"
};

// A checkpoint's random generators, as save and load list them: per rank (in rank order), the
// default generator (initialisation, dropout) and the batches' generator. Alone: this process's
// own. Neither copied nor moved: `options` points into it.
struct RandomState {
  RandomState(const Job& job, tg::Generator& batches) {
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
inline Evaluation evaluate(Model& model, const Data& data, const Settings& s, tg::Generator& batches, const Job& job) {
  tg::NoGradGuard no_grad;
  model.module.eval();
  std::vector<double> sums;
  for (const tg::data::TokenBlocks* split : {&data.train, &data.val}) {
    double sum = 0.0;
    for (int64_t i = 0; i < s.eval_iters; ++i) {
      const tg::data::Example batch = split->sample(s.batch_size, batches);
      sum += model.loss(batch.data, batch.target).item();
    }
    sums.push_back(sum);
  }
  model.module.train();
  sums = job.sum(sums);
  const double count = static_cast<double>(s.eval_iters * job.world_size());
  return {sums[0] / count, sums[1] / count};
}

inline void plot(const std::filesystem::path& csv, const std::filesystem::path& png) {
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

// The run after the model is built (from the default generator, seeded with rank_seed) and
// replicated: the header, the loop (or its resumption), the report and the sample. Returns the
// exit status.
inline int train(const char* program, const Settings& s, const Data& data, Model model, Job& job) {
  namespace fs = std::filesystem;
  std::ostream silent(nullptr);
  std::ostream& log = job.leads() ? std::cout : silent;
  // Random streams as the PyTorch twins have them: the default generator (torch.manual_seed) for
  // the initialisation and dropout, one generator of its own for every batch, training and
  // evaluation alike.
  tg::Generator batches(rank_seed(s, job));

  int64_t parameters = 0;
  for (const tg::Tensor& p : model.module.parameters()) parameters += p.numel();
  if (job.leads()) {
    const Corpus& corpus = data.corpus;
    if (s.text.empty())
      std::printf("%s: %s: %lld verses in %lld chapters; every 10th chapter (%lld) validates\n", program,
                  corpus.source.c_str(), static_cast<long long>(corpus.verses), static_cast<long long>(corpus.chapters),
                  static_cast<long long>(corpus.val_chapters));
    else
      std::printf("%s: %s: the first 90%% of the characters train, the last 10%% validate\n", program,
                  corpus.source.c_str());
    std::printf("%lld training / %lld validation characters, %lld distinct; %s of %.2fM parameters (%s), batch %lld, "
                "%d threads%s\n",
                static_cast<long long>(data.train_tokens.numel()), static_cast<long long>(data.val_tokens.numel()),
                static_cast<long long>(data.vocabulary.size()), model.name.c_str(),
                static_cast<double>(parameters) / 1e6, model.details.c_str(), static_cast<long long>(s.batch_size),
                tg::get_num_threads(),
                (std::string(s.matmul_precision == "highest" ? "" : ", matmul precision " + s.matmul_precision) +
                 (s.autocast == "none" ? "" : ", autocast " + s.autocast))
                    .c_str());
    if (job.distributed())
      std::printf("distributed: %d ranks, each %lld blocks per step (%lld in all)\n", job.world_size(),
                  static_cast<long long>(s.batch_size), static_cast<long long>(s.batch_size * job.world_size()));
    std::fflush(stdout);
  }

  RandomState random(job, batches);
  const fs::path out(s.out);
  if (job.leads()) fs::create_directories(out);
  const fs::path checkpoint = out / "checkpoint.safetensors";
  MetricsCsv metrics(out / "metrics.csv", "iter,train_loss,val_loss,train_bpc,val_bpc,lr,seconds");
  const int64_t last = s.stop_after > 0 ? std::min(s.stop_after, s.max_iters) : s.max_iters;
  int64_t first = 0;
  if (s.resume) {
    if (!fs::exists(checkpoint)) throw std::runtime_error("--resume: there is no checkpoint at " + checkpoint.string());
    tg::load(model.module, model.optimizer, checkpoint.string(), random.options);
    if (job.distributed()) {
      tg::default_generator().set_state(random.ranks[2 * static_cast<size_t>(job.rank())].get_state());
      batches.set_state(random.ranks[2 * static_cast<size_t>(job.rank()) + 1].get_state());
    }
    first = model.optimizer.step_count();
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
    if (job.leads()) tg::save(model.module, model.optimizer, checkpoint.string(), random.options);
  };
  for (int64_t it = first; it <= last;) {
    // An evaluation and a checkpoint before this iteration's step (a resumed run has its own).
    if ((it % s.eval_interval == 0 || it == last) && !(s.resume && it == first)) {
      const auto start = std::chrono::steady_clock::now();
      const Evaluation e = evaluate(model, data, s, batches, job);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      log << "iter " << it << ": train loss " << e.train_loss << ", val loss " << e.val_loss << " ("
          << e.val_loss / ln2 << " bits per character)\n";
      if (job.leads()) {
        char tail[32];
        std::snprintf(tail, sizeof tail, ",%.3f", seconds);
        metrics.add(csv_row(it, {e.train_loss, e.val_loss, e.train_loss / ln2, e.val_loss / ln2, model.lr(it)}) + tail);
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
      const double loss = model.step(it, data.train.sample(s.batch_size, batches));
      loss_sum += loss;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      bar.update(it + 1 - segment_start,
                 {{"loss", loss}, {"tok/s", static_cast<double>(tokens_per_step * (it + 1 - segment_start)) / seconds}});
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
                std::chrono::duration<double>(std::chrono::steady_clock::now() - data.start).count());
  std::cout << "wrote " << metrics.path().string() << " and " << checkpoint.string() << "\n";
  plot(metrics.path(), out / "metrics.png");

  if (s.sample > 0) {
    tg::Generator sampling(s.seed);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int64_t> tokens = model.generate(data.vocabulary.encode(s.prompt), s.sample, s, sampling);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "---- sample (temperature " << s.temperature << ", top-k " << s.top_k << ")\n"
              << data.vocabulary.decode(tokens) << "\n----\n";
    std::printf("sampled %lld characters in %.2f s: %.0f characters/s (%s)\n", static_cast<long long>(s.sample),
                seconds, static_cast<double>(s.sample) / seconds, model.generation.c_str());
  }
  if (const std::optional<double> bzip2 = bzip2_bits_per_character(
          data.corpus.val, static_cast<int64_t>(data.val_tokens.numel()), out / "validation.txt"))
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

}  // namespace examples::text
