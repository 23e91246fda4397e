// How the character models (examples/char_gpt, examples/char_lstm) draw the next character.
//
//   const int64_t next = examples::text::sample_next(logits /* [V] */, 0.8, 10, generator);
#pragma once

#include <cstdint>
#include <limits>
#include <tapegrad/tapegrad.hpp>

namespace examples::text {

// The next character from the last position's logits [V]: softmax(logits / temperature) over
// the top_k likeliest (the others masked to −∞, as nanoGPT; 0: all), one draw of tg::multinomial.
inline int64_t sample_next(const tg::Tensor& logits, double temperature, int64_t top_k, tg::Generator& generator) {
  tg::Tensor scaled = logits.to(tg::kFloat64) / temperature;
  if (top_k > 0 && top_k < scaled.size(-1)) {
    const double kth = scaled.topk(top_k).values.to_vector<double>().back();
    scaled = scaled.masked_fill(scaled.lt(kth), -std::numeric_limits<double>::infinity());
  }
  return tg::multinomial(scaled.softmax(-1), 1, false, &generator).item<int64_t>();
}

}  // namespace examples::text
