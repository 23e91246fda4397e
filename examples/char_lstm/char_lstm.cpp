// char_lstm — a character LSTM trained on the King James Bible (Debian's bible-kjv and
// bible-kjv-text) or on any UTF-8 text file: the same split, batches and run as examples/char_gpt,
// with a recurrent network in place of the transformer.
//
//   ./build/examples/char_lstm                               # 2,000 iterations of the default LSTM (0.95M parameters)
//   ./build/examples/char_lstm --max-iters 20 --text FILE    # a quick look at any text
//   ./build/examples/char_lstm --resume --sample 500         # continue (or, once finished, just sample)
//   ./build/examples/char_lstm --help                        # every flag with its default
//   mpirun -np 2 ./build/examples/char_lstm --distributed --threads 1   # data-parallel, 2 ranks
//
// model.hpp has the model: Embedding(vocabulary, 128) -> 2-layer LSTM of hidden size 256 ->
// Linear(256, vocabulary), PyTorch's default initialisation, every batch from zero states; Adam
// (lr 2e-3, betas 0.9, 0.99, no weight decay), gradients clipped to a norm of 1.0. The data, the
// loop (evaluations, metrics.csv/png, checkpoints, --resume, --sample, --distributed) and the last
// line
//   final val loss 1.4422 (2.0806 bits per character)
// are the character models' shared run, ../text/training.hpp. Its PyTorch twin is
// bench/char_lstm_torch.py.
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

constexpr char kProgram[] = "char_lstm";

// The shared flags (random blocks of 128 + 1 characters, 32 per batch) and the LSTM's own.
struct Settings {
  examples::text::Settings run{/*batch_size*/ 32, /*block_size*/ 128, /*out*/ "char_lstm_out"};
  int64_t n_embd = 128;
  int64_t hidden_size = 256;
  int64_t num_layers = 2;
  double dropout = 0.0;
  double lr = 2e-3;
  double grad_clip = 1.0;
};

std::optional<int> parse_flags(int argc, char** argv, Settings& s) {
  CLI::App app{"char_lstm: train a character LSTM on the King James Bible (Debian's bible-kjv) or a text file",
               kProgram};
  examples::text::add_data_flags(app, s.run);
  app.add_option("--n-embd", s.n_embd, "width of the character embedding (the LSTM's input)")
      ->check(examples::positive);
  app.add_option("--hidden-size", s.hidden_size, "the LSTM's hidden (and cell) size")->check(examples::positive);
  app.add_option("--num-layers", s.num_layers, "stacked LSTM layers")->check(examples::positive);
  app.add_option("--dropout", s.dropout, "dropout between the LSTM's layers")->check(examples::fraction);
  app.add_option("--lr", s.lr, "Adam's learning rate")->check(examples::positive);
  app.add_option("--grad-clip", s.grad_clip, "clip the gradients' global norm to this; 0: no clipping")
      ->check(examples::non_negative);
  examples::text::add_run_flags(app, s.run, " (any length: the LSTM carries its state)");
  app.callback([&s] { examples::text::check_run_flags(s.run); });
  return examples::parse(app, argc, argv);
}

int run(const Settings& s, examples::Job& job) {
  const examples::text::Data data = examples::text::load_data(s.run, job);
  tg::manual_seed(examples::text::rank_seed(s.run, job));
  char_lstm::CharLSTM model({.vocab_size = data.vocabulary.size(), .n_embd = s.n_embd, .hidden_size = s.hidden_size,
                             .num_layers = s.num_layers, .dropout = s.dropout});
  job.replicate(model);
  const char_lstm::OptimizerConfig config{.lr = s.lr, .grad_clip = s.grad_clip};
  const std::unique_ptr<tg::optim::Adam> optimizer = char_lstm::make_optimizer(model, config);
  return examples::text::train(
      kProgram, s.run, data,
      {.module = model,
       .optimizer = *optimizer,
       .name = "LSTM",
       .details = "n_embd " + std::to_string(s.n_embd) + ", num_layers " + std::to_string(s.num_layers) +
                  ", hidden_size " + std::to_string(s.hidden_size) + ", block_size " +
                  std::to_string(s.run.block_size),
       .loss = [&model, autocast = s.run.autocast == "bf16"](const tg::Tensor& x, const tg::Tensor& y) {
         return char_lstm::loss_of(model, x, y, autocast);
       },
       .step =
           [&](int64_t, const tg::data::Example& batch) {
             return char_lstm::train_step(model, *optimizer, config, batch.data, batch.target,
                                          [&job](const tg::Tensor& loss) { job.backward(loss); },
                                          s.run.autocast == "bf16");
           },
       .lr = [&config](int64_t) { return config.lr; },
       .generate =
           [&model](const std::vector<int64_t>& prompt, int64_t count, const examples::text::Settings& run,
                    tg::Generator& generator) {
             return char_lstm::generate(model, prompt, count, run.temperature, run.top_k, generator);
           },
       .generation = "recurrent state"},
      job);
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  if (const std::optional<int> status = parse_flags(argc, argv, settings)) return *status;
  return examples::run_job(argc, argv, settings.run.distributed, kProgram,
                           [&](examples::Job& job) { return run(settings, job); });
}
