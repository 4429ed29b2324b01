#!/usr/bin/env bash
# Everything worth running on a lent GPU, in one call (docs/PERFORMANCE.md
# "GPU"). Prepare here with scripts/make-device-bundle.sh, then run through
# the device tool with carry=["device_bundle"]:
#   bash tests/gpu/device_check.sh
# Writes summary.txt, failures.txt (the tail of each failed step's log) and
# logs.tgz (every log) to $OUT (default /tmp/pdserve-device-check) and prints
# the summary: three files, as the device tool brings back only a few. Each step has its own time limit; the whole script is
# meant to finish in well under 8 minutes on one H200.
#   1. GPU tests: CUDA runner vs CPU runner on a SmolLM2-shaped random model
#      (logits, 32 greedy steps, ragged batch), device KV staging and TCP
#      between device caches, CUDA IPC between two processes, NCCL self round
#      trip and deadline abort (and two GPUs when there are), a disaggregated
#      Generate on one GPU against colocated and in-process tokens.
#   2. Decode tokens/s at batch 1/8/64 with model-bandwidth utilisation
#      against 4.8 TB/s, and prefill tokens/s (pdserve bench-engine), eager
#      and with decode steps replayed from CUDA graphs.
#   3. KV transfer GB/s for 1/16/64 MB: NCCL and staged TCP against a plain
#      device-to-device copy of the same bytes, in the same run.
#   4. A full disaggregated Generate on one GPU (router + prefill + decode,
#      all --device="$DEVICE"), KV over CUDA IPC (auto) and over staged TCP,
#      compared with colocated and single-process runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/pdserve-device-check}"
BUNDLE="${BUNDLE:-device_bundle}"
# DEVICE=cpu runs the same steps on the CPU: a dry run of the script itself.
DEVICE="${DEVICE:-cuda:0}"
mkdir -p "$OUT"
summary="$OUT/summary.txt"
failures="$OUT/failures.txt"
: >"$summary"
: >"$failures"
LOGS="$(mktemp -d /tmp/pdserve-device-logs.XXXXXX)"
trap 'tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null' EXIT
say() { echo "$*" | tee -a "$summary"; }

# cuBLAS and NCCL come from the image's Python packages (nvidia/*/lib), else
# from a CUDA toolkit's own libraries; each library is looked for on its own.
find_lib() {
  python3 - "$1" <<'PY' 2>/dev/null
import glob, os, site, sys
for base in site.getsitepackages() + [site.getusersitepackages()]:
    for f in glob.glob(os.path.join(base, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(f)); sys.exit(0)
PY
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$1" ] && { echo "$d"; return; }
  done
}
nvlibs=""
missing_libs=""
for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  d="$(find_lib "$lib" | head -1)"
  if [ -z "$d" ]; then
    missing_libs="$missing_libs $lib"
  else
    case ":$nvlibs:" in *":$d:"*) ;; *) nvlibs="${nvlibs:+$nvlibs:}$d" ;; esac
  fi
done
export LD_LIBRARY_PATH="$PWD/$BUNDLE/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$PWD/$BUNDLE/bin"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "libs: ${nvlibs:-none found}${missing_libs:+ (missing:$missing_libs)}"
# A binary that cannot load its libraries fails every step the same way:
# say so once, up front.
unresolved="$(for b in "$bin"/*; do ldd "$b" 2>/dev/null | grep "not found"; done | sort -u | tr -s ' \t' ' ')"
say "ldd: ${unresolved:-all libraries resolve}"
# On the GPU machine a device that does not start must fail the GPU tests
# (they would otherwise skip and read as passed).
[ "$DEVICE" != cpu ] && export PDSERVE_REQUIRE_GPU=1

# The whole script stays inside BUDGET_S (a device call is cut at its own
# timeout, and the summary so far is what comes back): each step's limit is
# capped by what is left, and steps that would get under 20 s are skipped.
BUDGET_S="${BUDGET_S:-470}"

# step NAME LIMIT_S CMD...: runs CMD with a time limit, logs to $LOGS/NAME.log;
# a failure also copies the log's tail to failures.txt.
step() {
  local name="$1" limit="$2"
  shift 2
  local left=$((BUDGET_S - SECONDS))
  if [ "$left" -lt 20 ]; then
    say "step $name: skipped (budget of ${BUDGET_S} s spent)"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  say "step $name: rc=$rc in $((SECONDS - t0)) s"
  if [ $rc -ne 0 ]; then
    { echo "==== $name (rc=$rc), last 40 lines"; tail -n 40 "$LOGS/$name.log"; } >>"$failures"
  fi
  return $rc
}

# 1. GPU tests (gpu_serving_test starts the worker binaries from the bundle).
export PDSERVE_BINARY_DIR="$PWD/$BUNDLE"
[ "$DEVICE" = cpu ] && export PDSERVE_GPU_TEST_DEVICE=cpu
for t in cuda_model_runner_test device_kv_transfer_test nccl_transfer_test gpu_serving_test; do
  step "$t" 240 "$bin/$t"
  grep -hE "^\[  (PASSED|FAILED|SKIPPED) |GPU_CHECK" "$LOGS/$t.log" | sed "s/^/  $t: /" | tee -a "$summary"
done

# 2. Engine throughput on the GPU, on a random model with SmolLM2's shapes.
model="$(mktemp -d)/smollm2-random.gguf"  # a folder of its own per run
step random_model 120 "$bin/pdserve" random-model --out="$model"
step bench_engine_cuda 240 "$bin/pdserve" bench-engine --model="$model" --device="$DEVICE" \
  --bench_threads=1 --bench_pp=512 --bench_tg=128 --bench_batches=1,8,64 \
  --bench_batch_tokens=64 --bench_repeats=2 --kv_blocks=4096
sed -n '/^test /,/^peak/p' "$LOGS/bench_engine_cuda.log" | sed 's/^/  /' | tee -a "$summary"
# The same decode runs replayed from CUDA graphs (--cuda_graphs).
step bench_engine_cuda_graphs 240 "$bin/pdserve" bench-engine --model="$model" --device="$DEVICE" \
  --cuda_graphs --bench_threads=1 --bench_pp=512 --bench_tg=128 --bench_batches=1,8,64 \
  --bench_batch_tokens=64 --bench_repeats=2 --kv_blocks=4096
sed -n '/^test /,/^peak/p' "$LOGS/bench_engine_cuda_graphs.log" | sed 's/^/  graphs /' | tee -a "$summary"

# 3. KV transfer bandwidth.
step transfer_bench 180 "$bin/pdserve_gpu_transfer_bench" --rounds=5
grep -h "GPU_BENCH\|^device" "$LOGS/transfer_bench.log" | sed 's/^/  /' | tee -a "$summary"

# 4. Disaggregated, colocated and single-process generation on one GPU.
prompt="Write one sentence about the sea."
gen_flags=(--max_tokens=24 --ignore_eos)
cluster() {  # cluster NAME PORT EXTRA_UP_FLAGS...: up, one generate, stop
  local name="$1" port="$2"
  shift 2
  local left=$((BUDGET_S - SECONDS))
  if [ "$left" -lt 40 ]; then
    say "step generate_$name: skipped (budget of ${BUDGET_S} s spent)"
    return
  fi
  local wait_s=$((left - 30 < 120 ? left - 30 : 120))
  "$bin/pdserve" up --model="$model" --device="$DEVICE" --threads=1 --router_port="$port" \
    --log_dir="$LOGS/up-$name" "$@" >"$LOGS/up-$name.log" 2>&1 &
  local pid=$!
  local ok=1
  for _ in $(seq "$wait_s"); do
    grep -q "serving; press Ctrl-C" "$LOGS/up-$name.log" && ok=0 && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  if [ $ok -eq 0 ]; then
    timeout 60 "$bin/pdserve" generate --router="127.0.0.1:$port" "${gen_flags[@]}" "$prompt" \
      >"$LOGS/gen-$name.txt" 2>"$LOGS/gen-$name.err"
    local rc=$?
    say "step generate_$name: rc=$rc"
    [ $rc -ne 0 ] && { echo "==== generate_$name (rc=$rc)"; tail -n 20 "$LOGS/gen-$name.err"; } >>"$failures"
  else
    say "step generate_$name: cluster did not come up (see up-$name.log in logs.tgz)"
    { echo "==== up-$name"; tail -n 40 "$LOGS/up-$name.log"; } >>"$failures"
  fi
  kill -TERM $pid 2>/dev/null
  wait $pid 2>/dev/null
}
# auto picks cuda_ipc for two GPU workers of one node; tcp forces the staged path.
cluster disagg 50151 --prefill=1 --decode=1
cluster disagg_tcp 50153 --prefill=1 --decode=1 --kv_transport=tcp
cluster colocated 50152 --decode=1 --colocated
step run_single 120 "$bin/pdserve" run --model="$model" --device="$DEVICE" --chat \
  --prompt="$prompt" --max_tokens=24 --ignore_eos
# Same text, trailing newlines aside (the CLI's run adds one).
same() { [ -s "$1" ] && [ -s "$2" ] && [ "$(cat "$1")" == "$(cat "$2")" ] && echo yes || echo no; }
head -c 4096 "$LOGS/run_single.log" | grep -v "^[IWE][0-9]" >"$LOGS/gen-single.txt"
say "GPU_CHECK paths disagg_vs_colocated=$(same "$LOGS/gen-disagg.txt" "$LOGS/gen-colocated.txt")" \
  "disagg_vs_single=$(same "$LOGS/gen-disagg.txt" "$LOGS/gen-single.txt")" \
  "ipc_vs_tcp=$(same "$LOGS/gen-disagg.txt" "$LOGS/gen-disagg_tcp.txt")"
# Which KV paths the prefill workers opened (one log line per connection).
say "GPU_CHECK kv_paths: $(grep -ho 'kv connection to [^ ]* ([a-z_]*)' "$LOGS"/up-*/prefill-*.log 2>/dev/null | sed 's/.*(//; s/)//' | sort | uniq -c | tr '\n' ' ')"

say "generated (disagg): $(head -c 300 "$LOGS/gen-disagg.txt" 2>/dev/null | tr '\n' ' ')"
echo "---- failures ($failures)"
tail -c 6000 "$failures"
echo "---- summary ($summary)"
cat "$summary"
