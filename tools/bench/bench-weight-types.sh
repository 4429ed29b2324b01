#!/usr/bin/env bash
# Engine throughput per weight type, pdserve against llama.cpp
# (llama-cpp-python, AMX kernels disabled as in tools/bench/bench-engine.sh) on
# the same random-weight GGUFs (16 layers, width 512, ff 1536, 8 heads,
# 4 KV heads: a shape K-quants fit), one thread, in one run. Prints a
# markdown table for docs/PERFORMANCE.md.
#
#   tools/bench/bench-weight-types.sh [types=Q4_0,Q4_1,Q5_0,Q5_1,Q8_0,Q4_K,Q5_K,Q6_K] [repeats=2]
#
# PYTHON picks the interpreter that has llama_cpp (default python3; it is
# pip-installed there when missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
TYPES="${1:-Q4_0,Q4_1,Q5_0,Q5_1,Q8_0,Q4_K,Q5_K,Q6_K}"
REPEATS="${2:-2}"
PYTHON="${PYTHON:-python3}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$PYTHON" -c "import llama_cpp" 2>/dev/null || "$PYTHON" -m pip install --quiet llama-cpp-python==0.3.7
cc -O2 -shared -fPIC tests/data/no_amx_preload.c -o "$OUT/no_amx.so" -ldl

echo "| weights | pdserve pp128 t/s | llama.cpp pp128 t/s | pdserve tg64 t/s | llama.cpp tg64 t/s |"
echo "|---|---|---|---|---|"
for t in ${TYPES//,/ }; do
  model="$OUT/$t.gguf"
  build/bin/pdserve random-model --out="$model" --matrix_type="$t" --dims=16,512,1536,8,4 \
    2>/dev/null
  build/bin/pdserve bench-engine --model "$model" --bench_threads 1 --bench_batches 1 \
    --bench_pp 128 --bench_tg 64 --bench_repeats "$REPEATS" --bench_json "$OUT/ours.json" \
    >/dev/null 2>&1
  LD_PRELOAD="$OUT/no_amx.so" "$PYTHON" tools/bench/bench_llama_cpp.py --model "$model" --threads 1 \
    --batches 1 --pp 128 --tg 64 --repeats "$REPEATS" --json "$OUT/ref.json" >/dev/null 2>&1
  "$PYTHON" - "$OUT" "$t" <<'PY'
import json, os, sys
out, t = sys.argv[1], sys.argv[2]
def load(name):
    return {r["test"]: r["tokens_per_s"] for r in json.load(open(os.path.join(out, name)))["results"]}
ours, ref = load("ours.json"), load("ref.json")
print("| %s | %.1f | %.1f | %.1f | %.1f |" % (t, ours["pp128"], ref["pp128"], ours["tg64"], ref["tg64"]))
PY
  rm -f "$model"
done
