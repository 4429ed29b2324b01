#!/usr/bin/env bash
# Speculative decoding, pdserve against llama.cpp's llama-server (plain,
# ngram-simple and ngram-map-k), on the chat workloads of `pdserve bench
# --workload` (code edit, summary, multi-turn chat, nothing to copy): one
# stream at a time and eight at once, same model, threads and requests, in
# one run. Prints markdown tables for docs/PERFORMANCE.md.
#
#   tools/bench/bench-speculative.sh [max_tokens=600] [threads=2] [batch=8]
#
# MODEL (default models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf; fetched by
# scripts/fetch-model.sh) picks the GGUF, WORKLOADS (comma-separated row
# names, default all) the rows, SYSTEMS (comma-separated, of pdserve-off,
# pdserve-on, llama-server-none, llama-server-ngram-simple,
# llama-server-ngram-map-k; default all) the columns; llama-server is built once by
# tools/bench/build-llama-server.sh (~10 min). Build pdserve first (make build).
set -euo pipefail
cd "$(dirname "$0")/../.."
MAX_TOKENS="${1:-600}"
THREADS="${2:-2}"
BATCH="${3:-8}"
MODEL="${MODEL:-$(scripts/fetch-model.sh qwen2.5-coder | tail -n 1)}"
LLAMA_SERVER="$(tools/bench/build-llama-server.sh | tail -n 1)"
# llama.cpp's AMX kernels are wrong or crash on AMX CPUs (tests/data/README.md).
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
cc -O2 -shared -fPIC tests/data/no_amx_preload.c -o "$OUT/no_amx.so" -ldl
LD_PRELOAD="$OUT/no_amx.so" python3 tools/bench/bench_speculative.py --model "$MODEL" \
  --llama_server "$LLAMA_SERVER" --max_tokens "$MAX_TOKENS" --threads "$THREADS" --batch "$BATCH" \
  ${WORKLOADS:+--workloads "$WORKLOADS"} ${SYSTEMS:+--systems "$SYSTEMS"}
