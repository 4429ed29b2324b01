// PreTokenizer: splits raw text into the pieces byte-level BPE encodes
// independently, reproducing llama.cpp's pre-tokenizer for the type named
// by the GGUF key `tokenizer.ggml.pre`.
//
// Pieces are views into the caller's text, in order, non-empty, and their
// concatenation is exactly the input: nothing is normalised or dropped.
// Ill-formed UTF-8 never fails: each ill-formed maximal subpart is classed
// like U+FFFD (neither letter, number nor space) and keeps its original
// bytes. (llama.cpp instead aborts on such input.)
//
// Immutable after construction; Split() is const and thread-safe.
#ifndef PDSERVE_COMMON_TEXT_PRE_TOKENIZER_H_
#define PDSERVE_COMMON_TEXT_PRE_TOKENIZER_H_

#include <optional>
#include <string_view>
#include <vector>

namespace pdserve {

enum class PreTokenizerType {
  // GPT-2 regex only:
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Every \p{N} code point becomes its own piece first, then the GPT-2 regex
  // runs on the text between digits (SmolLM, StarCoder and friends).
  kSmollm,
  // The LLaMA 3 regex (also DBRX, Smaug, Falcon 3):
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // With it llama.cpp emits a piece that is itself a token without merging
  // (ignore_merges), which Tokenizer does too.
  kLlama3,
  // Qwen2's: the LLaMA 3 regex with single-digit numbers (\p{N} for
  // \p{N}{1,3}), and merges applied to every piece (no ignore_merges).
  kQwen2,
  // llama.cpp's "default" (a file without tokenizer.ggml.pre gets it too):
  // four regexes, each splitting the pieces of the one before,
  //   [\p{P}\$\+<=>\^~\|]+   then the GPT-2 regex   then \p{N}+   then [0-9]{3}
  // (text a regex does not match stays a piece of its own).
  kDefault,
};

// Maps a `tokenizer.ggml.pre` value to a type. "smollm" and the names
// llama.cpp treats identically (starcoder, refact, command-r, codeshell,
// exaone, minerva-7b) give kSmollm; "llama3", "llama-v3", "llama-bpe",
// "falcon3", "dbrx" and "smaug-bpe" give kLlama3; "default" gives kDefault;
// "gpt2"/"gpt-2" (and mpt, olmo, jais, phi-2) and every unknown name give
// kGpt2, unknown names with a LOG(WARNING) (llama.cpp refuses them).
PreTokenizerType PreTokenizerTypeFromName(std::string_view name);
// The same without the fallback or the warning: nullopt for unknown names.
std::optional<PreTokenizerType> FindPreTokenizerType(std::string_view name);

class PreTokenizer {
 public:
  explicit PreTokenizer(PreTokenizerType type) : type_(type) {}

  PreTokenizerType type() const { return type_; }

  // Appends the pieces of `text` to `pieces`.
  void Split(std::string_view text, std::vector<std::string_view>* pieces) const;

 private:
  PreTokenizerType type_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_PRE_TOKENIZER_H_
