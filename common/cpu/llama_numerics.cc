#include "common/cpu/llama_numerics.h"

#include "common/quant/kernels.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

bool CpuSupportsAvx512Dq() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

}  // namespace

// Follows the kernel ISA, so a test that forces AVX2 on an AVX512 machine
// runs the AVX2 copy, and one that forces scalar runs neither.
LlamaNumericsIsa ActiveLlamaNumericsIsa() {
  static const bool avx512 = CpuSupportsAvx512Dq();
  static const bool avx2 = CpuSupportsAvx2();  // with FMA and F16C
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx512Vnni:
      if (avx512) return LlamaNumericsIsa::kAvx512;
      [[fallthrough]];
    case KernelIsa::kAvx2:
      if (avx2) return LlamaNumericsIsa::kAvx2;
      [[fallthrough]];
    case KernelIsa::kScalar:
      break;
  }
  return LlamaNumericsIsa::kNone;
}

bool LlamaExactNumericsActive() { return ActiveLlamaNumericsIsa() != LlamaNumericsIsa::kNone; }

// Callers check LlamaExactNumericsActive() first; reaching a copy the CPU
// cannot run would be SIGILL, so that is a crash with a message instead.
void LlamaSiluMulRows(float* gate, const float* up, int64_t rows, int64_t n) {
  switch (ActiveLlamaNumericsIsa()) {
    case LlamaNumericsIsa::kAvx512:
      return llama_numerics_avx512::SiluMulRows(gate, up, rows, n);
    case LlamaNumericsIsa::kAvx2:
      return llama_numerics_avx2::SiluMulRows(gate, up, rows, n);
    case LlamaNumericsIsa::kNone:
      break;
  }
  LOG(FATAL) << "LlamaSiluMulRows needs LlamaExactNumericsActive()";
}

LlamaAttendScratchSize LlamaAttendScratchNeeded(int head_dim, int rows, int n_max) {
  // Must match the carving in llama_numerics_simd.inc's AttendRows.
  const int64_t n16 = (static_cast<int64_t>(n_max) + 15) / 16 * 16;
  const int64_t dh = head_dim;
  // q and probabilities per row; per row of a V group, 64 accumulator
  // slots and 16 lane folds of head_dim floats each.
  return {.floats = rows * (dh + n16) + kLlamaMaxRowGroup * (64 + 16) * dh, .offsets = n_max};
}

void LlamaAttendRows(const uint16_t* q_f16, int rows, const int* n_ctx, const int* lo,
                     int head_dim, float scale, const KvHeadRows& kv, float* scratch,
                     int64_t* offsets, float* const* out) {
  switch (ActiveLlamaNumericsIsa()) {
    case LlamaNumericsIsa::kAvx512:
      return llama_numerics_avx512::AttendRows(q_f16, rows, n_ctx, lo, head_dim, scale, kv,
                                               scratch, offsets, out);
    case LlamaNumericsIsa::kAvx2:
      return llama_numerics_avx2::AttendRows(q_f16, rows, n_ctx, lo, head_dim, scale, kv,
                                             scratch, offsets, out);
    case LlamaNumericsIsa::kNone:
      break;
  }
  LOG(FATAL) << "LlamaAttendRows needs LlamaExactNumericsActive()";
}

}  // namespace pdserve
