// Model: everything a worker loads from one GGUF file — its card (the
// mapping, config, tokenizer, chat template and fingerprint; model_card.h)
// and the weights bound to the mapping.
//
// Immutable after Load(); safe to share between threads.
#ifndef PDSERVE_COMMON_MODEL_MODEL_H_
#define PDSERVE_COMMON_MODEL_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_card.h"
#include "common/model/model_config.h"
#include "common/model/model_weights.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"

namespace pdserve {

class Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path);

  const ModelCard& card() const { return *card_; }
  const GgufFile& gguf() const { return card_->gguf(); }
  const ModelConfig& config() const { return card_->config(); }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return card_->tokenizer(); }
  const ChatTemplate& chat_template() const { return card_->chat_template(); }
  const std::string& fingerprint() const { return card_->fingerprint(); }

 private:
  Model() = default;

  std::unique_ptr<ModelCard> card_;
  ModelWeights weights_;
};

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_MODEL_H_
