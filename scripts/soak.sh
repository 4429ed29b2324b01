#!/usr/bin/env bash
# Soak: a chaos test (tests/integration/chaos_harness.h) run round after
# round with a new seed each, for as long as asked, then a summary table of
# every round (faults by kind, KV links cut, requests by kind, errors, wrong
# answers, leaked blocks, hangs, p99 TTFT and inter-token latency, and the
# router's RSS / descriptors / threads at the start and end of each round:
# they must level off, not climb).
# Usage: scripts/soak.sh [MINUTES=30] [REQUESTS_PER_ROUND=400]
# Environment: PDSERVE_CHAOS_FAULTS ("none": the fault-free baseline),
# PDSERVE_CHAOS_KV_DTYPE, PDSERVE_CHAOS_ROUTER_FLAGS pass through;
# PDSERVE_SOAK_TEST picks the test (chaos_test: SmolLM2, the default;
# chaos_window_test: Gemma 3 past its sliding window) and
# PDSERVE_SOAK_FILTER a --gtest_filter within it (default: every test);
# BUILD_DIR (default build).
set -euo pipefail
minutes="${1:-30}"
requests="${2:-400}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
test_bin="$build/bin/${PDSERVE_SOAK_TEST:-chaos_test}"
[ -x "$test_bin" ] || { echo "soak: $test_bin not built (make build)" >&2; exit 1; }
log_dir="$(mktemp -d /tmp/pdserve-soak.XXXXXX)"
end=$(( $(date +%s) + minutes * 60 ))
round=0
failed=0
echo "soak: ${minutes} min, ${requests} requests per round, logs in $log_dir"
while [ "$(date +%s)" -lt "$end" ]; do
  round=$((round + 1))
  seed=$((1000 + round))
  if ! (cd "$build" && PDSERVE_CHAOS_SEED=$seed PDSERVE_CHAOS_REQUESTS=$requests \
        "$test_bin" --gtest_filter="${PDSERVE_SOAK_FILTER:-*}" >"$log_dir/round-$round.log" 2>&1); then
    failed=$((failed + 1))
    echo "soak: round $round (seed $seed) FAILED: $log_dir/round-$round.log"
  fi
  grep -h "^chaos summary:" "$log_dir/round-$round.log" | sed "s/^/round $round: /" || true
done
echo
echo "| round | model | seed | faults | links cut | requests | completed | by kind | dropped | errors | wrong | leaked | hangs | TTFT p99 ms | ITL p99 ms | router RSS KiB | router fds | router threads |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in $(ls "$log_dir"/round-*.log | sort -V); do
  r=$(basename "$f" .log); r=${r#round-}
  # One line per test the round ran.
  { grep -h "^chaos summary:" "$f" || true; } | while read -r line; do
    field() { echo "$line" | grep -o " $1=[^ ]*" | head -1 | cut -d= -f2-; }
    echo "| $r | $(field model) | $(field seed) | $(field faults) | $(field cut_links) | $(field requests) | $(field completed) | $(field by_kind) | $(field dropped) | $(field errors) | $(field wrong) | $(field leaked_blocks) | $(field hangs) | $(field ttft_ms_p99) | $(field itl_ms_p99) | $(field router_rss_kib) | $(field router_fds) | $(field router_threads) |"
  done
done
echo
echo "soak: $round rounds, $failed failed"
[ "$failed" -eq 0 ]
