// The one place that picks kernel implementations for this CPU.
#include <array>
#include <atomic>

#include "common/quant/kernels.h"
#include "common/quant/packed_gemm.h"

namespace pdserve {
namespace {

constexpr uint32_t kMaxTypeId = 32;

struct Tables {
  std::array<TypeKernels, kMaxTypeId> avx2{};
  std::array<TypeKernels, kMaxTypeId> vnni{};
  std::array<bool, kMaxTypeId> present{};
};

void AddPackedGemm(PackedGemmFn fn, uint32_t type, TypeKernels* k) {
  if (fn == nullptr) return;
  k->packed_gemm = fn;
  k->packed_slice_bias = PackedSliceBias(type);
}

const Tables& GetTables() {
  static const Tables* tables = [] {
    auto* t = new Tables;
    for (uint32_t id = 0; id < kMaxTypeId; ++id) {
      const TypeKernels* s = kernels_scalar::Find(id);
      if (s == nullptr) continue;
      t->present[id] = true;
      // Upgrade() is compiled for its ISA (the compiler may use that ISA's
      // registers for the copy itself), so a table is built only where the
      // CPU runs it: an AVX2-only CPU would fault on the AVX-512 one.
      if (CpuSupportsAvx2()) {
        t->avx2[id] = kernels_avx2::Upgrade(*s);
        AddPackedGemm(FindPackedGemm(*PackedVariantOf(KernelIsa::kAvx2), id), id, &t->avx2[id]);
      }
      if (CpuSupportsAvx512Vnni()) {
        t->vnni[id] = kernels_avx512vnni::Upgrade(*s);
        AddPackedGemm(FindPackedGemm(*PackedVariantOf(KernelIsa::kAvx512Vnni), id), id,
                      &t->vnni[id]);
      }
    }
    return t;
  }();
  return *tables;
}

KernelIsa BestIsa() {
  if (CpuSupportsAvx512Vnni()) return KernelIsa::kAvx512Vnni;
  if (CpuSupportsAvx2()) return KernelIsa::kAvx2;
  return KernelIsa::kScalar;
}

std::atomic<KernelIsa>& IsaSlot() {
  static std::atomic<KernelIsa> isa{BestIsa()};
  return isa;
}

}  // namespace

std::optional<PackedVariant> PackedVariantOf(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kAvx512Vnni:
      return PackedVariant::kAvx512;
    case KernelIsa::kAvx2:
      // AVX2 with AVX-VNNI's one-instruction slices where the CPU has them.
      return CpuSupportsPackedVariant(PackedVariant::kAvxVnni) ? PackedVariant::kAvxVnni
                                                               : PackedVariant::kAvx2;
    case KernelIsa::kScalar:
      break;
  }
  return std::nullopt;
}

bool CpuSupportsAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

bool CpuSupportsAvx512Vnni() {
  __builtin_cpu_init();
  return CpuSupportsAvx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

const char* KernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar:
      return "scalar";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512Vnni:
      return "avx512";
  }
  return "unknown";
}

KernelIsa ActiveKernelIsa() { return IsaSlot().load(std::memory_order_relaxed); }

void ForceKernelIsaForTesting(KernelIsa isa) {
  if (isa == KernelIsa::kAvx512Vnni && !CpuSupportsAvx512Vnni()) isa = KernelIsa::kAvx2;
  if (isa == KernelIsa::kAvx2 && !CpuSupportsAvx2()) isa = KernelIsa::kScalar;
  IsaSlot().store(isa, std::memory_order_relaxed);
}

const TypeKernels* FindTypeKernels(uint32_t weight_type) {
  if (weight_type >= kMaxTypeId || !GetTables().present[weight_type]) return nullptr;
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx512Vnni:
      return &GetTables().vnni[weight_type];
    case KernelIsa::kAvx2:
      return &GetTables().avx2[weight_type];
    case KernelIsa::kScalar:
      break;
  }
  return kernels_scalar::Find(weight_type);
}

const AttentionKernels& GetAttentionKernels() {
  switch (ActiveKernelIsa()) {
    case KernelIsa::kAvx512Vnni:
      return kernels_avx512vnni::kAttention;
    case KernelIsa::kAvx2:
      return kernels_avx2::kAttention;
    case KernelIsa::kScalar:
      break;
  }
  return kernels_scalar::kAttention;
}

int64_t ActivationRowBytes(uint32_t weight_type, int64_t n) {
  const TypeKernels* k = kernels_scalar::Find(weight_type);
  if (k == nullptr) return -1;
  return GgmlRowBytes(static_cast<uint32_t>(k->act_type), n);
}

}  // namespace pdserve
