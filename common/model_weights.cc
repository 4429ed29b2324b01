#include "common/model_weights.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/quant/kernels.h"
#include "common/status_macros.h"

namespace pdserve {
namespace {

absl::StatusOr<const GgufTensorInfo*> FindShaped(const GgufFile& g, const std::string& name,
                                                 int64_t ne0, int64_t ne1) {
  const GgufTensorInfo* t = g.FindTensor(name);
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
  return t;
}

absl::StatusOr<WeightMatrix> BindMatrix(const GgufFile& g, const std::string& name, int64_t in,
                                        int64_t out) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(g, name, in, out));
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

absl::StatusOr<std::vector<float>> LoadVector(const GgufFile& g, const std::string& name,
                                              int64_t n) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(g, name, n, 0));
  const TypeKernels* k = FindTypeKernels(t->type);
  if (k == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: tensor '", name, "' has unsupported type ", GgmlTypeName(t->type)));
  }
  std::vector<float> v(n);
  k->dequant(t->data, v.data(), n);
  return v;
}

absl::StatusOr<LayerWeights> LoadLayer(const GgufFile& g, const ModelConfig& c, int l) {
  const std::string p = absl::StrCat("blk.", l, ".");
  LayerWeights w;
  ASSIGN_OR_RETURN(w.attn_norm, LoadVector(g, p + "attn_norm.weight", c.n_embd));
  ASSIGN_OR_RETURN(w.ffn_norm, LoadVector(g, p + "ffn_norm.weight", c.n_embd));
  ASSIGN_OR_RETURN(w.wq, BindMatrix(g, p + "attn_q.weight", c.n_embd, c.q_dim()));
  ASSIGN_OR_RETURN(w.wk, BindMatrix(g, p + "attn_k.weight", c.n_embd, c.kv_dim()));
  ASSIGN_OR_RETURN(w.wv, BindMatrix(g, p + "attn_v.weight", c.n_embd, c.kv_dim()));
  ASSIGN_OR_RETURN(w.wo, BindMatrix(g, p + "attn_output.weight", c.q_dim(), c.n_embd));
  ASSIGN_OR_RETURN(w.w_gate, BindMatrix(g, p + "ffn_gate.weight", c.n_embd, c.n_ff));
  ASSIGN_OR_RETURN(w.w_up, BindMatrix(g, p + "ffn_up.weight", c.n_embd, c.n_ff));
  ASSIGN_OR_RETURN(w.w_down, BindMatrix(g, p + "ffn_down.weight", c.n_ff, c.n_embd));
  return w;
}

// A tensor this forward pass does not read (attention or FFN biases, experts,
// extra heads) would be silently dropped and the output would be wrong, so
// such files are refused, as llama.cpp refuses tensors it does not expect.
absl::Status CheckEveryTensorUsed(const GgufFile& g, const ModelConfig& c) {
  constexpr const char* kLayerTensors[] = {
      "attn_norm.weight",   "ffn_norm.weight", "attn_q.weight", "attn_k.weight",  "attn_v.weight",
      "attn_output.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
  absl::flat_hash_set<std::string> used = {"token_embd.weight", "output.weight",
                                           "output_norm.weight", "rope_freqs.weight"};
  for (int l = 0; l < c.n_layers; ++l) {
    for (const char* name : kLayerTensors) used.insert(absl::StrCat("blk.", l, ".", name));
  }
  for (const GgufTensorInfo& t : g.tensors()) {
    if (!used.contains(t.name)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model: tensor '", t.name,
          "' is not part of the llama forward pass pdserve runs (biases, mixture-of-experts "
          "and extra tensors are not supported)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeights> ModelWeights::Load(const GgufFile& g, const ModelConfig& c) {
  ModelWeights w;
  ASSIGN_OR_RETURN(w.token_embd, BindMatrix(g, "token_embd.weight", c.n_embd, c.n_vocab));
  if (c.tied_output) {
    w.output = w.token_embd;
  } else {
    ASSIGN_OR_RETURN(w.output, BindMatrix(g, "output.weight", c.n_embd, c.n_vocab));
  }
  ASSIGN_OR_RETURN(w.output_norm, LoadVector(g, "output_norm.weight", c.n_embd));
  w.layers.reserve(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    ASSIGN_OR_RETURN(LayerWeights layer, LoadLayer(g, c, l));
    w.layers.push_back(std::move(layer));
  }
  RETURN_IF_ERROR(CheckEveryTensorUsed(g, c));
  return w;
}

}  // namespace pdserve
