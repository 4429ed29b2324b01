#include "common/model_config.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pdserve {
namespace {

// Architectures whose GGUF tensors and forward pass match build_llama in
// llama.cpp (Mistral and many fine-tunes are written as "llama").
bool IsLlamaFamily(std::string_view arch) { return arch == "llama" || arch == "mistral"; }

absl::StatusOr<int> GetPositiveInt(const GgufFile& g, const std::string& key) {
  ASSIGN_OR_RETURN(uint64_t v, g.GetUint(key));
  if (v == 0 || v > (1u << 24)) {
    return absl::FailedPreconditionError(absl::StrCat("gguf: ", key, " = ", v, " is out of range"));
  }
  return static_cast<int>(v);
}

absl::Status CheckShapes(const ModelConfig& c) {
  if (c.n_heads % c.n_kv_heads != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model: head_count ", c.n_heads, " is not a multiple of head_count_kv ", c.n_kv_heads));
  }
  if (c.head_dim % 2 != 0 || c.head_dim > 512 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: head_dim ", c.head_dim, " / rope dim ", c.rope_dim, " unsupported"));
  }
  if (!(c.rms_eps > 0.0f) || !(c.rope_base > 0.0f)) {
    return absl::FailedPreconditionError("model: rms epsilon and rope base must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& g) {
  ModelConfig c;
  ASSIGN_OR_RETURN(std::string_view arch, g.GetString("general.architecture"));
  c.architecture = std::string(arch);
  if (!IsLlamaFamily(arch)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model: architecture '", std::string(arch), "' is not supported (pdserve runs llama-family models)"));
  }
  if (auto name = g.GetString("general.name"); name.ok()) c.name = std::string(*name);
  const std::string p = std::string(arch) + ".";
  ASSIGN_OR_RETURN(c.n_layers, GetPositiveInt(g, p + "block_count"));
  ASSIGN_OR_RETURN(c.n_embd, GetPositiveInt(g, p + "embedding_length"));
  ASSIGN_OR_RETURN(c.n_ff, GetPositiveInt(g, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_heads, GetPositiveInt(g, p + "attention.head_count"));
  c.n_kv_heads = c.n_heads;
  if (g.Find(p + "attention.head_count_kv") != nullptr) {
    ASSIGN_OR_RETURN(c.n_kv_heads, GetPositiveInt(g, p + "attention.head_count_kv"));
  }
  ASSIGN_OR_RETURN(c.context_length, GetPositiveInt(g, p + "context_length"));
  c.head_dim = c.n_embd / c.n_heads;
  if (g.Find(p + "attention.key_length") != nullptr) {
    ASSIGN_OR_RETURN(c.head_dim, GetPositiveInt(g, p + "attention.key_length"));
  }
  c.rope_dim = c.head_dim;
  if (g.Find(p + "rope.dimension_count") != nullptr) {
    ASSIGN_OR_RETURN(c.rope_dim, GetPositiveInt(g, p + "rope.dimension_count"));
  }
  if (g.Find(p + "rope.freq_base") != nullptr) {
    ASSIGN_OR_RETURN(double base, g.GetFloat(p + "rope.freq_base"));
    c.rope_base = static_cast<float>(base);
  }
  ASSIGN_OR_RETURN(double eps, g.GetFloat(p + "attention.layer_norm_rms_epsilon"));
  c.rms_eps = static_cast<float>(eps);
  if (auto tokens = g.GetStringArray("tokenizer.ggml.tokens"); tokens.ok()) {
    c.n_vocab = static_cast<int>(tokens->size());
  }
  if (g.Find(p + "vocab_size") != nullptr) {
    ASSIGN_OR_RETURN(c.n_vocab, GetPositiveInt(g, p + "vocab_size"));
  }
  c.tied_output = g.FindTensor("output.weight") == nullptr;
  RETURN_IF_ERROR(CheckShapes(c));
  return c;
}

}  // namespace pdserve
