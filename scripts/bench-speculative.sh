#!/usr/bin/env bash
# Speculative decoding, pdserve against llama.cpp (llama-cpp-python's
# prompt-lookup decoding) on copy-heavy prompts and one with nothing to
# copy, same model, threads and prompts, in one run; then eight streams of
# each prompt at once through `pdserve up`, speculation off and on. Prints
# markdown tables for docs/PERFORMANCE.md.
#
#   scripts/bench-speculative.sh [max_tokens=400] [threads=2]
#
# MODEL (default models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf; fetched by
# scripts/fetch-model.sh) picks the GGUF; LLAMA_PYTHON (default python3) the
# Python whose llama-cpp-python (0.3.36 in our runs) runs the peer.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_TOKENS="${1:-400}"
THREADS="${2:-2}"
MODEL="${MODEL:-$(scripts/fetch-model.sh qwen2.5-coder | tail -n 1)}"
PY="${LLAMA_PYTHON:-python3}"
"$PY" -c "import llama_cpp" 2>/dev/null || "$PY" -m pip install --quiet llama-cpp-python==0.3.36
# llama.cpp's AMX kernels are wrong or crash on AMX CPUs (tests/data/README.md).
OUT="$(mktemp -d)"
cc -O2 -shared -fPIC tests/data/no_amx_preload.c -o "$OUT/no_amx.so" -ldl
LD_PRELOAD="$OUT/no_amx.so" "$PY" tools/bench_speculative.py --model "$MODEL" \
  --max_tokens "$MAX_TOKENS" --threads "$THREADS"
