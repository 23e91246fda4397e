// The character models' data (examples/char_gpt, examples/char_lstm): the King James Bible as
// Debian's `bible` program prints it (or any UTF-8 text file), its split into training and
// validation text, and the character vocabulary.
//
//   const examples::text::Corpus corpus = examples::text::read_bible();  // bible -f Gen1:1-Rev22:21
//   const examples::text::Vocabulary vocabulary(corpus.train + corpus.val);
//   std::vector<int64_t> ids = vocabulary.encode("In the beginning");
//   std::string text = vocabulary.decode(ids);               // "In the beginning"
//
// The Bible's split (split_bible): `bible -f` prints one verse a line, "Ge1:1 In the beginning...".
// Each verse loses its reference (up to the first space) and gains a "\n"; the chapter is the
// reference's part before ':' (book and chapter, "Ge1", "1Sa3"), chapters are numbered 0, 1, 2...
// in order of appearance, and chapter k goes to validation when k % 10 == 9: every tenth chapter,
// spread over the whole book (a contiguous 90/10 split would hold out the last Epistles and
// Revelation alone). A text file (read_text_file) is split as nanoGPT's shakespeare_char: its
// first 90% of characters train, the last 10% validate.
//
// Characters are Unicode code points: text is decoded from UTF-8 (ASCII is UTF-8), so a
// vocabulary of "é" is one token, not two bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../metrics.hpp"

namespace examples::text {

// What the model trains and validates on, and where it came from.
struct Corpus {
  std::string train;   // UTF-8
  std::string val;     // UTF-8
  std::string source;  // "bible -f Gen1:1-Rev22:21" or the file's path
  int64_t verses = 0;  // the Bible's: all verses, all chapters, chapters in validation
  int64_t chapters = 0;
  int64_t val_chapters = 0;
};

// The Bible's range that read_bible asks `bible` for: every verse, Genesis to Revelation.
inline constexpr char kBibleCommand[] = "bible -f Gen1:1-Rev22:21";
inline constexpr char kBibleFix[] = "install Debian's bible-kjv and bible-kjv-text (apt-get install bible-kjv bible-kjv-text) "
                                    "or pass --text FILE";

// The Bible's split, from `listing` as `bible -f` prints it (see the file comment). Empty lines
// are skipped; a line without a "<chapter>:<verse> " reference is an error naming its number.
inline Corpus split_bible(std::string_view listing) {
  Corpus corpus;
  corpus.source = kBibleCommand;
  std::string previous_chapter;
  int64_t chapter = -1;
  int64_t line_number = 0;
  size_t start = 0;
  while (start < listing.size()) {
    size_t end = listing.find('\n', start);
    if (end == std::string_view::npos) end = listing.size();
    std::string_view line = listing.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const size_t space = line.find(' ');
    const std::string_view reference = line.substr(0, space);
    const size_t colon = reference.find(':');
    if (space == std::string_view::npos || colon == std::string_view::npos || colon == 0)
      throw std::runtime_error("line " + std::to_string(line_number) + " of `" + kBibleCommand +
                               "` has no \"<book><chapter>:<verse> \" reference: '" + std::string(line.substr(0, 60)) +
                               "'");
    const std::string_view key = reference.substr(0, colon);
    if (key != previous_chapter) {
      previous_chapter = key;
      ++chapter;
      if (chapter % 10 == 9) ++corpus.val_chapters;
    }
    ++corpus.verses;
    std::string& part = chapter % 10 == 9 ? corpus.val : corpus.train;
    part.append(line.substr(space + 1));
    part += '\n';
  }
  corpus.chapters = chapter + 1;
  return corpus;
}

// The Bible from Debian's `bible` program, split (about 4.4 MB printed, 4.14 million characters
// once the references are gone). A missing program, a failed run or an empty listing is an error
// naming the packages to install.
inline Corpus read_bible() {
  if (!examples::on_path("bible"))
    throw std::runtime_error(std::string("the program `bible` is not on PATH: ") + kBibleFix);
  FILE* pipe = ::popen((std::string(kBibleCommand) + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error(std::string("cannot run `") + kBibleCommand + "`: " + kBibleFix);
  std::string listing;
  char buffer[1 << 16];
  size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) listing.append(buffer, read);
  const int status = ::pclose(pipe);
  if (status != 0 || listing.empty())
    throw std::runtime_error(std::string("`") + kBibleCommand + "` failed (status " + std::to_string(status) + ")" +
                             (listing.empty() ? "" : ": " + listing.substr(0, 200)) + "; " + kBibleFix);
  // Without bible-kjv-text, `bible` prints an error rather than verses: no line parses then.
  Corpus corpus = split_bible(listing);
  if (corpus.verses == 0) throw std::runtime_error(std::string("`") + kBibleCommand + "` printed no verses: " + kBibleFix);
  return corpus;
}

// The code points of UTF-8 `text`; an error naming `what` and the byte offset of the first
// invalid sequence (a stray continuation byte, a truncated or overlong sequence, a surrogate,
// a value beyond U+10FFFF) or of a NUL byte (which text files do not hold: a binary file).
inline std::u32string decode_utf8(std::string_view text, const std::string& what) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  const auto fail = [&](const char* why) {
    throw std::runtime_error(what + " is not UTF-8 text: " + why + " at byte " + std::to_string(i) +
                             " (give a UTF-8 or ASCII text file)");
  };
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead == 0) fail("a NUL byte (a binary file?)");
    int length = 0;
    char32_t code = 0;
    if (lead < 0x80) {
      length = 1, code = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2, code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3, code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4, code = lead & 0x07;
    } else {
      fail("an invalid lead byte");
    }
    if (i + static_cast<size_t>(length) > text.size()) fail("a truncated sequence");
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((next & 0xC0) != 0x80) fail("a missing continuation byte");
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // by length: no overlong forms
    if (code < kSmallest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) fail("an invalid code point");
    out.push_back(code);
    i += static_cast<size_t>(length);
  }
  return out;
}

inline void append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// A UTF-8 text file, split: its first 90% of characters (code points) train, the rest validate.
// An unreadable, empty, binary or non-UTF-8 file is an error saying so.
inline Corpus read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("--text " + path + ": cannot open the file");
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.empty()) throw std::runtime_error("--text " + path + " is empty: give a UTF-8 or ASCII text file");
  const std::u32string codes = decode_utf8(bytes, "--text " + path);
  // nanoGPT's shakespeare_char: n = len(data); train = data[:int(n * 0.9)].
  const auto split = static_cast<size_t>(static_cast<double>(codes.size()) * 0.9);
  Corpus corpus;
  corpus.source = path;
  for (size_t k = 0; k < codes.size(); ++k) append_utf8(k < split ? corpus.train : corpus.val, codes[k]);
  return corpus;
}

// The characters of a text, sorted by code point; a character's token is its index.
class Vocabulary {
 public:
  explicit Vocabulary(std::string_view text) {
    characters_ = decode_utf8(text, "the text");
    std::sort(characters_.begin(), characters_.end());
    characters_.erase(std::unique(characters_.begin(), characters_.end()), characters_.end());
  }
  // From the characters themselves (a checkpoint's vocabulary), in this order.
  static Vocabulary from_characters(std::u32string characters) {
    Vocabulary vocabulary("");
    vocabulary.characters_ = std::move(characters);
    return vocabulary;
  }

  int64_t size() const { return static_cast<int64_t>(characters_.size()); }
  const std::u32string& characters() const { return characters_; }

  // The tokens of UTF-8 `text`; a character outside the vocabulary is an error naming it.
  std::vector<int64_t> encode(std::string_view text) const {
    std::vector<int64_t> ids;
    const std::u32string codes = decode_utf8(text, "the text to encode");
    ids.reserve(codes.size());
    for (const char32_t code : codes) {
      const auto at = std::lower_bound(characters_.begin(), characters_.end(), code);
      if (at == characters_.end() || *at != code) {
        std::string character;
        append_utf8(character, code);
        throw std::runtime_error("the character '" + character + "' (U+" + hex(code) +
                                 ") is not in the training text's vocabulary of " + std::to_string(size()) +
                                 " characters");
      }
      ids.push_back(at - characters_.begin());
    }
    return ids;
  }

  // The UTF-8 text of `ids` (each in [0, size())).
  std::string decode(const std::vector<int64_t>& ids) const {
    std::string text;
    for (const int64_t id : ids) {
      if (id < 0 || id >= size())
        throw std::runtime_error("token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                 std::to_string(size()) + ")");
      append_utf8(text, characters_[static_cast<size_t>(id)]);
    }
    return text;
  }

 private:
  static std::string hex(char32_t code) {
    char digits[16];
    std::snprintf(digits, sizeof digits, "%04X", static_cast<unsigned>(code));
    return digits;
  }
  std::u32string characters_;  // sorted, distinct
};

}  // namespace examples::text
