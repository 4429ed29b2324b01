#include "common/cpu/cpu_model_runner.h"

#include <atomic>
#include <cmath>

#include "common/base/status_macros.h"
#include "common/cpu/gelu.h"
#include "common/cpu/kv_int8.h"
#include "common/cpu/llama_numerics.h"
#include "common/quant/half.h"
#include "common/quant/kernels.h"

namespace pdserve {
namespace {

// Query tokens per attention tile: each K/V row is read once per this many
// tokens (times the GQA group) instead of once per (token, head). A tile's
// scores take 16 x group x context floats per thread (1.5 MB for SmolLM2's
// group of 3 at 8k context, 14 MB for a group of 7 at 32k), and a 512-token
// chunk still leaves 32 x n_kv_heads tiles to share among threads.
constexpr int kAttentionTileTokens = 16;

// ggml's rope cache for one token: theta starts at the position and is
// multiplied by base^(-2/dim) per pair (an iterated product, not a fresh
// pow per pair); r gets interleaved cos, sin.
void RopeAngles(int32_t pos, int rope_dim, float base, float freq_scale,
                const std::vector<float>& factors, float* r) {
  const float theta_scale = std::pow(base, -2.0f / rope_dim);
  float theta = static_cast<float>(pos);
  for (int i = 0; i < rope_dim / 2; ++i) {
    // freq_scale * (theta / factor), exact when both are 1.
    const float angle = freq_scale * (theta / (factors.empty() ? 1.0f : factors[i]));
    r[2 * i] = std::cos(angle);
    r[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

void AddBias(const std::vector<float>& bias, float* rows, int64_t n_rows) {
  const int64_t n = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t i = 0; i < n; ++i) rows[t * n + i] += bias[i];
  }
}

}  // namespace

CpuModelRunner::CpuModelRunner(const ModelConfig& config, const ModelWeights* weights,
                               int num_threads)
    : config_(config),
      weights_(weights),
      packed_(PackedModelWeights::Pack(*weights)),
      pool_(num_threads),
      matmul_(&pool_) {
  attn_scratch_.resize(pool_.num_threads());
}

absl::Status CpuModelRunner::Forward(const ForwardBatch& batch, KvCache& cache,
                                     std::vector<float>* logits) {
  if (cache.on_device()) {
    return absl::FailedPreconditionError("cpu model runner: the KV cache is in device memory");
  }
  RETURN_IF_ERROR(ValidateBatch(batch, config_, cache));
  logits->clear();
  if (batch.chunks.empty()) return absl::OkStatus();
  PrepareStep(batch);
  Embed(batch);
  for (int l = 0; l < config_.n_layers; ++l) RunLayer(batch, cache, l);
  ComputeLogits(batch, logits);
  return absl::OkStatus();
}

// Sizes scratch and precomputes RoPE cos/sin per token, for global layers
// and (with windows) for local ones, which rotate with their own base and
// no scaling.
void CpuModelRunner::PrepareStep(const ForwardBatch& batch) {
  tokens_.clear();
  std::vector<ChunkSpan> spans;
  for (size_t c = 0; c < batch.chunks.size(); ++c) {
    const SequenceChunk& ch = batch.chunks[c];
    spans.push_back({static_cast<int>(c), static_cast<int64_t>(tokens_.size()), ch.start_pos,
                     static_cast<int>(ch.tokens.size())});
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      tokens_.push_back({static_cast<int>(c), ch.start_pos + static_cast<int32_t>(i)});
    }
  }
  n_tokens_ = static_cast<int64_t>(tokens_.size());
  attn_tiles_ = PlanAttentionTiles({config_.n_heads, config_.n_kv_heads, config_.head_dim}, spans,
                                   kAttentionTileTokens, pool_.num_threads());
  const int64_t T = n_tokens_;
  x_.resize(T * config_.n_embd);
  h_.resize(T * std::max(config_.n_embd, config_.q_dim()));
  q_.resize(T * config_.q_dim());
  k_.resize(T * config_.kv_dim());
  v_.resize(T * config_.kv_dim());
  attn_.resize(T * config_.q_dim());
  gate_.resize(T * config_.n_ff);
  up_.resize(T * config_.n_ff);
  const int rd = config_.rope_dim;
  rope_.resize(T * rd);
  rope_local_.resize(config_.has_windows() ? T * rd : 0);
  for (int64_t t = 0; t < T; ++t) {
    RopeAngles(tokens_[t].pos, rd, config_.rope_base, config_.rope_freq_scale,
               config_.rope_freq_factors, &rope_[t * rd]);
    if (config_.has_windows()) {
      RopeAngles(tokens_[t].pos, rd, config_.rope_base_local, 1.0f, {}, &rope_local_[t * rd]);
    }
  }
}

void CpuModelRunner::Embed(const ForwardBatch& batch) {
  const WeightMatrix& e = weights_->token_embd;
  const TypeKernels* k = FindTypeKernels(e.type);
  int64_t t = 0;
  for (const SequenceChunk& ch : batch.chunks) {
    for (int32_t id : ch.tokens) {
      float* x = &x_[t * config_.n_embd];
      k->dequant(e.row(id), x, config_.n_embd);
      if (config_.embed_scale != 1.0f) {
        for (int i = 0; i < config_.n_embd; ++i) x[i] *= config_.embed_scale;
      }
      ++t;
    }
  }
}

// y = x / sqrt(mean(x^2) + eps) * w, with the sum of squares in double and
// the scale and weight applied as two separate roundings, as ggml does.
// Row-independent work (norms, RoPE, activations, residual adds) on the
// pool once a prompt's rows pay for the hand-off; each row is computed as
// alone, so the split never changes a bit. With the matmuls at the
// machine's int8 rate these were a tenth of a prompt on one thread.
void CpuModelRunner::ForRows(int64_t rows, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  constexpr int64_t kParallelRows = 16;
  if (rows < kParallelRows || pool_.num_threads() == 1) {
    fn(0, rows);
    return;
  }
  pool_.ParallelFor(rows, 1, fn);
}

// ggml's rms_norm: the squares summed in double, in order.
void CpuModelRunner::RmsNorm(const float* x, const std::vector<float>& w, float* out,
                             int64_t rows) {
  const int n = static_cast<int>(w.size());
  ForRows(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * n;
      float* o = out + r * n;
      double sum = 0.0;
      for (int i = 0; i < n; ++i) sum += static_cast<double>(xr[i] * xr[i]);
      const float mean = static_cast<float>(sum / n);
      const float scale = 1.0f / std::sqrt(mean + config_.rms_eps);
      for (int i = 0; i < n; ++i) o[i] = (xr[i] * scale) * w[i];
    }
  });
}

void CpuModelRunner::AddResidual() {
  const int64_t n = config_.n_embd;
  ForRows(n_tokens_, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * n; i < end * n; ++i) x_[i] += h_[i];
  });
}

// Rotary embedding. Adjacent pairs ("NORM"): GGUF llama weights were
// permuted by the converter so that (2i, 2i+1) rotate together; NEOX
// (qwen2, gemma3) rotates (i, i + rope_dim / 2). The x0 products are fused
// with the sums: that is what GCC makes of ggml's `x0*cos - x1*sin` /
// `x0*sin + x1*cos` when llama.cpp is built for an FMA CPU (-march=native
// contracts them), and plain rounding differs by an ulp.
void CpuModelRunner::ApplyRope(float* rows, int n_heads, const std::vector<float>& angles) {
  const int dh = config_.head_dim;
  const int half = config_.rope_dim / 2;
  const int stride = config_.rope_neox ? 1 : 2;      // between pairs' first elements
  const int partner = config_.rope_neox ? half : 1;  // from a pair's first to its second
  ForRows(n_tokens_, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* r = &angles[t * config_.rope_dim];
      for (int h = 0; h < n_heads; ++h) {
        float* v = rows + (t * n_heads + h) * dh;
        for (int i = 0; i < half; ++i) {
          float* a = v + i * stride;
          float* b = a + partner;
          const float x0 = *a, x1 = *b;
          *a = std::fma(x0, r[2 * i], -(x1 * r[2 * i + 1]));
          *b = std::fma(x0, r[2 * i + 1], x1 * r[2 * i]);
        }
      }
    }
  });
}

void CpuModelRunner::RunLayer(const ForwardBatch& batch, KvCache& cache, int l) {
  const LayerWeights& w = weights_->layers[l];
  const PackedLayerWeights& pw = packed_.layers[l];
  const int64_t T = n_tokens_;
  RmsNorm(x_.data(), w.attn_norm, h_.data(), T);
  const MatmulJob qkv[] = {
      {&w.wq, q_.data(), &pw.wq}, {&w.wk, k_.data(), &pw.wk}, {&w.wv, v_.data(), &pw.wv}};
  matmul_.Run(qkv, h_.data(), T);
  if (config_.qkv_bias) {
    AddBias(w.bq, q_.data(), T);
    AddBias(w.bk, k_.data(), T);
    AddBias(w.bv, v_.data(), T);
  }
  if (config_.qk_norm) {
    RmsNorm(q_.data(), w.q_norm, q_.data(), T * config_.n_heads);
    RmsNorm(k_.data(), w.k_norm, k_.data(), T * config_.n_kv_heads);
  }
  const std::vector<float>& angles = config_.window(l) > 0 ? rope_local_ : rope_;
  ApplyRope(q_.data(), config_.n_heads, angles);
  ApplyRope(k_.data(), config_.n_kv_heads, angles);
  ScaleQueries();
  StoreKv(batch, cache, l);
  if (batch.on_layer_done) batch.on_layer_done(l);
  Attention(batch, cache, l);
  const MatmulJob out[] = {{&w.wo, h_.data(), &pw.wo}};
  matmul_.Run(out, attn_.data(), T);
  if (config_.post_norms) RmsNorm(h_.data(), w.post_attn_norm, h_.data(), T);
  AddResidual();
  FeedForward(l);
}

// Where the architecture scales q rather than q.k (ModelConfig::
// attn_scale_on_q), q is scaled here and the attention's kq_scale is 1.
void CpuModelRunner::ScaleQueries() {
  if (!config_.attn_scale_on_q) return;
  for (float& x : q_) x *= config_.attn_scale;
}

void CpuModelRunner::StoreKv(const ForwardBatch& batch, KvCache& cache, int l) {
  if (cache.layout().is_int8()) {
    StoreKvInt8(batch, cache, l);
    return;
  }
  const AttentionKernels& k = GetAttentionKernels();
  const int64_t kvd = config_.kv_dim();
  const int bs = cache.layout().block_size;
  for (int64_t t = 0; t < n_tokens_; ++t) {
    const SequenceChunk& ch = batch.chunks[tokens_[t].chunk];
    const int32_t pos = tokens_[t].pos;
    const int32_t block = ch.block_table[pos / bs];
    k.to_f16(&k_[t * kvd], cache.K(l, block) + (pos % bs) * kvd, static_cast<int>(kvd));
    k.to_f16(&v_[t * kvd], cache.V(l, block) + (pos % bs) * kvd, static_cast<int>(kvd));
  }
}

// One scale per (token, kv head) for K and for V; see common/cpu/kv_int8.h for
// why per token rather than per block.
void CpuModelRunner::StoreKvInt8(const ForwardBatch& batch, KvCache& cache, int l) {
  const int64_t kvd = config_.kv_dim();
  const int dh = config_.head_dim;
  const int nkv = config_.n_kv_heads;
  const int bs = cache.layout().block_size;
  for (int64_t t = 0; t < n_tokens_; ++t) {
    const SequenceChunk& ch = batch.chunks[tokens_[t].chunk];
    const int32_t pos = tokens_[t].pos;
    const int32_t block = ch.block_table[pos / bs];
    const int r = pos % bs;
    for (int h = 0; h < nkv; ++h) {
      cache.KScales(l, block)[r * nkv + h] =
          QuantizeKvInt8(&k_[t * kvd + h * dh], dh, cache.K8(l, block) + r * kvd + h * dh);
      cache.VScales(l, block)[r * nkv + h] =
          QuantizeKvInt8(&v_[t * kvd + h * dh], dh, cache.V8(l, block) + r * kvd + h * dh);
    }
  }
}

// Tiles are taken from a shared counter, largest first: their costs differ
// by orders of magnitude between a decode row and a long prefill chunk.
void CpuModelRunner::Attention(const ForwardBatch& batch, KvCache& cache, int l) {
  const AttentionShape shape{config_.n_heads, config_.n_kv_heads, config_.head_dim,
                             config_.attn_scale_on_q ? 1.0f : config_.attn_scale};
  const int64_t stride = config_.q_dim();
  std::atomic<size_t> next{0};
  pool_.Run([&](int thread, int) {
    for (size_t i = next++; i < attn_tiles_.size(); i = next++) {
      const AttentionTile& tile = attn_tiles_[i];
      const int64_t off = tile.first_token * stride;
      AttendTile(shape, tile, config_.window(l), &q_[off], stride,
                 batch.chunks[tile.chunk].block_table, cache, l,
                 &attn_[off], attn_scratch_[thread]);
    }
  });
}

void CpuModelRunner::FeedForward(int l) {
  const LayerWeights& w = weights_->layers[l];
  const PackedLayerWeights& pw = packed_.layers[l];
  const int64_t T = n_tokens_;
  RmsNorm(x_.data(), w.ffn_norm, h_.data(), T);
  const MatmulJob gate_up[] = {{&w.w_gate, gate_.data(), &pw.w_gate},
                               {&w.w_up, up_.data(), &pw.w_up}};
  matmul_.Run(gate_up, h_.data(), T);
  const int64_t n_ff = config_.n_ff;
  ForRows(T, [&](int64_t begin, int64_t end) {
    float* gate = gate_.data() + begin * n_ff;
    const float* up = up_.data() + begin * n_ff;
    if (config_.ffn_activation == FfnActivation::kGelu) {
      GeluMulRows(gate, up, end - begin, n_ff);
    } else if (LlamaExactNumericsActive()) {
      LlamaSiluMulRows(gate, up, end - begin, n_ff);
    } else {
      for (int64_t i = 0; i < (end - begin) * n_ff; ++i) {
        gate[i] = (gate[i] / (1.0f + std::exp(-gate[i]))) * up[i];
      }
    }
  });
  const MatmulJob down[] = {{&w.w_down, h_.data(), &pw.w_down}};
  matmul_.Run(down, gate_.data(), T);
  if (config_.post_norms) RmsNorm(h_.data(), w.post_ffn_norm, h_.data(), T);
  AddResidual();
}

void CpuModelRunner::ComputeLogits(const ForwardBatch& batch, std::vector<float>* logits) {
  std::vector<int64_t> rows;
  int64_t t = 0;
  for (const SequenceChunk& ch : batch.chunks) {
    t += static_cast<int64_t>(ch.tokens.size());
    if (!ch.want_logits) continue;
    for (int64_t r = t - ch.logit_rows; r < t; ++r) rows.push_back(r);
  }
  if (rows.empty()) return;
  const int n = config_.n_embd;
  std::vector<float> last(rows.size() * n);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(&x_[rows[i] * n], n, &last[i * n]);
  }
  RmsNorm(last.data(), weights_->output_norm, last.data(), static_cast<int64_t>(rows.size()));
  logits->resize(rows.size() * static_cast<size_t>(config_.n_vocab));
  const MatmulJob out[] = {{&weights_->output, logits->data(), &packed_.output}};
  matmul_.Run(out, last.data(), static_cast<int64_t>(rows.size()));
}

}  // namespace pdserve
