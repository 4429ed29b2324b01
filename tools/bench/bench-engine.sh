#!/usr/bin/env bash
# Engine throughput, pdserve against llama.cpp 0.3.36's own C++ benchmarks
# (`llama-bench` for prompts and single-stream decode, `llama-batched-bench`
# for batched decode), built natively from the pinned sdist by
# tools/bench/build-llama-cpp.sh, on the same GGUF files and thread count, each
# model's pair run back to back. Prints the markdown table of
# docs/PERFORMANCE.md.
#
#   tools/bench/bench-engine.sh [threads=2] [repeats=3] [pp=512] [tg=128] [batch=8]
#
# MODELS (default: the three real models) picks the files. Where the CPU
# has AMX and llama.cpp's AMX path crashes (a SIGSEGV on the VMs measured),
# the peer reruns with AMX refused (tests/data/no_amx_preload.c), i.e. on
# its AVX-512 kernels, and the table says so.
set -euo pipefail
cd "$(dirname "$0")/../.."
THREADS="${1:-2}"
REPEATS="${2:-3}"
PP="${3:-512}"
TG="${4:-128}"
BATCH="${5:-8}"
MODELS="${MODELS:-models/SmolLM2-135M-Instruct.Q4_1.gguf models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf models/gemma-3-270m.Q4_K_M.gguf}"
mapfile -t BINS < <(tools/bench/build-llama-cpp.sh llama-bench llama-batched-bench)
LLAMA_BENCH="${BINS[0]}"
BATCHED_BENCH="${BINS[1]}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
cc -O2 -shared -fPIC tests/data/no_amx_preload.c -o "$OUT/no_amx.so" -ldl
BATCH_TOKENS=64
KV_BLOCKS=$(( (BATCH * (16 + TG + BATCH_TOKENS) + PP) / 16 + 64 ))

# Runs a peer command; if it dies on a signal and the CPU has AMX, again
# with AMX refused. Prints "amx-off" on fd 3 in that case.
peer() {
  if "$@" >"$OUT/peer.out" 2>"$OUT/peer.err"; then return 0; fi
  if grep -q " amx_int8" /proc/cpuinfo; then
    echo amx-off >&3
    LD_PRELOAD="$OUT/no_amx.so" "$@" >"$OUT/peer.out" 2>"$OUT/peer.err"
    return
  fi
  cat "$OUT/peer.err" >&2
  return 1
}

echo "| model | pp$PP pdserve | pp$PP llama-bench | ratio | tg$TG pdserve | tg$TG llama-bench | ratio | decode_b$BATCH pdserve | llama-batched-bench | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for model in $MODELS; do
  build/bin/pdserve bench-engine --model "$model" --bench_threads "$THREADS" \
    --bench_repeats "$REPEATS" --bench_pp "$PP" --bench_tg "$TG" --bench_batches "$BATCH" \
    --bench_batch_tokens "$BATCH_TOKENS" --kv_blocks "$KV_BLOCKS" \
    --bench_json "$OUT/pdserve.json" >/dev/null 2>&1
  : >"$OUT/notes"
  peer "$LLAMA_BENCH" -m "$model" -t "$THREADS" -r "$REPEATS" -p "$PP" -n "$TG" -o json \
    3>>"$OUT/notes"
  cp "$OUT/peer.out" "$OUT/llama_bench.json"
  peer "$BATCHED_BENCH" -m "$model" -t "$THREADS" -c $(( BATCH * (16 + BATCH_TOKENS) + 64 )) \
    -b 2048 -ub 512 -npp 16 -ntg "$BATCH_TOKENS" -npl "$BATCH" 3>>"$OUT/notes"
  cp "$OUT/peer.out" "$OUT/batched.txt"
  python3 - "$OUT" "$model" "$PP" "$TG" "$BATCH" <<'PY'
import json, os, re, sys
out, model, pp, tg, batch = sys.argv[1], os.path.basename(sys.argv[2]), *map(int, sys.argv[3:])
ours = {r["test"]: r["tokens_per_s"] for r in json.load(open(os.path.join(out, "pdserve.json")))["results"]}
peer = {}
for r in json.load(open(os.path.join(out, "llama_bench.json"))):
    key = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    peer[key] = r["avg_ts"]
# llama-batched-bench's table row: |  PP |  TG |  B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ...
for line in open(os.path.join(out, "batched.txt")):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) >= 8 and cells[2] == str(batch):
        peer[f"decode_b{batch}"] = float(cells[7])
note = " (peer: AMX refused)" if "amx-off" in open(os.path.join(out, "notes")).read() else ""
row = [model + note]
for key in (f"pp{pp}", f"tg{tg}", f"decode_b{batch}"):
    a, b = ours.get(key, float("nan")), peer.get(key, float("nan"))
    row += [f"{a:.1f}", f"{b:.1f}", f"**{a / b:.2f}x**"]
print("| " + " | ".join(row) + " |")
PY
done
echo
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; $THREADS threads, best of $REPEATS (llama-bench: mean)"
