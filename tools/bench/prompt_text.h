// PromptText: turns the bench's synthetic token-id prompts into text, for
// servers whose API takes no token ids (llama.cpp's OpenAI-compatible
// server). Every system compared in one run is then sent the same text.
//
// Random ids do not survive a decode/encode round trip (the tokenizer
// merges differently), so Render re-encodes the text, cuts it to the
// requested length, and reports the ids the text really encodes to; the
// lengths recorded are those.
//
// Thread-safety: immutable after FromModel; Render may be called from any
// number of threads.
#ifndef PDSERVE_TOOLS_BENCH_PROMPT_TEXT_H_
#define PDSERVE_TOOLS_BENCH_PROMPT_TEXT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/text/tokenizer.h"

namespace pdserve {

class PromptText {
 public:
  // Reads only the tokenizer of the GGUF at `model_path`.
  static absl::StatusOr<PromptText> FromModel(const std::string& model_path);
  explicit PromptText(std::shared_ptr<const Tokenizer> tokenizer)
      : tokenizer_(std::move(tokenizer)) {}

  // Text of about ids.size() tokens; `*encoded` gets the ids the text
  // encodes to (without BOS).
  std::string Render(const std::vector<int32_t>& ids, std::vector<int32_t>* encoded) const;

  // Ids that end generation, for servers that need them banned to honour
  // ignore_eos.
  const std::vector<int32_t>& eog_ids() const { return tokenizer_->eog_ids(); }
  int vocab_size() const { return tokenizer_->vocab_size(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
};

}  // namespace pdserve

#endif  // PDSERVE_TOOLS_BENCH_PROMPT_TEXT_H_
