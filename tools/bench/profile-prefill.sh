#!/usr/bin/env bash
# Where a prompt's time goes: perf samples (the software cpu-clock event, so
# it also works in VMs without hardware counters) of `pdserve bench-engine`
# prefilling a PP-token prompt REPEATS times, grouped by
# tools/bench/profile_categories.py into matmul per weight type, attention,
# activation quantisation, norms/RoPE/activations, KV stores, threading and
# the rest. Model loading (packing, page faults) is shown but left out of
# the shares. Needs perf (Debian: linux-perf).
#
#   MODEL=models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf tools/bench/profile-prefill.sh [pp=512] [threads=2] [repeats=5]
#   PDSERVE=/path/to/other/pdserve ...    # the same for another build
set -euo pipefail
cd "$(dirname "$0")/../.."
PP="${1:-512}"
THREADS="${2:-2}"
REPEATS="${3:-5}"
MODEL="${MODEL:-models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf}"
PDSERVE="${PDSERVE:-build/bin/pdserve}"   # another build to compare
command -v perf >/dev/null || { echo "profile-prefill: perf not found (apt-get install linux-perf)" >&2; exit 1; }
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
KV_BLOCKS=$(( PP / 16 + 64 ))
perf record -q -e cpu-clock -F 2999 -o "$OUT/perf.data" -- \
  "$PDSERVE" bench-engine --model "$MODEL" --bench_threads "$THREADS" \
  --bench_repeats "$REPEATS" --bench_pp "$PP" --bench_tg 1 --bench_batches 1 \
  --bench_batch_tokens 1 --bench_context 1 --kv_blocks "$KV_BLOCKS" 2>/dev/null | grep pp
perf report -q -i "$OUT/perf.data" --no-children --sort symbol --stdio 2>/dev/null \
  | python3 tools/bench/profile_categories.py
