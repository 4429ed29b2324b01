#include "common/gpu/cuda/cuda_model_runner.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/gpu/cuda/cuda_device.h"
#include "common/gpu/cuda/cuda_status.h"
#include "common/gpu/cuda/decode_graphs.h"
#include "common/gpu/cuda/device_buffer.h"
#include "common/gpu/cuda/device_weights.h"
#include "common/gpu/cuda/llama_kernels.h"
#include "common/gpu/cuda/step_buffers.h"
#include "glog/logging.h"

namespace pdserve::cuda {

class CudaModelRunner::Impl {
 public:
  Impl(const ModelConfig& config, const CudaRunnerOptions& options)
      : config_(config), device_(options.device), use_graphs_(options.cuda_graphs) {}
  ~Impl() {
    cudaSetDevice(device_);
    graphs_.reset();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init(const ModelWeights& weights) {
    RETURN_IF_ERROR(CheckDevice(device_));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    PDSERVE_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_));
    PDSERVE_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_));
    // A workspace of our own: cuBLAS then allocates nothing while a decode
    // graph is being captured.
    RETURN_IF_ERROR(cublas_workspace_.Reserve(kCublasWorkspaceBytes));
    PDSERVE_CUBLAS_RETURN_IF_ERROR(
        cublasSetWorkspace(cublas_, cublas_workspace_.get(), kCublasWorkspaceBytes));
    ASSIGN_OR_RETURN(weights_, DeviceWeights::Upload(config_, weights));
    // Pageable uploads may still be in flight on the legacy stream, which
    // our non-blocking stream does not wait for.
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    LOG(INFO) << "cuda runner on device " << device_ << ": "
              << DeviceDescription(device_).value_or("?") << ", weights "
              << (weights_.bytes() >> 20) << " MiB f16";
    return absl::OkStatus();
  }

  const ModelConfig& config() const { return config_; }
  const absl::Status& sticky() const { return sticky_; }

  absl::Status Forward(const ForwardBatch& batch, KvCache& cache, std::vector<float>* logits) {
    if (!sticky_.ok()) return sticky_;
    RETURN_IF_ERROR(CheckCache(cache));
    RETURN_IF_ERROR(ValidateBatch(batch, config_, cache));
    logits->clear();
    if (batch.chunks.empty()) return absl::OkStatus();
    absl::Status st = RunStep(batch, cache, logits);
    if (!st.ok()) {
      // Nothing of the failed step may still read the reused step buffers.
      const cudaError_t sync = cudaStreamSynchronize(stream_);
      // A fault poisons the context: drain the error state and keep it.
      const cudaError_t err = cudaGetLastError();
      if (IsStickyCudaError(sync) || IsStickyCudaError(err) ||
          st.code() == absl::StatusCode::kInternal) {
        sticky_ = st;
      }
      LOG(ERROR) << "cuda forward failed: " << st;
    }
    return st;
  }

 private:
  absl::Status CheckCache(const KvCache& cache) const {
    if (!cache.on_device()) {
      return absl::FailedPreconditionError("cuda runner: the KV cache is in host memory");
    }
    if (cache.layout().is_int8()) {
      return absl::FailedPreconditionError("cuda runner: kv_dtype int8 is CPU-only; use f16");
    }
    return absl::OkStatus();
  }

  // Packs the step's metadata into one pinned buffer, uploads it and
  // points `view_` at the device copies.
  absl::Status UploadMeta() {
    const size_t n_tok = meta_.ids.size();
    const size_t i32 = sizeof(int32_t);
    const size_t bytes =
        sizeof(int64_t) * n_tok + i32 * (3 * n_tok + meta_.tables.size() + meta_.logit_rows.size());
    RETURN_IF_ERROR(meta_host_.Reserve(bytes));
    RETURN_IF_ERROR(meta_dev_.Reserve(bytes));
    uint8_t* h = meta_host_.get<uint8_t>();
    uint8_t* d = meta_dev_.get<uint8_t>();
    size_t off = 0;
    auto put = [&](const auto& v) {
      using T = typename std::decay_t<decltype(v)>::value_type;
      if (!v.empty()) std::memcpy(h + off, v.data(), v.size() * sizeof(T));
      const T* dev = reinterpret_cast<const T*>(d + off);
      off += v.size() * sizeof(T);
      return dev;
    };
    view_.score_offsets = put(meta_.score_offsets);  // first: 8-byte aligned
    view_.token_ids = put(meta_.ids);
    view_.positions = put(meta_.positions);
    view_.table_offsets = put(meta_.table_offsets);
    view_.block_tables = put(meta_.tables);
    logit_rows_ = put(meta_.logit_rows);
    view_.n_tokens = static_cast<int64_t>(n_tok);
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }

  absl::Status Gemm(const DeviceMatrix& w, const __half* x, int64_t rows, float* y) {
    const float alpha = 1.0f, beta = 0.0f;
    PDSERVE_CUBLAS_RETURN_IF_ERROR(
        cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.out),
                     static_cast<int>(rows), static_cast<int>(w.in), &alpha, w.get(), CUDA_R_16F,
                     static_cast<int>(w.in), x, CUDA_R_16F, static_cast<int>(w.in), &beta, y,
                     CUDA_R_32F, static_cast<int>(w.out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }

  KvLayerView LayerView(KvCache& cache, int layer) const {
    const KvLayout& l = cache.layout();
    return KvLayerView{reinterpret_cast<__half*>(cache.LayerBlock(layer, 0)),
                       l.bytes_per_layer_block() / static_cast<int64_t>(sizeof(__half)),
                       l.block_size, static_cast<int32_t>(l.kv_dim())};
  }

  // Local (window) layers rotate with their own base and no scaling, as
  // the CPU runner's angles do.
  RopeParams LayerRope(int l) const {
    const ModelConfig& c = config_;
    if (c.window(l) > 0) return {c.rope_dim, c.rope_base_local, 1.0f, nullptr, c.rope_neox};
    return {c.rope_dim, c.rope_base, c.rope_freq_scale,
            weights_.rope_freq_factors.bytes() != 0 ? weights_.rope_freq_factors.get<float>()
                                                    : nullptr,
            c.rope_neox};
  }

  // `batch` is null while a decode graph is captured (no layer hook).
  absl::Status RunLayer(const ForwardBatch* batch, StepBuffers& b, const StepTokensView& view,
                        KvCache& cache, int l) {
    const ModelConfig& c = config_;
    const DeviceLayerWeights& w = weights_.layers[l];
    const int64_t T = view.n_tokens;
    const int64_t qkv_width = c.q_dim() + 2 * c.kv_dim();
    float* x = b.x.get<float>();
    float* y = b.y.get<float>();
    __half* h = b.h.get<__half>();
    float* qkv = b.qkv.get<float>();
    const KvLayerView kv = LayerView(cache, l);

    LaunchRmsNorm(x, w.attn_norm.get<float>(), T, c.n_embd, c.rms_eps, h, stream_);
    RETURN_IF_ERROR(Gemm(w.wqkv, h, T, qkv));
    if (c.qkv_bias) LaunchAddBias(qkv, w.bqkv.get<float>(), T, static_cast<int>(qkv_width), stream_);
    if (c.qk_norm) {
      LaunchHeadRmsNorm(qkv, qkv_width, 0, c.n_heads, c.head_dim, w.q_norm.get<float>(), c.rms_eps,
                        T, stream_);
      LaunchHeadRmsNorm(qkv, qkv_width, c.q_dim(), c.n_kv_heads, c.head_dim,
                        w.k_norm.get<float>(), c.rms_eps, T, stream_);
    }
    LaunchRope(qkv, qkv_width, c.n_heads + c.n_kv_heads, c.head_dim, LayerRope(l), view, stream_);
    LaunchStoreKv(qkv, qkv_width, c.q_dim(), c.q_dim() + c.kv_dim(), view, kv, stream_);
    if (batch != nullptr && batch->on_layer_done) {
      // The callback's transport reads the blocks from another stream.
      PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
      batch->on_layer_done(l);
    }
    const float scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    LaunchPagedAttention(qkv, qkv_width, {c.n_heads, c.n_kv_heads, c.head_dim, scale, c.window(l)},
                         view, kv, b.scores.get<float>(), b.attn.get<__half>(), stream_);
    RETURN_IF_ERROR(Gemm(w.wo, b.attn.get<__half>(), T, y));
    if (c.post_norms) {
      LaunchRmsNormF32(y, w.post_attn_norm.get<float>(), T, c.n_embd, c.rms_eps, y, stream_);
    }
    LaunchAddInPlace(x, y, T * c.n_embd, stream_);

    LaunchRmsNorm(x, w.ffn_norm.get<float>(), T, c.n_embd, c.rms_eps, h, stream_);
    RETURN_IF_ERROR(Gemm(w.w_gate_up, h, T, b.gate_up.get<float>()));
    if (c.ffn_activation == FfnActivation::kGelu) {
      LaunchGeGlu(b.gate_up.get<float>(), T, c.n_ff, h, stream_);
    } else {
      LaunchSwiGlu(b.gate_up.get<float>(), T, c.n_ff, h, stream_);
    }
    RETURN_IF_ERROR(Gemm(w.w_down, h, T, y));
    if (c.post_norms) {
      LaunchRmsNormF32(y, w.post_ffn_norm.get<float>(), T, c.n_embd, c.rms_eps, y, stream_);
    }
    LaunchAddInPlace(x, y, T * c.n_embd, stream_);
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }

  // The whole step, enqueued on the stream: embeddings, layers, and the
  // logits of `rows` rows (indices into the step's tokens) into b.logits.
  absl::Status EnqueueStep(const ForwardBatch* batch, StepBuffers& b, const StepTokensView& view,
                           const int32_t* logit_rows, int64_t rows, KvCache& cache) {
    const ModelConfig& c = config_;
    LaunchEmbed(weights_.token_embd.get(), view.token_ids, view.n_tokens, c.n_embd, c.embed_scale,
                b.x.get<float>(), stream_);
    for (int l = 0; l < c.n_layers; ++l) RETURN_IF_ERROR(RunLayer(batch, b, view, cache, l));
    if (rows == 0) return absl::OkStatus();
    LaunchGatherRows(b.x.get<float>(), logit_rows, rows, c.n_embd, b.y.get<float>(), stream_);
    LaunchRmsNorm(b.y.get<float>(), weights_.output_norm.get<float>(), rows, c.n_embd, c.rms_eps,
                  b.h.get<__half>(), stream_);
    RETURN_IF_ERROR(Gemm(weights_.output_matrix(), b.h.get<__half>(), rows, b.logits.get<float>()));
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  }

  absl::Status RunStep(const ForwardBatch& batch, KvCache& cache, std::vector<float>* logits) {
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    if (use_graphs_) {
      // Graphs bake in the block size (their tables' width); another one
      // needs new graphs.
      if (graphs_ == nullptr || graphs_->block_size() != cache.layout().block_size) {
        graphs_ = std::make_unique<DecodeGraphs>(config_, cache.layout().block_size, stream_);
      }
      if (graphs_->Eligible(batch)) {
        const absl::Status st = graphs_->Run(
            batch, cache,
            [this, &cache](StepBuffers& b, const StepTokensView& view, const int32_t* rows,
                           int64_t n) { return EnqueueStep(nullptr, b, view, rows, n, cache); },
            logits);
        // A capture that failed turns the graphs off; the step runs eagerly.
        if (st.ok() || !graphs_->disabled()) return st;
        LOG(WARNING) << "cuda graphs off, decode steps run eagerly: " << st;
        cudaGetLastError();  // the failed capture's error is not the step's
      }
    }
    meta_.Build(batch);
    const int64_t T = static_cast<int64_t>(meta_.ids.size());
    const int64_t rows = static_cast<int64_t>(meta_.logit_rows.size());
    RETURN_IF_ERROR(buffers_.Reserve(config_, T, rows, meta_.total_scores * config_.n_heads));
    RETURN_IF_ERROR(UploadMeta());
    RETURN_IF_ERROR(EnqueueStep(&batch, buffers_, view_, logit_rows_, rows, cache));
    logits->resize(static_cast<size_t>(rows) * config_.n_vocab);
    if (rows > 0) {
      // Pageable destination: the copy is synchronous with the host.
      PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits->data(), buffers_.logits.get(),
                                                   logits->size() * sizeof(float),
                                                   cudaMemcpyDeviceToHost, stream_));
    }
    // Also keeps the pinned metadata alive until the step's kernels ran.
    PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    return absl::OkStatus();
  }

  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

  const ModelConfig config_;
  const int device_;
  const bool use_graphs_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer cublas_workspace_;
  DeviceWeights weights_;
  absl::Status sticky_;
  std::unique_ptr<DecodeGraphs> graphs_;  // with use_graphs_, made on first use

  StepMeta meta_;
  PinnedBuffer meta_host_;
  DeviceBuffer meta_dev_;
  StepTokensView view_{};
  const int32_t* logit_rows_ = nullptr;
  StepBuffers buffers_;
};

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CudaModelRunner::Create(
    const ModelConfig& config, const ModelWeights& weights, const CudaRunnerOptions& options) {
  if (config.n_heads % config.n_kv_heads != 0 || config.rope_dim % 2 != 0) {
    return absl::FailedPreconditionError("cuda runner: unsupported head layout");
  }
  auto impl = std::make_unique<Impl>(config, options);
  RETURN_IF_ERROR(impl->Init(weights));
  return std::unique_ptr<CudaModelRunner>(new CudaModelRunner(std::move(impl)));
}

CudaModelRunner::CudaModelRunner(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModelRunner::~CudaModelRunner() = default;

const ModelConfig& CudaModelRunner::config() const { return impl_->config(); }

absl::Status CudaModelRunner::Forward(const ForwardBatch& batch, KvCache& cache,
                                      std::vector<float>* logits) {
  return impl_->Forward(batch, cache, logits);
}

absl::Status CudaModelRunner::Healthy() const { return impl_->sticky(); }

}  // namespace pdserve::cuda
