// The probe loops of peak_probe.cc, in their own translation unit compiled
// with AVX-512 VNNI, AVX-VNNI and AVX2 flags: call each only on a CPU that
// has its instructions. Each returns the operations it did (MACs or FMAs).
#ifndef PDSERVE_TOOLS_BENCH_PEAK_PROBE_LOOPS_H_
#define PDSERVE_TOOLS_BENCH_PEAK_PROBE_LOOPS_H_

#include <cstdint>

namespace pdserve::peak_loops {

int64_t DpbusdZmm();   // AVX512-VNNI vpdpbusd zmm
int64_t DpbusdYmm();   // AVX-VNNI vpdpbusd ymm
int64_t MaddubsYmm();  // AVX2 vpmaddubsw + vpmaddwd + vpaddd
// AVX2 int8 MACs in llama.cpp's one-token order: each 4-element slice of
// 8 rows gets its own int32 (maddubs + madd), convert and FMA. The most an
// exact maddubs kernel that keeps that per-slice order (Q4_0/Q4_1, Q5_0,
// Q8_0, Q6_K) can reach, loads and spills aside; Q4_K's order sums in int16
// first and is not held to it.
int64_t LlamaOrderYmm();
// The same order in the AVX-512 VNNI and AVX-VNNI kernels' form: each slice
// of 16 (8) rows one vpdpbusd started from a broadcast word, then its own
// convert and FMA.
int64_t LlamaOrderZmm();
int64_t LlamaOrderVnniYmm();
int64_t FmaZmm();      // AVX512F vfmadd231ps zmm
int64_t FmaYmm();      // FMA vfmadd231ps ymm

}  // namespace pdserve::peak_loops

#endif  // PDSERVE_TOOLS_BENCH_PEAK_PROBE_LOOPS_H_
