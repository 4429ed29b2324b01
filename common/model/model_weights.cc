#include "common/model/model_weights.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/quant/kernels.h"

namespace pdserve {
namespace {

// Looks tensors up by name and shape, and remembers every name it handed
// out: a tensor this forward pass does not read (attention or FFN biases,
// experts, extra layers) would be silently dropped and the output would be
// wrong, so such files are refused, as llama.cpp refuses tensors it does not
// expect.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& g) : g_(g) {}

  absl::StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t in, int64_t out) {
    ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(name, in, out));
    if (FindTypeKernels(t->type) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("model: tensor '", name, "' has type ",
                                                        GgmlTypeName(t->type),
                                                        " which has no matmul kernel"));
    }
    WeightMatrix m;
    m.type = t->type;
    m.in = in;
    m.out = out;
    m.row_bytes = t->row_bytes;
    m.data = t->data;
    return m;
  }

  absl::StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) {
    ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(name, n, 0));
    const TypeKernels* k = FindTypeKernels(t->type);
    if (k == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("model: tensor '", name, "' has unsupported type ", GgmlTypeName(t->type)));
    }
    std::vector<float> v(n);
    k->dequant(t->data, v.data(), n);
    return v;
  }

  // A tensor read elsewhere (ModelConfig reads rope_freqs.weight).
  void MarkUsed(const std::string& name) { bound_.insert(name); }

  absl::Status CheckEveryTensorBound() const {
    for (const GgufTensorInfo& t : g_.tensors()) {
      if (!bound_.contains(t.name)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model: tensor '", t.name,
            "' is not part of the forward pass pdserve runs for this architecture "
            "(mixture-of-experts and extra tensors are not supported)"));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<const GgufTensorInfo*> FindShaped(const std::string& name, int64_t ne0,
                                                   int64_t ne1) {
    const GgufTensorInfo* t = g_.FindTensor(name);
    if (t == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("model: tensor '", name, "' is missing"));
    }
    const int64_t want_dims = ne1 > 0 ? 2 : 1;
    if (t->ne[0] != ne0 || (ne1 > 0 && t->ne[1] != ne1) || t->ne[2] != 1 || t->ne[3] != 1 ||
        (want_dims == 1 && t->ne[1] != 1)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model: tensor '", name, "' has shape {", t->ne[0], ", ", t->ne[1], ", ", t->ne[2], ", ",
          t->ne[3], "}, expected {", ne0, ", ", std::max<int64_t>(ne1, 1), "}"));
    }
    bound_.insert(name);
    return t;
  }

  const GgufFile& g_;
  absl::flat_hash_set<std::string> bound_;
};

absl::StatusOr<LayerWeights> LoadLayer(TensorBinder& b, const ModelConfig& c, int l) {
  const std::string p = absl::StrCat("blk.", l, ".");
  LayerWeights w;
  ASSIGN_OR_RETURN(w.attn_norm, b.Vector(p + "attn_norm.weight", c.n_embd));
  ASSIGN_OR_RETURN(w.ffn_norm, b.Vector(p + "ffn_norm.weight", c.n_embd));
  ASSIGN_OR_RETURN(w.wq, b.Matrix(p + "attn_q.weight", c.n_embd, c.q_dim()));
  ASSIGN_OR_RETURN(w.wk, b.Matrix(p + "attn_k.weight", c.n_embd, c.kv_dim()));
  ASSIGN_OR_RETURN(w.wv, b.Matrix(p + "attn_v.weight", c.n_embd, c.kv_dim()));
  ASSIGN_OR_RETURN(w.wo, b.Matrix(p + "attn_output.weight", c.q_dim(), c.n_embd));
  ASSIGN_OR_RETURN(w.w_gate, b.Matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff));
  ASSIGN_OR_RETURN(w.w_up, b.Matrix(p + "ffn_up.weight", c.n_embd, c.n_ff));
  ASSIGN_OR_RETURN(w.w_down, b.Matrix(p + "ffn_down.weight", c.n_ff, c.n_embd));
  if (c.qkv_bias) {
    ASSIGN_OR_RETURN(w.bq, b.Vector(p + "attn_q.bias", c.q_dim()));
    ASSIGN_OR_RETURN(w.bk, b.Vector(p + "attn_k.bias", c.kv_dim()));
    ASSIGN_OR_RETURN(w.bv, b.Vector(p + "attn_v.bias", c.kv_dim()));
  }
  if (c.qk_norm) {
    ASSIGN_OR_RETURN(w.q_norm, b.Vector(p + "attn_q_norm.weight", c.head_dim));
    ASSIGN_OR_RETURN(w.k_norm, b.Vector(p + "attn_k_norm.weight", c.head_dim));
  }
  if (c.post_norms) {
    ASSIGN_OR_RETURN(w.post_attn_norm, b.Vector(p + "post_attention_norm.weight", c.n_embd));
    ASSIGN_OR_RETURN(w.post_ffn_norm, b.Vector(p + "post_ffw_norm.weight", c.n_embd));
  }
  return w;
}

}  // namespace

absl::StatusOr<ModelWeights> ModelWeights::Load(const GgufFile& g, const ModelConfig& c) {
  TensorBinder b(g);
  ModelWeights w;
  ASSIGN_OR_RETURN(w.token_embd, b.Matrix("token_embd.weight", c.n_embd, c.n_vocab));
  if (c.tied_output) {
    w.output = w.token_embd;
  } else {
    ASSIGN_OR_RETURN(w.output, b.Matrix("output.weight", c.n_embd, c.n_vocab));
  }
  ASSIGN_OR_RETURN(w.output_norm, b.Vector("output_norm.weight", c.n_embd));
  if (!c.rope_freq_factors.empty()) b.MarkUsed("rope_freqs.weight");
  w.layers.reserve(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    ASSIGN_OR_RETURN(LayerWeights layer, LoadLayer(b, c, l));
    w.layers.push_back(std::move(layer));
  }
  RETURN_IF_ERROR(b.CheckEveryTensorBound());
  return w;
}

}  // namespace pdserve
