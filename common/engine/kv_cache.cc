#include "common/engine/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace pdserve {

absl::Status ValidateKvDtype(const std::string& dtype) {
  if (dtype == kKvDtypeF16 || dtype == kKvDtypeInt8) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("kv dtype \"", dtype, "\" is not one of f16, int8"));
}

KvLayout KvLayout::ForModel(const ModelConfig& c, int32_t block_size, const std::string& dtype) {
  KvLayout l;
  l.dtype = dtype;
  l.n_layers = c.n_layers;
  l.n_kv_heads = c.n_kv_heads;
  l.head_dim = c.head_dim;
  l.block_size = block_size;
  l.layer_window.assign(c.layer_window.begin(), c.layer_window.end());
  return l;
}

int32_t KvLayout::FirstSentBlock(int layer, int32_t n_blocks) const {
  const int32_t w = layer_window.empty() ? 0 : layer_window[layer];
  if (w <= 0) return 0;
  // The prompt ends in block n_blocks - 1; its last position L - 1 is at
  // least (n_blocks - 1) * block_size. Decoding position p >= L reads from
  // p - w + 1 rounded down to kWindowReadAlign, so from at least
  // (n_blocks - 1) * block_size - (w - 1) - (kWindowReadAlign - 1).
  const int32_t span = w - 1 + kWindowReadAlign - 1;
  return std::max(0, n_blocks - 1 - (span + block_size - 1) / block_size);
}

KvLayout KvLayout::SmolLm2(int32_t block_size) {
  KvLayout l;
  l.n_layers = 30;
  l.n_kv_heads = 3;
  l.head_dim = 64;
  l.block_size = block_size;
  return l;
}

std::string KvLayout::DebugString() const {
  return absl::StrCat("{layers=", n_layers, " kv_heads=", n_kv_heads, " head_dim=", head_dim,
                      " block_size=", block_size, " dtype=", dtype,
                      layer_window.empty() ? "" : " windows=", absl::StrJoin(layer_window, ","),
                      "}");
}

absl::StatusOr<std::string> KvDeviceMemory::ExportHandle() const {
  return absl::FailedPreconditionError("kv cache: this device memory cannot be shared");
}

absl::StatusOr<std::unique_ptr<KvPeerPool>> KvDeviceMemory::OpenPeer(const std::string&,
                                                                    size_t) const {
  return absl::FailedPreconditionError("kv cache: this device memory cannot map a peer's pool");
}

absl::Status KvDeviceMemory::CopyBlocks(absl::Span<const uint8_t* const>,
                                        absl::Span<uint8_t* const>, size_t) const {
  return absl::FailedPreconditionError("kv cache: this device memory cannot copy from peers");
}

absl::StatusOr<std::string> KvDeviceMemory::NewPeerChannelId() const {
  return absl::FailedPreconditionError("kv cache: this device memory has no peer channels (NCCL)");
}

absl::StatusOr<std::unique_ptr<KvPeerChannel>> KvDeviceMemory::JoinPeerChannel(
    const std::string&, int, absl::Time, const std::atomic<bool>*) const {
  return absl::FailedPreconditionError("kv cache: this device memory has no peer channels (NCCL)");
}

namespace {

absl::Status ValidatePool(const KvLayout& layout, int32_t num_blocks) {
  if (num_blocks <= 0 || layout.block_size <= 0 || layout.n_layers <= 0 || layout.kv_dim() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv cache: bad size ", num_blocks,
                                                   " blocks of ", layout.DebugString()));
  }
  if (absl::Status st = ValidateKvDtype(layout.dtype); !st.ok()) return st;
  // The f32 scales follow 2 * block_size * kv_dim int8 bytes; keep them aligned.
  if (layout.is_int8() && (layout.block_size * layout.kv_dim()) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv cache: int8 needs an even block_size * kv_dim, got ", layout.DebugString()));
  }
  return absl::OkStatus();
}

}  // namespace

size_t KvCache::PoolBytes(const KvLayout& layout, int32_t num_blocks) {
  return static_cast<size_t>(num_blocks) * layout.n_layers *
         static_cast<size_t>(layout.bytes_per_layer_block());
}

namespace {

// Pages of a (layer, block) span of `span` bytes that madvise can always
// give back, wherever the span starts.
int64_t ReleasablePages(int64_t span, int64_t page) {
  return span % page == 0 ? span / page : std::max<int64_t>(0, (span - (page - 1)) / page);
}

// madvise(DONTNEED) on the whole pages inside [begin, begin + bytes): a
// page shared with a neighbouring span may hold KV in use. Returns the
// bytes given back.
int64_t ReleasePagesInside(uintptr_t begin, uintptr_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t end = (begin + bytes) / page * page;
  if (end <= first || madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED) != 0) {
    return 0;
  }
  return static_cast<int64_t>(end - first);
}

}  // namespace

int32_t KvCache::HostIds(const KvLayout& layout, int32_t num_blocks) {
  const int64_t page = sysconf(_SC_PAGESIZE);
  const int64_t span = layout.bytes_per_layer_block();
  int64_t releasable = 0;
  for (int32_t w : layout.layer_window) {
    if (w > 0) releasable += ReleasablePages(span, page) * page;
  }
  const int64_t block = span * layout.n_layers;
  if (releasable <= 0) return num_blocks;
  // A block whose windows all went back holds block - releasable bytes.
  const int64_t ids = releasable >= block ? int64_t{num_blocks} * kMaxIdsPerBlock
                                          : int64_t{num_blocks} * block / (block - releasable);
  return static_cast<int32_t>(std::min<int64_t>(
      {ids, int64_t{num_blocks} * kMaxIdsPerBlock, std::numeric_limits<int32_t>::max()}));
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvLayout& layout,
                                                         int32_t num_blocks) {
  if (absl::Status st = ValidatePool(layout, num_blocks); !st.ok()) return st;
  int32_t ids = HostIds(layout, num_blocks);
  size_t bytes = PoolBytes(layout, ids);
  // Ids beyond the budget are address space only: the allocator keeps the
  // memory touched within num_blocks blocks' worth, so reserve no swap.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED && ids > num_blocks) {
    // Strict overcommit accounting (vm.overcommit_memory=2) ignores
    // MAP_NORESERVE: then no more ids than the budget.
    LOG(WARNING) << "kv cache: cannot map " << ids << " block ids (" << bytes
                 << " bytes); using " << num_blocks << ", so freed window memory admits nothing";
    ids = num_blocks;
    bytes = PoolBytes(layout, ids);
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
             -1, 0);
  }
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("kv cache: cannot map ", bytes, " bytes"));
  }
  return std::unique_ptr<KvCache>(
      new KvCache(layout, ids, num_blocks, static_cast<uint8_t*>(p), bytes, nullptr));
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(
    const KvLayout& layout, int32_t num_blocks, std::unique_ptr<KvDeviceMemory> memory) {
  if (absl::Status st = ValidatePool(layout, num_blocks); !st.ok()) return st;
  const size_t bytes = PoolBytes(layout, num_blocks);
  if (memory == nullptr || memory->data() == nullptr || memory->size() < bytes) {
    return absl::InvalidArgumentError(absl::StrCat("kv cache: device memory of ",
                                                   memory ? memory->size() : 0,
                                                   " bytes, need ", bytes));
  }
  uint8_t* base = memory->data();
  return std::unique_ptr<KvCache>(
      new KvCache(layout, num_blocks, num_blocks, base, bytes, std::move(memory)));
}

KvCache::KvCache(const KvLayout& layout, int32_t num_ids, int32_t num_blocks, uint8_t* base,
                 size_t bytes, std::unique_ptr<KvDeviceMemory> device_memory)
    : layout_(layout),
      num_ids_(num_ids),
      layer_block_bytes_(layout.bytes_per_layer_block()),
      block_elems_(int64_t{layout.block_size} * layout.kv_dim()),
      allocator_(num_ids, num_blocks, layout.bytes_per_layer_block() * layout.n_layers),
      base_(base),
      bytes_(bytes),
      device_memory_(std::move(device_memory)) {
  if (device_memory_ == nullptr && num_ids > num_blocks) {
    allocator_.set_release([this](absl::Span<const int32_t> blocks) { ReleaseBlocks(blocks); });
  }
}

int64_t KvCache::ReleaseWindowLayers(int32_t block) {
  if (on_device()) return 0;
  int64_t released = 0;
  for (int l = 0; l < layout_.n_layers && !layout_.layer_window.empty(); ++l) {
    if (layout_.layer_window[l] <= 0) continue;
    released += ReleasePagesInside(reinterpret_cast<uintptr_t>(LayerBlock(l, block)),
                                   static_cast<uintptr_t>(layer_block_bytes_));
  }
  return released;
}

void KvCache::ReleaseBlocks(absl::Span<const int32_t> blocks) {
  if (on_device() || blocks.empty()) return;
  std::vector<int32_t> ids(blocks.begin(), blocks.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (size_t i = 0; i < ids.size();) {
    size_t j = i + 1;
    while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    for (int l = 0; l < layout_.n_layers; ++l) {
      ReleasePagesInside(reinterpret_cast<uintptr_t>(LayerBlock(l, ids[i])),
                         (j - i) * static_cast<uintptr_t>(layer_block_bytes_));
    }
    i = j;
  }
}

KvCache::~KvCache() {
  if (device_memory_ == nullptr) munmap(base_, bytes_);
}

}  // namespace pdserve
