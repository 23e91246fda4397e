// The examples' command lines, through CLI11: --help lists every flag with its default, and a
// wrong flag or value is reported with exit status 2, a usage error's status for getopt and
// argparse (CLI11's own codes, 105 to 114, would tell a script nothing it recognises).
//
//   CLI::App app("train_mlp: an MLP learns three interleaved spirals", "train_mlp");
//   int64_t steps = 15000;
//   app.add_option("--steps", steps, "optimizer steps")->check(examples::positive);
//   if (const std::optional<int> status = examples::parse(app, argc, argv)) return *status;
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

namespace examples {

// A check for numeric flags that names what it expected (CLI11's CLI::PositiveNumber answers
// "--steps abc" with "Value abc not in range 0.000000 to 179769313486231570814527…").
inline CLI::Validator number_check(const std::function<bool(double)>& accept, const std::string& expected,
                                   const std::string& help) {
  return CLI::Validator(
      [accept, expected](std::string& input) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(input, value)) return "'" + input + "' is not a number";
        return accept(value) ? std::string() : "expected " + expected + ", got " + input;
      },
      help);
}
inline const CLI::Validator positive = number_check([](double value) { return value > 0; }, "a number > 0", "POSITIVE");
inline const CLI::Validator non_negative =
    number_check([](double value) { return value >= 0; }, "a number >= 0", "NONNEGATIVE");
inline const CLI::Validator fraction =
    number_check([](double value) { return value >= 0 && value <= 1; }, "a number in [0, 1]", "IN [0, 1]");

// --matmul-precision: tg::set_float32_matmul_precision's three values, set once parsed ("medium":
// bf16 products with float32 sums, on vdpbf16ps where the CPU has AVX512-BF16).
inline void add_matmul_precision_flag(CLI::App& app, std::string& precision) {
  app.add_option("--matmul-precision", precision,
                 "float32 products: highest (float32), high, or medium (bf16 factors, float32 sums)")
      ->check(CLI::IsMember({"highest", "high", "medium"}));
}

// --autocast: "bf16" runs each forward pass and its loss under tg::autocast (torch.autocast("cpu",
// dtype=torch.bfloat16)): the products in bfloat16, the losses in float32, the parameters float32.
inline void add_autocast_flag(CLI::App& app, std::string& autocast) {
  app.add_option("--autocast", autocast, "none, or bf16: the forward pass and loss under tg::autocast (bf16 products)")
      ->check(CLI::IsMember({"none", "bf16"}));
}

// Reads argv into app's options. nullopt: run the program; otherwise the status to exit with,
// once --help (0) or the error naming the flag and the value (2) is printed.
inline std::optional<int> parse(CLI::App& app, int argc, char** argv) {
  // Before parsing, the variables still hold their defaults: --help shows them.
  for (CLI::Option* option : app.get_options()) option->capture_default_str();
  app.get_formatter()->column_width(40);  // "--target-accuracy FLOAT:IN [0, 1]=0.95" and a space
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : 2;
  }
}

}  // namespace examples
