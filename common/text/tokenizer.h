// Tokenizer: built from GGUF tokenizer metadata, reproducing llama.cpp's
// tokenization (llama-vocab.cpp) token for token for the two vocabulary
// kinds llama-family models ship: GPT-2 style byte-level BPE
// (tokenizer.ggml.model "gpt2": SmolLM, LLaMA 3, ...) and SentencePiece BPE
// ("llama": LLaMA 1/2, Mistral, TinyLlama, ...).
//
// Owns copies of the vocabulary, the merge table (keyed by token-id pair),
// the byte <-> symbol maps and each token's decoded bytes; it does not keep
// the GgufFile alive. Immutable after construction, so every method is
// const and safe to call from any number of threads at once. Encode keeps
// all scratch state on its own stack: nothing is cached between calls.
//
// Encode pipeline (llama.cpp order): split out special tokens, then for
//  - gpt2: pre-tokenize each remaining stretch (pre_tokenizer.h), map every
//    byte to its byte-level symbol, merge adjacent symbol pairs by lowest
//    merge rank (leftmost first on ties) until none applies;
//  - llama: put a space before a stretch that starts the text or follows a
//    special token (when add_space_prefix), turn spaces into U+2581 and merge
//    by token score (spm_merger.h); no pre-tokenizer.
// Encode never adds BOS/EOS; callers consult add_bos(). Known deviations
// from llama.cpp are listed in tokenizer.cc.
#ifndef PDSERVE_COMMON_TEXT_TOKENIZER_H_
#define PDSERVE_COMMON_TEXT_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/gguf/gguf_file.h"
#include "common/text/bpe_merger.h"
#include "common/text/pre_tokenizer.h"
#include "common/text/spm_merger.h"

namespace pdserve {

// `tokenizer.ggml.token_type` values (llama.h, enum llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The tokenizer metadata of a model, decoupled from the GGUF container so
// tests can build small vocabularies directly. Ids of -1 mean "absent".
struct TokenizerVocab {
  std::string model = "gpt2";   // tokenizer.ggml.model: "gpt2" or "llama"
  std::string pre = "default";  // tokenizer.ggml.pre (gpt2 only)
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // same length as tokens
  std::vector<std::string> merges;   // gpt2: "left right", rank = index
  std::vector<float> scores;         // llama: merge priority; empty = all 0
  int32_t unk_id = -1;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  int32_t fim_pad_id = -1;
  int32_t fim_rep_id = -1;
  int32_t fim_sep_id = -1;
  bool add_bos = false;
  bool add_eos = false;          // EOS after a prompt (tokenizer.ggml.add_eos_token)
  bool add_space_prefix = true;  // llama only
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* from `gguf`. INVALID_ARGUMENT (naming the key)
  // for missing or malformed metadata, UNIMPLEMENTED for other models.
  // For "llama" vocabularies the absent keys take llama.cpp's defaults (bos
  // 1, eos 2, unk 0, add_bos and add_space_prefix true), as does add_bos for
  // LLaMA 3 pre-tokenizers; a missing token_type makes every token NORMAL.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromVocab(const TokenizerVocab& vocab);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // With `parse_special`, texts of CONTROL/UNKNOWN tokens (e.g.
  // "<|im_start|>") become those tokens; without, they are plain text.
  // USER_DEFINED tokens are always matched, as in llama.cpp.
  std::vector<int32_t> Encode(std::string_view text, bool parse_special) const;
  // A prompt as llama.cpp tokenizes it (add_special, parse_special): BOS
  // first and EOS last when the model asks for them, Encode(text, true)
  // between.
  std::vector<int32_t> EncodePrompt(std::string_view text) const;

  // Raw bytes the token stands for (inverse byte-level map; for llama
  // vocabularies U+2581 becomes a space and "<0xNN>" the byte). CONTROL and
  // UNKNOWN tokens give "" unless `render_special`, then their text;
  // UNUSED/UNDEFINED tokens, BYTE tokens of gpt2 vocabularies and invalid
  // ids give "".
  std::string TokenBytes(int32_t id, bool render_special = false) const;
  std::string Decode(absl::Span<const int32_t> ids, bool render_special = false) const;

  // The vocabulary string as stored (byte-level alphabet); "" if invalid.
  std::string_view TokenText(int32_t id) const;
  TokenType GetTokenType(int32_t id) const;

  int32_t vocab_size() const { return static_cast<int32_t>(types_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  PreTokenizerType pre_tokenizer_type() const { return pre_tokenizer_.type(); }
  bool IsValidId(int32_t id) const { return id >= 0 && id < vocab_size(); }
  // End of generation: EOS, EOT/EOM and tokens llama.cpp recognises by text
  // ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", ...).
  bool IsEog(int32_t id) const;
  // Sorted ascending.
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

 private:
  struct Fragment;  // a special token or a stretch of raw text

  Tokenizer(bool spm, PreTokenizerType pre);
  absl::Status Init(const TokenizerVocab& vocab);
  absl::Status InitTokens(const TokenizerVocab& vocab);
  absl::Status InitMerges(const std::vector<std::string>& merges);
  absl::Status InitScores(const TokenizerVocab& vocab);
  absl::Status InitSpecialIds(const TokenizerVocab& vocab);
  void InitByteMaps();
  void InitSpmByteTokens();
  void InitEog(const TokenizerVocab& vocab);
  void InitSpecialTokens();
  void InitDecodedBytes();

  int32_t FindToken(std::string_view text) const;
  std::vector<Fragment> SplitSpecial(std::string_view text, bool parse_special) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* out) const;
  void EncodeSpm(std::string_view stretch, bool after_special, std::vector<int32_t>* out) const;

  const bool spm_;  // a "llama" (SentencePiece) vocabulary
  // gpt2 with the LLaMA 3 pre-tokenizer: a piece that is a token is emitted
  // as is, without merging (llama.cpp's ignore_merges).
  const bool ignore_merges_;

  PreTokenizer pre_tokenizer_;

  // Token texts and decoded bytes live in two arenas; token i spans
  // [offsets[i], offsets[i + 1]).
  std::string text_arena_;
  std::vector<uint32_t> text_offsets_;
  std::string bytes_arena_;
  std::vector<uint32_t> bytes_offsets_;
  std::vector<TokenType> types_;
  TokenTextMap text_to_id_;  // views into text_arena_

  BpeMergeMap merges_;         // gpt2
  std::vector<float> scores_;  // llama: one per token
  bool add_space_prefix_ = false;

  // gpt2: token for each raw byte's byte-level symbol, or -1 when the
  // vocabulary lacks it; then llama.cpp emits the tokens (if any) whose text
  // is a single byte of the symbol's UTF-8, which byte_fallback_ holds.
  // llama: the token a byte no merge covers becomes ("<0xNN>", else the
  // one-byte text, else unk; -1 drops it).
  std::array<int32_t, 256> byte_token_;
  std::array<std::vector<int32_t>, 256> byte_fallback_;

  std::vector<int32_t> special_tokens_;  // longest text first
  std::vector<int32_t> eog_ids_;         // sorted; a handful at most
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t unk_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_TEXT_TOKENIZER_H_
