// KvCache: the paged key/value memory of one worker, plus its allocator.
//
// Layout: for every layer, for every block, one contiguous span of
// bytes_per_layer_block() bytes, which is what the KV transport sends or
// receives for that layer without copying. Inside it, by dtype:
//   f16:  K rows [block_size][kv_dim] f16, then V rows, same shape.
//   int8: K rows [block_size][kv_dim] int8, then V rows, then the K scales
//         [block_size][n_kv_heads] f32, then the V scales, same shape.
// int8 rows are symmetric absmax quantised per (token, kv head): element
// x = q * scale (see common/cpu/kv_int8.h). The scales live inside the block so
// a quantised block travels and is cached exactly as stored.
// A host pool is an anonymous mapping, so untouched blocks cost no RSS. With
// sliding-window layers it maps more block ids than its budget of
// num_blocks (up to the share of a block's bytes its window layers can give
// back, at most kMaxIdsPerBlock times): the allocator then charges bytes,
// and the memory in use stays within the budget (block_allocator.h). A
// device pool (a CUDA runner's) lives in memory a KvDeviceMemory owns; then
// every pointer below is a device address, which only device code and
// device-aware transports may touch (on_device() says which).
//
// Not thread-safe: the engine thread owns it; the KV transport writes only
// into blocks the engine reserved for that transfer.
#ifndef PDSERVE_COMMON_ENGINE_KV_CACHE_H_
#define PDSERVE_COMMON_ENGINE_KV_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/engine/block_allocator.h"
#include "common/model/model_config.h"

namespace pdserve {

struct KvLayout {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  // Element type of K/V: kKvDtypeF16 or kKvDtypeInt8 (the wire spelling).
  std::string dtype = "f16";
  // ModelConfig::layer_window: per layer 0 or its sliding window; empty
  // when no layer has one.
  std::vector<int32_t> layer_window;

  // Windowed attention reads from a row's window start rounded down to this
  // many positions (the CPU kernels' summation lanes, see
  // common/cpu/attention_tile.h); KV before it is never read.
  static constexpr int32_t kWindowReadAlign = 64;

  static KvLayout ForModel(const ModelConfig& c, int32_t block_size,
                           const std::string& dtype = "f16");
  // SmolLM2-135M's KV shape (30 layers, 3 KV heads of 64), for benchmarks
  // and tests that size their blocks like the model pdserve ships with.
  static KvLayout SmolLm2(int32_t block_size = 16);
  bool is_int8() const { return dtype == "int8"; }
  // The first logical block of a prompt of n_blocks blocks whose KV a
  // decode worker can read in `layer`: 0 for a global layer; for a window
  // layer the blocks before it hold positions no later token attends, so
  // prefill does not send them. A function of n_blocks (not the exact
  // length) so that receiver and sender agree on it from the reservation.
  int32_t FirstSentBlock(int layer, int32_t n_blocks) const;
  int64_t kv_dim() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  int64_t elem_bytes() const { return is_int8() ? 1 : 2; }
  // Bytes of one token's K (or V) row in one layer, its scales included.
  int64_t row_bytes() const {
    return kv_dim() * elem_bytes() + (is_int8() ? n_kv_heads * int64_t{sizeof(float)} : 0);
  }
  // K + V bytes of one block in one layer.
  int64_t bytes_per_layer_block() const { return 2 * block_size * row_bytes(); }
  // K + V bytes of one token over all layers.
  int64_t bytes_per_token() const { return 2 * n_layers * row_bytes(); }
  bool operator==(const KvLayout& o) const = default;
  std::string DebugString() const;
};

// Another process's KV pool mapped into this one (CUDA IPC); unmapped when
// destroyed.
class KvPeerPool {
 public:
  virtual ~KvPeerPool() = default;
  virtual const uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

// An ordered device-to-device byte channel between this process and one
// peer (NCCL): the receiver's i-th RecvBlocks gets the sender's i-th
// SendBlocks. Calls only enqueue; Wait finishes them. Thread-compatible.
class KvPeerChannel {
 public:
  virtual ~KvPeerChannel() = default;
  // Sends the blocks' bytes (device addresses in the local pool), in order.
  virtual absl::Status SendBlocks(absl::Span<const uint8_t* const> blocks, size_t block_bytes) = 0;
  // Receives as many blocks into `blocks`; a null entry is received and
  // dropped (a dead epoch's frame still keeps both ends in step).
  virtual absl::Status RecvBlocks(absl::Span<uint8_t* const> blocks, size_t block_bytes) = 0;
  // Until everything enqueued finished. At the deadline, on a peer failure
  // or after Interrupt, the channel aborts and is dead from then on.
  virtual absl::Status Wait(absl::Time deadline) = 0;
  virtual void Abort(const std::string& why) = 0;
  // Thread-safe, unlike the rest: makes a Wait in progress (or the next
  // one) abort the channel and return CANCELLED promptly, so another
  // thread can take back the blocks a receive was writing.
  virtual void Interrupt() = 0;
};

// Device memory a KvCache pool lives in; freed when destroyed. Implemented
// next to each device runtime (common/gpu/cuda/), so this header needs none.
class KvDeviceMemory {
 public:
  virtual ~KvDeviceMemory() = default;
  virtual uint8_t* data() const = 0;
  virtual size_t size() const = 0;
  // Synchronous copies of equal-sized blocks of this memory to and from one
  // contiguous host buffer (block i at i * block_bytes), for transports that
  // stage device blocks through host memory (TCP). Thread-safe.
  virtual absl::Status GatherToHost(absl::Span<const uint8_t* const> blocks, size_t block_bytes,
                                    void* dst) const = 0;
  virtual absl::Status ScatterFromHost(const void* src, absl::Span<uint8_t* const> blocks,
                                       size_t block_bytes) const = 0;

  // CUDA IPC. Bytes that let another process of this node map the whole
  // allocation; FAILED_PRECONDITION where the memory cannot be shared.
  virtual absl::StatusOr<std::string> ExportHandle() const;
  // Maps an allocation of `bytes` that another process exported.
  virtual absl::StatusOr<std::unique_ptr<KvPeerPool>> OpenPeer(const std::string& handle,
                                                               size_t bytes) const;
  // Synchronous device-to-device copies of equal-sized blocks, src[i] to
  // dst[i]; sources may lie in a peer pool. Thread-safe.
  virtual absl::Status CopyBlocks(absl::Span<const uint8_t* const> src,
                                  absl::Span<uint8_t* const> dst, size_t block_bytes) const;

  // NCCL. Whether this memory can open peer channels at all.
  virtual bool SupportsPeerChannels() const { return false; }
  // A fresh channel id: rank 0 makes it and sends it to rank 1.
  virtual absl::StatusOr<std::string> NewPeerChannelId() const;
  // Joins channel `id` as rank 0 or 1; blocks until the other rank joined,
  // DEADLINE_EXCEEDED at the deadline, or CANCELLED soon after another
  // thread sets *interrupted (when not null).
  virtual absl::StatusOr<std::unique_ptr<KvPeerChannel>> JoinPeerChannel(
      const std::string& id, int rank, absl::Time deadline,
      const std::atomic<bool>* interrupted) const;
};

class KvCache {
 public:
  // A host pool.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvLayout& layout,
                                                         int32_t num_blocks);
  // A pool in `memory`, which must hold at least PoolBytes(layout, num_blocks).
  // Device memory is not given back by ReleaseWindowLayers, so a device
  // pool has exactly num_blocks ids.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvLayout& layout, int32_t num_blocks,
                                                         std::unique_ptr<KvDeviceMemory> memory);
  // Bytes of the pool of `num_blocks` block ids, all layers.
  static size_t PoolBytes(const KvLayout& layout, int32_t num_blocks);
  // Most block ids a host pool maps per block of its budget.
  static constexpr int32_t kMaxIdsPerBlock = 8;
  // The block ids of a host pool with a budget of `num_blocks` (see above).
  static int32_t HostIds(const KvLayout& layout, int32_t num_blocks);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvLayout& layout() const { return layout_; }
  BlockAllocator& allocator() { return allocator_; }
  const BlockAllocator& allocator() const { return allocator_; }
  // The budget in blocks (what the pool is sized and reported by).
  int32_t num_blocks() const { return allocator_.num_blocks(); }
  // Valid block ids are [0, num_ids()); the pool's layout strides by it.
  int32_t num_ids() const { return num_ids_; }
  bool on_device() const { return device_memory_ != nullptr; }
  // The whole pool: layer-major, then block (see LayerBlock).
  uint8_t* pool() { return base_; }
  // Null for host pools.
  const KvDeviceMemory* device_memory() const { return device_memory_.get(); }

  // These accessors sit in attention's inner loops: they use the strides
  // cached at construction, not the layout's (which compares dtype strings).
  uint8_t* LayerBlock(int layer, int32_t block) {
    return base_ + (static_cast<int64_t>(layer) * num_ids_ + block) * layer_block_bytes_;
  }
  // f16 caches only.
  // Gives a block's sliding-window layers' memory back to the system
  // (host pools: madvise DONTNEED over the page-aligned part of each
  // (layer, block) span, which then reads as zeros); global layers are
  // untouched. Returns the bytes given back (for
  // BlockAllocator::MarkWindowReleased): 0 for device pools and layouts
  // without windows.
  int64_t ReleaseWindowLayers(int32_t block);
  // Gives every layer's memory of `blocks` (not in use) back to the
  // system: the allocator's release callback for pools with more ids than
  // their budget (block_allocator.h). Runs of consecutive ids go in one
  // madvise per layer.
  void ReleaseBlocks(absl::Span<const int32_t> blocks);
  uint16_t* K(int layer, int32_t block) {
    return reinterpret_cast<uint16_t*>(LayerBlock(layer, block));
  }
  uint16_t* V(int layer, int32_t block) { return K(layer, block) + block_elems_; }
  // int8 caches only: rows [block_size][kv_dim], scales [block_size][n_kv_heads].
  int8_t* K8(int layer, int32_t block) {
    return reinterpret_cast<int8_t*>(LayerBlock(layer, block));
  }
  int8_t* V8(int layer, int32_t block) { return K8(layer, block) + block_elems_; }
  float* KScales(int layer, int32_t block) {
    return reinterpret_cast<float*>(V8(layer, block) + block_elems_);
  }
  float* VScales(int layer, int32_t block) {
    return KScales(layer, block) + layout_.block_size * layout_.n_kv_heads;
  }

 private:
  KvCache(const KvLayout& layout, int32_t num_ids, int32_t num_blocks, uint8_t* base,
          size_t bytes, std::unique_ptr<KvDeviceMemory> device_memory);

  KvLayout layout_;
  int32_t num_ids_;
  int64_t layer_block_bytes_;  // layout_.bytes_per_layer_block()
  int64_t block_elems_;        // K (or V) elements of one block: block_size * kv_dim
  BlockAllocator allocator_;
  uint8_t* base_;
  size_t bytes_;
  std::unique_ptr<KvDeviceMemory> device_memory_;  // null for host pools
};

// Wire and flag spellings of KvLayout::dtype.
inline constexpr char kKvDtypeF16[] = "f16";
inline constexpr char kKvDtypeInt8[] = "int8";

// OK for "f16" and "int8"; InvalidArgument naming the choices otherwise.
absl::Status ValidateKvDtype(const std::string& dtype);

// Blocks needed to hold `tokens` tokens.
inline int32_t BlocksForTokens(int64_t tokens, int32_t block_size) {
  return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace pdserve

#endif  // PDSERVE_COMMON_ENGINE_KV_CACHE_H_
