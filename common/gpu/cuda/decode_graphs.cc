#include "common/gpu/cuda/decode_graphs.h"

#include <cstring>

#include "common/base/status_macros.h"
#include "common/engine/kv_cache.h"
#include "common/gpu/cuda/cuda_status.h"
#include "glog/logging.h"

namespace pdserve::cuda {

DecodeGraphs::DecodeGraphs(const ModelConfig& config, int32_t block_size, cudaStream_t stream)
    : config_(config),
      block_size_(block_size),
      max_blocks_(BlocksForTokens(config.context_length, block_size)),
      stream_(stream),
      execs_(kMaxBatch, nullptr) {}

DecodeGraphs::~DecodeGraphs() { Clear(); }

bool DecodeGraphs::Eligible(const ForwardBatch& batch) const {
  const size_t score_bytes =
      sizeof(float) * kMaxBatch * config_.n_heads * static_cast<size_t>(config_.context_length);
  if (disabled_ || batch.on_layer_done || batch.chunks.empty() || batch.chunks.size() > kMaxBatch ||
      score_bytes > kMaxScoreBytes) {
    return false;
  }
  for (const SequenceChunk& ch : batch.chunks) {
    if (ch.tokens.size() != 1 || !ch.want_logits) return false;
  }
  return true;
}

void DecodeGraphs::Clear() {
  for (cudaGraphExec_t& e : execs_) {
    if (e != nullptr) cudaGraphExecDestroy(e);
    e = nullptr;
  }
}

absl::Status DecodeGraphs::Init() {
  const int64_t k = kMaxBatch;
  RETURN_IF_ERROR(arena_.Reserve(config_, k, k, k * config_.n_heads * config_.context_length));
  scores_at_ = 0;
  ids_at_ = scores_at_ + sizeof(int64_t) * k;
  pos_at_ = ids_at_ + sizeof(int32_t) * k;
  table_at_ = pos_at_ + sizeof(int32_t) * k;
  rows_at_ = table_at_ + sizeof(int32_t) * k;
  tables_at_ = rows_at_ + sizeof(int32_t) * k;
  meta_bytes_ = tables_at_ + sizeof(int32_t) * k * max_blocks_;
  RETURN_IF_ERROR(meta_host_.Reserve(meta_bytes_));
  RETURN_IF_ERROR(meta_dev_.Reserve(meta_bytes_));
  RETURN_IF_ERROR(logits_host_.Reserve(sizeof(float) * k * config_.n_vocab));
  // Fixed for every graph: token t's scores, table and logit row.
  auto* h = meta_host_.get<uint8_t>();
  for (int t = 0; t < k; ++t) {
    reinterpret_cast<int64_t*>(h + scores_at_)[t] =
        static_cast<int64_t>(t) * config_.context_length;
    reinterpret_cast<int32_t*>(h + table_at_)[t] = t * max_blocks_;
    reinterpret_cast<int32_t*>(h + rows_at_)[t] = t;
  }
  ready_ = true;
  return absl::OkStatus();
}

void DecodeGraphs::Fill(const ForwardBatch& batch) {
  auto* h = meta_host_.get<uint8_t>();
  auto* ids = reinterpret_cast<int32_t*>(h + ids_at_);
  auto* pos = reinterpret_cast<int32_t*>(h + pos_at_);
  auto* tables = reinterpret_cast<int32_t*>(h + tables_at_);
  for (size_t t = 0; t < batch.chunks.size(); ++t) {
    const SequenceChunk& ch = batch.chunks[t];
    ids[t] = ch.tokens[0];
    pos[t] = ch.start_pos;
    // Validated: the table covers pos, and pos < context_length.
    const size_t n = std::min(ch.block_table.size(), static_cast<size_t>(max_blocks_));
    std::memcpy(tables + t * max_blocks_, ch.block_table.data(), n * sizeof(int32_t));
  }
}

StepTokensView DecodeGraphs::View(int n) const {
  const uint8_t* d = meta_dev_.get<uint8_t>();
  return StepTokensView{reinterpret_cast<const int32_t*>(d + ids_at_),
                        reinterpret_cast<const int32_t*>(d + pos_at_),
                        reinterpret_cast<const int32_t*>(d + table_at_),
                        reinterpret_cast<const int64_t*>(d + scores_at_),
                        reinterpret_cast<const int32_t*>(d + tables_at_),
                        n};
}

absl::Status DecodeGraphs::Capture(int n, const EnqueueFn& enqueue) {
  const auto* rows = reinterpret_cast<const int32_t*>(meta_dev_.get<uint8_t>() + rows_at_);
  // One eager run of the same shape first: it loads the kernels (lazy
  // module loading cannot happen inside a capture on older drivers) and
  // lets cuBLAS pick its algorithms. It computes the very step the graph
  // then replays, and writes the same K/V, so running both is harmless.
  RETURN_IF_ERROR(enqueue(arena_, View(n), rows, n));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  absl::Status st = enqueue(arena_, View(n), rows, n);
  if (st.ok()) {
    st = CudaStatus(
        cudaMemcpyAsync(logits_host_.get(), arena_.logits.get(),
                        sizeof(float) * n * config_.n_vocab, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync(logits)");
  }
  cudaGraph_t graph = nullptr;
  const absl::Status ended =
      CudaStatus(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
  if (st.ok()) st = ended;
  if (st.ok()) {
    st = CudaStatus(cudaGraphInstantiate(&execs_[n - 1], graph, 0), "cudaGraphInstantiate");
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (st.ok()) VLOG(1) << "captured the decode graph of batch " << n;
  return st;
}

absl::Status DecodeGraphs::Run(const ForwardBatch& batch, KvCache& cache, const EnqueueFn& enqueue,
                               std::vector<float>* logits) {
  if (!ready_) RETURN_IF_ERROR(Init());
  if (cache.pool() != pool_ || cache.num_ids() != pool_blocks_) {
    Clear();
    pool_ = cache.pool();
    pool_blocks_ = cache.num_ids();
  }
  const int n = static_cast<int>(batch.chunks.size());
  Fill(batch);
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(meta_dev_.get(), meta_host_.get(), meta_bytes_,
                                               cudaMemcpyHostToDevice, stream_));
  if (execs_[n - 1] == nullptr) {
    if (absl::Status st = Capture(n, enqueue); !st.ok()) {
      disabled_ = true;
      Clear();
      return st;
    }
  }
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(execs_[n - 1], stream_));
  PDSERVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  logits->resize(static_cast<size_t>(n) * config_.n_vocab);
  std::memcpy(logits->data(), logits_host_.get(), logits->size() * sizeof(float));
  return absl::OkStatus();
}

}  // namespace pdserve::cuda
