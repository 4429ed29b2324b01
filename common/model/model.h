// Model: everything a worker loads from one GGUF file — the mapping, the
// config, the bound weights, the tokenizer and the chat template — plus a
// fingerprint that identifies the file in the compatibility handshake.
//
// Immutable after Load(); safe to share between threads.
#ifndef PDSERVE_COMMON_MODEL_MODEL_H_
#define PDSERVE_COMMON_MODEL_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/gguf/gguf_file.h"
#include "common/model/model_config.h"
#include "common/model/model_weights.h"
#include "common/text/chat_template.h"
#include "common/text/tokenizer.h"

namespace pdserve {

class Model {
 public:
  struct Options {
    // Routers only need the tokenizer: skip binding the weights.
    bool tokenizer_only = false;
  };
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path,
                                                     const Options& options);
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path) {
    return Load(path, Options());
  }

  const GgufFile& gguf() const { return *gguf_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *chat_template_; }
  // Stable hex digest of the file's metadata, tensor table and sampled
  // tensor bytes: two workers agree on it iff they loaded the same model.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;

  std::unique_ptr<GgufFile> gguf_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::string fingerprint_;
};

// The fingerprint computation, exposed for tests.
std::string ComputeModelFingerprint(const GgufFile& gguf);

}  // namespace pdserve

#endif  // PDSERVE_COMMON_MODEL_MODEL_H_
