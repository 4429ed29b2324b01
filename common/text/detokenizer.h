// IncrementalDetokenizer: turns a stream of generated token ids into a
// stream of valid UTF-8 text chunks.
//
// Byte-level BPE tokens are byte strings, so one character (an emoji, a CJK
// ideograph) is often spread over several tokens. Push() returns only text
// that is complete: a trailing, still-unfinished UTF-8 sequence is held back
// until the next token finishes it. Bytes that can never become valid UTF-8
// are replaced by U+FFFD (one per ill-formed maximal subpart, as Python's
// errors="replace" does), so every chunk is valid UTF-8 on its own and the
// concatenation of all chunks equals the lossy decode of all the bytes.
//
// Holds a reference to the Tokenizer, which must outlive it. One instance
// per output stream; not thread-safe.
#ifndef PDSERVE_COMMON_TEXT_DETOKENIZER_H_
#define PDSERVE_COMMON_TEXT_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "common/text/tokenizer.h"

namespace pdserve {

class IncrementalDetokenizer {
 public:
  // With `render_special`, CONTROL tokens contribute their text (e.g.
  // "<|im_end|>"); by default they contribute nothing.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  // Adds one token; returns the text it completed (possibly empty).
  std::string Push(int32_t id);

  // Ends the stream: returns whatever was held back, an unfinished
  // sequence becoming U+FFFD. The detokenizer can then start a new stream.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool render_special_;
  std::string pending_;  // at most 3 bytes: a valid but unfinished prefix
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_DETOKENIZER_H_
