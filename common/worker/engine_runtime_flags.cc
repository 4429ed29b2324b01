#include "common/worker/engine_runtime_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(int32_t, threads, 2, "Engine threads");
ABSL_FLAG(bool, cuda_graphs, false,
          "With --device=cuda: replay decode-only steps (up to 64 sequences) from CUDA graphs");
ABSL_FLAG(std::string, device, "cpu",
          "Where the model runs and the KV cache lives: cpu, cuda or cuda:N");
ABSL_FLAG(int32_t, kv_blocks, 1024, "KV cache blocks");
ABSL_FLAG(double, kv_memory_fraction, 0,
          "With --device=cuda: the KV pool takes this share (0-1) of the device memory free "
          "once the weights are loaded, in place of --kv_blocks (0 = use --kv_blocks)");
ABSL_FLAG(int32_t, block_size, 16, "Tokens per KV block");
ABSL_FLAG(std::string, kv_dtype, "f16",
          "KV cache element type: f16 or int8 (per-token, per-head scales); must match the other "
          "tier");

namespace pdserve {

EngineRuntimeFlags EngineRuntimeFlagsFromFlags() {
  EngineRuntimeFlags f;
  f.threads = absl::GetFlag(FLAGS_threads);
  f.device = absl::GetFlag(FLAGS_device);
  f.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  f.kv_blocks = absl::GetFlag(FLAGS_kv_blocks);
  f.kv_memory_fraction = absl::GetFlag(FLAGS_kv_memory_fraction);
  f.block_size = absl::GetFlag(FLAGS_block_size);
  f.kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  return f;
}

}  // namespace pdserve
