#include "common/llama_numerics.h"

#include "common/quant/kernels.h"

namespace pdserve {
namespace {

bool CpuSupportsAvx512Dq() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

}  // namespace

bool LlamaExactNumericsActive() {
  static const bool supported = CpuSupportsAvx512Dq();
  return supported && ActiveKernelIsa() != KernelIsa::kScalar;
}

void LlamaSiluMulRows(float* gate, const float* up, int64_t rows, int64_t n) {
  llama_numerics_avx512::SiluMulRows(gate, up, rows, n);
}

int64_t LlamaAttendScratchFloats(int head_dim, int n_ctx) {
  return (static_cast<int64_t>(n_ctx) + 15) / 16 * 16 + 64 * static_cast<int64_t>(head_dim);
}

void LlamaAttendHead(const uint16_t* q_f16, int head_dim, float scale, int n_ctx,
                     const KvHeadRows& kv, float* scratch, float* out) {
  llama_numerics_avx512::AttendHead(q_f16, head_dim, scale, n_ctx, kv, scratch, out);
}

}  // namespace pdserve
