// char_gpt — a character-level GPT trained on the King James Bible (Debian's bible-kjv and
// bible-kjv-text) or on any UTF-8 text file, nanoGPT's shakespeare_char recipe on a CPU.
//
//   ./build/examples/char_gpt                               # 2,000 iterations of the default GPT (0.8M parameters)
//   ./build/examples/char_gpt --max-iters 20 --text FILE    # a quick look at any text
//   ./build/examples/char_gpt --resume --sample 500         # continue (or, once finished, just sample)
//   ./build/examples/char_gpt --help                        # every flag with its default
//   mpirun -np 2 ./build/examples/char_gpt --distributed --threads 1   # data-parallel, 2 ranks
//
// model.hpp has the model, nanoGPT's AdamW set-up and schedule, and generation with a key/value
// cache; the data, the loop (evaluations, metrics.csv/png, checkpoints, --resume, --sample,
// --distributed) and the last line
//   final val loss 1.4422 (2.0806 bits per character)
// are the character models' shared run, ../text/training.hpp (examples/char_lstm has it too).
//
// Exit status: 0 after training, 2 on a bad flag, missing data or any other error.
#include <memory>
#include <optional>
#include <string>
#include <tapegrad/tapegrad.hpp>

#include "../flags.hpp"
#include "../job.hpp"
#include "../text/training.hpp"
#include "model.hpp"

namespace {

constexpr char kProgram[] = "char_gpt";

// The shared flags (defaults: nanoGPT's shakespeare_char on a CPU) and the GPT's own.
struct Settings {
  examples::text::Settings run{/*batch_size*/ 12, /*block_size*/ 64, /*out*/ "char_gpt_out"};
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  double dropout = 0.0;
  double lr = 1e-3;
  int64_t warmup_iters = 100;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
};

std::optional<int> parse_flags(int argc, char** argv, Settings& s) {
  CLI::App app{"char_gpt: train a character-level GPT on the King James Bible (Debian's bible-kjv) or a text file",
               kProgram};
  examples::text::add_data_flags(app, s.run);
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
  examples::text::add_run_flags(app, s.run, " (at most --block-size characters)");
  app.callback([&s] {
    if (s.n_embd % s.n_head != 0)
      throw CLI::ValidationError("--n-head", "expected a divisor of --n-embd (" + std::to_string(s.n_embd) + "), got " +
                                                 std::to_string(s.n_head));
    examples::text::check_run_flags(s.run);
  });
  return examples::parse(app, argc, argv);
}

int run(const Settings& s, examples::Job& job) {
  const examples::text::Data data = examples::text::load_data(s.run, job);
  tg::manual_seed(examples::text::rank_seed(s.run, job));
  char_gpt::GPT model({.vocab_size = data.vocabulary.size(), .block_size = s.run.block_size, .n_layer = s.n_layer,
                       .n_head = s.n_head, .n_embd = s.n_embd, .dropout = s.dropout});
  char_gpt::init_gpt2(model);
  job.replicate(model);
  const char_gpt::OptimizerConfig schedule{.lr = s.lr, .min_lr = s.lr / 10, .warmup_iters = s.warmup_iters,
                                           .lr_decay_iters = s.run.max_iters, .weight_decay = s.weight_decay,
                                           .grad_clip = s.grad_clip};
  const std::unique_ptr<tg::optim::AdamW> optimizer = char_gpt::make_optimizer(model, schedule);
  const bool autocast = s.run.autocast == "bf16";
  return examples::text::train(
      kProgram, s.run, data,
      {.module = model,
       .optimizer = *optimizer,
       .name = "GPT",
       .details = "n_layer " + std::to_string(s.n_layer) + ", n_head " + std::to_string(s.n_head) + ", n_embd " +
                  std::to_string(s.n_embd) + ", block_size " + std::to_string(s.run.block_size),
       .loss = [&model, autocast](const tg::Tensor& x, const tg::Tensor& y) {
         return char_gpt::loss_of(model, x, y, autocast);
       },
       .step =
           [&](int64_t it, const tg::data::Example& batch) {
             return char_gpt::train_step(model, *optimizer, schedule, it, batch.data, batch.target,
                                         [&job](const tg::Tensor& loss) { job.backward(loss); }, autocast)
                 .loss;
           },
       .lr = [&schedule](int64_t it) { return char_gpt::get_lr(it, schedule); },
       .generate =
           [&model](const std::vector<int64_t>& prompt, int64_t count, const examples::text::Settings& run,
                    tg::Generator& generator) {
             return char_gpt::generate(
                 model, prompt, {.max_new_tokens = count, .temperature = run.temperature, .top_k = run.top_k},
                 generator);
           },
       .generation = "key/value cache"},
      job);
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (const std::optional<int> status = parse_flags(argc, argv, settings)) return *status;
  return examples::run_job(argc, argv, settings.run.distributed, kProgram,
                           [&](examples::Job& job) { return run(settings, job); });
}
