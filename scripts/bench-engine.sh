#!/usr/bin/env bash
# Engine throughput, pdserve against llama.cpp (llama-cpp-python) on the same
# GGUF, the same thread counts and the same synthetic prompts, in one run.
# Prints a markdown table for docs/PERFORMANCE.md.
#
#   scripts/bench-engine.sh [threads=1,2] [repeats=3] [context=16] [pp=512] [batches=1,4,8,16]
#
# MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf) picks the GGUF;
# LLAMA_PYTHON (default python3) the Python whose llama-cpp-python runs the
# peer. Without llama_cpp there, 0.3.7 is installed into it, which runs
# SmolLM2 and Qwen2 but predates gemma3: Gemma 3 needs 0.3.36
# (tests/data/README.md has the set-up).
#
# context: the prompt length the decode tests start from; pp: the prompt of
# the prompt-processing test (long values of both measure attention).
#
# llama.cpp runs twice where the CPU has AMX: with its AMX kernels (its
# default here, fast but numerically broken for Q4_1, see tests/data/README.md)
# and with them disabled (its AVX512 path, the one our golden data uses).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS="${1:-1,2}"
REPEATS="${2:-3}"
CONTEXT="${3:-16}"
PP="${4:-512}"
BATCHES="${5:-1,4,8,16}"
# Enough 16-token blocks for the largest batch at its full context.
MAX_BATCH="$(tr ',' '\n' <<<"$BATCHES" | sort -n | tail -1)"
KV_BLOCKS=$(( (MAX_BATCH * (CONTEXT + 130) + PP) / 16 + 64 ))
MODEL="${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}"
PY="${LLAMA_PYTHON:-python3}"
OUT="$(mktemp -d)"
"$PY" -c "import llama_cpp" 2>/dev/null || "$PY" -m pip install --quiet llama-cpp-python==0.3.7

build/bin/pdserve bench-engine --model "$MODEL" --bench_threads "$THREADS" \
  --bench_repeats "$REPEATS" --bench_context "$CONTEXT" --bench_pp "$PP" \
  --bench_batches "$BATCHES" --kv_blocks "$KV_BLOCKS" \
  --bench_json "$OUT/pdserve.json" >/dev/null 2>&1
cc -O2 -shared -fPIC tests/data/no_amx_preload.c -o "$OUT/no_amx.so" -ldl
PEER_ARGS=(--model "$MODEL" --threads "$THREADS" --repeats "$REPEATS" --context "$CONTEXT"
           --pp "$PP" --batches "$BATCHES")
LD_PRELOAD="$OUT/no_amx.so" "$PY" tools/bench_llama_cpp.py "${PEER_ARGS[@]}" \
  --json "$OUT/llama_noamx.json" >/dev/null 2>&1
if grep -q " amx_int8" /proc/cpuinfo; then
  "$PY" tools/bench_llama_cpp.py "${PEER_ARGS[@]}" --json "$OUT/llama_amx.json" >/dev/null 2>&1
fi

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name)
    if not os.path.exists(p): return {}
    return {(r["test"], r["threads"]): r["tokens_per_s"] for r in json.load(open(p))["results"]}
ours, ref, amx = load("pdserve.json"), load("llama_noamx.json"), load("llama_amx.json")
rss = json.load(open(os.path.join(out, "pdserve.json")))["peak_rss_kb"] / 1024
cols = "| test | threads | pdserve t/s | llama.cpp t/s | ratio |" + (" llama.cpp+AMX t/s |" if amx else "")
print(cols)
print("|" + "---|" * (6 if amx else 5))
for key in ours:
    r = ref.get(key, float("nan"))
    line = f"| {key[0]} | {key[1]} | {ours[key]:.1f} | {r:.1f} | {ours[key]/r:.2f}x |"
    if amx: line += f" {amx.get(key, float('nan')):.1f} |"
    print(line)
print(f"\npdserve peak RSS during the run: {rss:.1f} MiB")
PY
