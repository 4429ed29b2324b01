#include "common/gpu/cuda/device_weights.h"

#include <cuda_runtime.h>

#include <cstring>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/gguf/ggml_type.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"

namespace pdserve::cuda {
namespace {

// Dequantises the matrices' rows, stacked in order, into one f16 matrix.
absl::StatusOr<DeviceMatrix> UploadStacked(std::initializer_list<const WeightMatrix*> parts) {
  DeviceMatrix m;
  m.in = (*parts.begin())->in;
  for (const WeightMatrix* p : parts) {
    if (p->in != m.in) return absl::InternalError("stacked matrices differ in width");
    m.out += p->out;
  }
  std::vector<uint16_t> host(static_cast<size_t>(m.in * m.out));
  std::vector<float> row(static_cast<size_t>(m.in));
  int64_t r = 0;
  for (const WeightMatrix* p : parts) {
    const TypeKernels* k = FindTypeKernels(p->type);
    if (k == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("cuda weights: no dequantiser for ", GgmlTypeName(p->type)));
    }
    for (int64_t i = 0; i < p->out; ++i, ++r) {
      k->dequant(p->row(i), row.data(), m.in);
      uint16_t* dst = &host[static_cast<size_t>(r * m.in)];
      for (int64_t c = 0; c < m.in; ++c) dst[c] = F32ToF16(row[c]);
    }
  }
  const size_t bytes = host.size() * sizeof(uint16_t);
  RETURN_IF_ERROR(m.data.Reserve(bytes));
  PDSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(m.data.get(), host.data(), bytes, cudaMemcpyHostToDevice));
  return m;
}

absl::StatusOr<DeviceBuffer> UploadVector(const std::vector<float>& v) {
  DeviceBuffer b;
  RETURN_IF_ERROR(b.Reserve(v.size() * sizeof(float)));
  PDSERVE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(b.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return b;
}

}  // namespace

size_t DeviceWeights::bytes() const {
  size_t n = token_embd.data.bytes() + output.data.bytes() + output_norm.bytes() +
             rope_freq_factors.bytes();
  for (const DeviceLayerWeights& l : layers) {
    n += l.attn_norm.bytes() + l.ffn_norm.bytes() + l.bqkv.bytes() + l.q_norm.bytes() +
         l.k_norm.bytes() + l.post_attn_norm.bytes() + l.post_ffn_norm.bytes() +
         l.wqkv.data.bytes() + l.wo.data.bytes() + l.w_gate_up.data.bytes() +
         l.w_down.data.bytes();
  }
  return n;
}

absl::StatusOr<DeviceWeights> DeviceWeights::Upload(const ModelConfig& config,
                                                     const ModelWeights& weights) {
  DeviceWeights w;
  ASSIGN_OR_RETURN(w.token_embd, UploadStacked({&weights.token_embd}));
  w.tied_output = weights.output.data == weights.token_embd.data;
  if (!w.tied_output) {
    ASSIGN_OR_RETURN(w.output, UploadStacked({&weights.output}));
  }
  ASSIGN_OR_RETURN(w.output_norm, UploadVector(weights.output_norm));
  if (!config.rope_freq_factors.empty()) {
    ASSIGN_OR_RETURN(w.rope_freq_factors, UploadVector(config.rope_freq_factors));
  }
  for (int l = 0; l < config.n_layers; ++l) {
    const LayerWeights& src = weights.layers[l];
    DeviceLayerWeights dst;
    ASSIGN_OR_RETURN(dst.attn_norm, UploadVector(src.attn_norm));
    ASSIGN_OR_RETURN(dst.ffn_norm, UploadVector(src.ffn_norm));
    if (config.qkv_bias) {
      std::vector<float> bqkv = src.bq;
      bqkv.insert(bqkv.end(), src.bk.begin(), src.bk.end());
      bqkv.insert(bqkv.end(), src.bv.begin(), src.bv.end());
      ASSIGN_OR_RETURN(dst.bqkv, UploadVector(bqkv));
    }
    if (config.qk_norm) {
      ASSIGN_OR_RETURN(dst.q_norm, UploadVector(src.q_norm));
      ASSIGN_OR_RETURN(dst.k_norm, UploadVector(src.k_norm));
    }
    if (config.post_norms) {
      ASSIGN_OR_RETURN(dst.post_attn_norm, UploadVector(src.post_attn_norm));
      ASSIGN_OR_RETURN(dst.post_ffn_norm, UploadVector(src.post_ffn_norm));
    }
    ASSIGN_OR_RETURN(dst.wqkv, UploadStacked({&src.wq, &src.wk, &src.wv}));
    ASSIGN_OR_RETURN(dst.wo, UploadStacked({&src.wo}));
    ASSIGN_OR_RETURN(dst.w_gate_up, UploadStacked({&src.w_gate, &src.w_up}));
    ASSIGN_OR_RETURN(dst.w_down, UploadStacked({&src.w_down}));
    w.layers.push_back(std::move(dst));
  }
  return w;
}

}  // namespace pdserve::cuda
