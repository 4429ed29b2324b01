#!/usr/bin/env bash
# Time to first token of one long prompt through the servers, pdserve
# (`pdserve up`: router, one prefill and one decode worker, OpenAI API)
# against llama.cpp's C++ llama-server 0.3.36 (tools/bench/build-llama-server.sh),
# same GGUF and threads, one after the other: `pdserve bench --target openai`
# sends REQUESTS prompts of PROMPT tokens, one at a time, 1 token out, and
# reports the mean TTFT. Prints a markdown row per model.
#
#   tools/bench/bench-ttft.sh [prompt=2048] [threads=2] [requests=3]
#
# MODELS (default Qwen2.5-Coder and Gemma 3) picks the files. Where
# llama-server's AMX path crashes, it reruns with AMX refused
# (tests/data/no_amx_preload.c), as tools/bench/bench-engine.sh does.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROMPT="${1:-2048}"
THREADS="${2:-2}"
REQUESTS="${3:-3}"
MODELS="${MODELS:-models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf models/gemma-3-270m.Q4_K_M.gguf}"
LLAMA_SERVER="$(tools/bench/build-llama-server.sh | tail -n 1)"
OUT="$(mktemp -d)"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$OUT"' EXIT
cc -O2 -shared -fPIC tests/data/no_amx_preload.c -o "$OUT/no_amx.so" -ldl
PORT=18420

wait_ready() {  # url pid
  for _ in $(seq 600); do
    kill -0 "$2" 2>/dev/null || return 1
    curl -sf "$1" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

ttft() {  # model -> mean TTFT in ms of the server on $PORT
  build/bin/pdserve bench --model "$1" --target openai --address "127.0.0.1:$PORT" \
    --input_len "$PROMPT" --output_len 1 --num_requests "$REQUESTS" --max_concurrency 1 \
    --json_out "$OUT/ttft.json" >/dev/null 2>&1
  python3 -c 'import json,sys; print("%.0f" % json.load(open(sys.argv[1]))["summary"]["ttft_ms"]["mean"])' \
    "$OUT/ttft.json"
}

start_llama() {  # model [preload]
  LD_PRELOAD="${2:-}" "$LLAMA_SERVER" -m "$1" -t "$THREADS" -tb "$THREADS" -c $(( PROMPT + 512 )) \
    -np 1 --host 127.0.0.1 --port "$PORT" >"$OUT/llama.log" 2>&1 &
  PIDS+=($!)
  wait_ready "http://127.0.0.1:$PORT/health" "$!"
}

echo "| model | prompt tokens | pdserve up TTFT ms | llama-server TTFT ms | pdserve / llama-server |"
echo "|---|---|---|---|---|"
for model in $MODELS; do
  build/bin/pdserve up --model "$model" --threads "$THREADS" --router_port 0 \
    --http_listen "127.0.0.1:$PORT" --kv_blocks $(( PROMPT / 16 + 64 )) \
    --log_dir "$OUT/pdserve" >"$OUT/pdserve.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_ready "http://127.0.0.1:$PORT/v1/models" "$pid"
  ours="$(ttft "$model")"
  kill -INT "$pid"; wait "$pid" 2>/dev/null || true
  note=""
  if ! start_llama "$model" || ! peer="$(ttft "$model")"; then
    kill "${PIDS[-1]}" 2>/dev/null || true; wait "${PIDS[-1]}" 2>/dev/null || true
    start_llama "$model" "$OUT/no_amx.so"
    peer="$(ttft "$model")"
    note=" (peer: AMX refused)"
  fi
  kill "${PIDS[-1]}" 2>/dev/null || true; wait "${PIDS[-1]}" 2>/dev/null || true
  echo "| $(basename "$model" .gguf)$note | $PROMPT | $ours | $peer | **$(python3 -c "print('%.2fx' % ($ours / $peer))")** |"
done
