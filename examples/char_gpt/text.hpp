// examples/char_gpt's data is the character models' shared corpus (examples/text/corpus.hpp,
// also examples/char_lstm's), under the names char_gpt's tests have always used.
#pragma once

#include "../text/corpus.hpp"

namespace char_gpt {

using examples::text::Corpus;
using examples::text::read_bible;
using examples::text::read_text_file;
using examples::text::split_bible;
using examples::text::Vocabulary;

}  // namespace char_gpt
