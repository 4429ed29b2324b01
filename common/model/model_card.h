// ModelCard: what a GGUF file says about its model without its weights —
// the config, the tokenizer, the chat template and the fingerprint the
// workers' handshake compares. The router serves from a card (it tokenizes,
// renders chat templates and checks workers' fingerprints, and computes
// nothing), so it links no weight or kernel code; a worker's Model is a
// card plus the bound weights (model.h).
//
// Immutable after Load(); safe to share between threads.
#ifndef PDSERVE_COMMON_MODEL_MODEL_CARD_H_
#define PDSERVE_COMMON_MODEL_MODEL_CARD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"

namespace pdserve {

class ModelCard {
 public:
  // Maps `path` (read-only) and reads its metadata and tokenizer.
  static absl::StatusOr<std::unique_ptr<ModelCard>> Load(const std::string& path);

  const GgufFile& gguf() const { return *gguf_; }
  const ModelConfig& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *chat_template_; }
  // Stable hex digest of the file's metadata, tensor table and sampled
  // tensor bytes: two workers agree on it iff they loaded the same model.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  ModelCard() = default;

  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string fingerprint_;
};

// The fingerprint computation, exposed for tests.
std::string ComputeModelFingerprint(const GgufFile& gguf);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_MODEL_CARD_H_
