#include "common/model/model_config.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace pdserve {
namespace {

// Architectures whose GGUF tensors and forward pass match build_llama in
// llama.cpp (Mistral and many fine-tunes are written as "llama").
bool IsLlamaFamily(std::string_view arch) { return arch == "llama" || arch == "mistral"; }

bool IsSupported(std::string_view arch) {
  return IsLlamaFamily(arch) || arch == "qwen2" || arch == "gemma3";
}

absl::StatusOr<int> GetPositiveInt(const GgufFile& g, const std::string& key) {
  ASSIGN_OR_RETURN(uint64_t v, g.GetUint(key));
  if (v == 0 || v > (1u << 24)) {
    return absl::FailedPreconditionError(absl::StrCat("gguf: ", key, " = ", v, " is out of range"));
  }
  return static_cast<int>(v);
}

// llama.cpp's gemma3 hyper-parameters: every `pattern`-th layer is global,
// the others attend a window of attention.sliding_window positions and
// rotate with base 10000 unscaled; q is scaled by 1 / sqrt(head_dim), except
// on the 27B model (62 layers), which uses 1 / sqrt(n_embd / n_heads).
absl::Status ReadGemma3(const GgufFile& g, const std::string& p, ModelConfig* c) {
  c->rope_neox = true;
  c->qk_norm = true;
  c->post_norms = true;
  c->ffn_activation = FfnActivation::kGelu;
  c->embed_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->attn_scale_on_q = true;
  if (c->n_layers == 62) {
    c->attn_scale = 1.0f / std::sqrt(static_cast<float>(c->n_embd / c->n_heads));
  }
  ASSIGN_OR_RETURN(const int window, GetPositiveInt(g, p + "attention.sliding_window"));
  int pattern = 6;
  if (g.Find(p + "attention.sliding_window_pattern") != nullptr) {
    ASSIGN_OR_RETURN(pattern, GetPositiveInt(g, p + "attention.sliding_window_pattern"));
  }
  c->layer_window.assign(c->n_layers, 0);
  for (int l = 0; l < c->n_layers; ++l) {
    if (l % pattern < pattern - 1) c->layer_window[l] = window;
  }
  c->rope_base_local = 10000.0f;
  return absl::OkStatus();
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

// llama.cpp's reading: a scaling factor applies (as 1 / factor) when the
// type is linear or absent, never with "none"; other types need math we do
// not implement.
absl::Status ReadRopeScaling(const GgufFile& g, const std::string& p, ModelConfig* c) {
  if (g.Find(p + "rope.scaling.type") != nullptr) {
    ASSIGN_OR_RETURN(std::string_view type, g.GetString(p + "rope.scaling.type"));
    if (type != "none" && type != "linear") {
      return absl::FailedPreconditionError(absl::StrCat("model: rope scaling '", std::string(type),
                                                        "' is not supported (only linear)"));
    }
    if (type == "none") return absl::OkStatus();  // llama.cpp never scales then
  }
  double factor = 0.0;
  for (const char* key : {"rope.scaling.factor", "rope.scale_linear"}) {
    if (factor == 0.0 && g.Find(p + key) != nullptr) {
      ASSIGN_OR_RETURN(factor, g.GetFloat(p + key));
    }
  }
  if (factor < 0.0 || !std::isfinite(factor)) {
    return absl::FailedPreconditionError(absl::StrCat("model: rope scaling factor ", factor));
  }
  if (factor != 0.0) c->rope_freq_scale = static_cast<float>(1.0 / factor);
  return absl::OkStatus();
}

absl::Status ReadRopeFreqFactors(const GgufFile& g, ModelConfig* c) {
  const GgufTensorInfo* t = g.FindTensor("rope_freqs.weight");
  if (t == nullptr) return absl::OkStatus();
  if (t->type != 0 || t->n_dims != 1 || t->ne[0] != c->rope_dim / 2) {
    return absl::FailedPreconditionError(absl::StrCat("model: rope_freqs.weight must be F32 with ",
                                                      c->rope_dim / 2, " entries (type ", t->type,
                                                      ", ", t->ne[0], " entries)"));
  }
  c->rope_freq_factors.resize(t->ne[0]);
  std::memcpy(c->rope_freq_factors.data(), t->data, t->ne[0] * sizeof(float));
  for (const float f : c->rope_freq_factors) {
    if (!(f > 0.0f) || !std::isfinite(f)) {
      return absl::FailedPreconditionError("model: rope_freqs.weight has a non-positive factor");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& g) {
  ModelConfig c;
  ASSIGN_OR_RETURN(std::string_view arch, g.GetString("general.architecture"));
  c.architecture = std::string(arch);
  if (!IsSupported(arch)) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: architecture '", std::string(arch),
                     "' is not supported (pdserve runs llama, mistral, qwen2 and gemma3)"));
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
  if (g.Find(p + "attention.value_length") != nullptr) {
    ASSIGN_OR_RETURN(const int value_length, GetPositiveInt(g, p + "attention.value_length"));
    if (value_length != c.head_dim) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model: value length ", value_length, " differs from key length ", c.head_dim));
    }
  }
  c.rope_dim = c.head_dim;
  if (g.Find(p + "rope.dimension_count") != nullptr) {
    ASSIGN_OR_RETURN(c.rope_dim, GetPositiveInt(g, p + "rope.dimension_count"));
  }
  if (g.Find(p + "rope.freq_base") != nullptr) {
    ASSIGN_OR_RETURN(double base, g.GetFloat(p + "rope.freq_base"));
    c.rope_base = static_cast<float>(base);
  }
  RETURN_IF_ERROR(ReadRopeScaling(g, p, &c));
  ASSIGN_OR_RETURN(double eps, g.GetFloat(p + "attention.layer_norm_rms_epsilon"));
  c.rms_eps = static_cast<float>(eps);
  if (auto tokens = g.GetStringArray("tokenizer.ggml.tokens"); tokens.ok()) {
    c.n_vocab = static_cast<int>(tokens->size());
  }
  if (g.Find(p + "vocab_size") != nullptr) {
    ASSIGN_OR_RETURN(c.n_vocab, GetPositiveInt(g, p + "vocab_size"));
  }
  if (g.Find(p + "expert_count") != nullptr) {
    ASSIGN_OR_RETURN(const uint64_t experts, g.GetUint(p + "expert_count"));
    if (experts > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("model: ", experts, " experts (mixture of experts) are not supported"));
    }
  }
  c.tied_output = g.FindTensor("output.weight") == nullptr;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (arch == "qwen2") {
    c.rope_neox = true;
    c.qkv_bias = true;
  } else if (arch == "gemma3") {
    RETURN_IF_ERROR(ReadGemma3(g, p, &c));
  }
  RETURN_IF_ERROR(CheckShapes(c));
  RETURN_IF_ERROR(ReadRopeFreqFactors(g, &c));
  return c;
}

}  // namespace pdserve
