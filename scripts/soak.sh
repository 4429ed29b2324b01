#!/usr/bin/env bash
# Soak: the chaos test (tests/integration/chaos_test.cc) run round after
# round with a new seed each, for as long as asked, then a summary table of
# every round (faults by kind, requests by kind, errors, wrong answers,
# leaked blocks, hangs, and the router's RSS / descriptors / threads at the
# start and end of each round: they must level off, not climb).
# Usage: scripts/soak.sh [MINUTES=30] [REQUESTS_PER_ROUND=400]
# Environment: PDSERVE_CHAOS_FAULTS, PDSERVE_CHAOS_KV_DTYPE,
# PDSERVE_CHAOS_ROUTER_FLAGS pass through; BUILD_DIR (default build).
set -euo pipefail
minutes="${1:-30}"
requests="${2:-400}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
test_bin="$build/bin/chaos_test"
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
        "$test_bin" >"$log_dir/round-$round.log" 2>&1); then
    failed=$((failed + 1))
    echo "soak: round $round (seed $seed) FAILED: $log_dir/round-$round.log"
  fi
  grep -h "^chaos summary:" "$log_dir/round-$round.log" | sed "s/^/round $round: /" || true
done
echo
echo "| round | seed | faults | requests | completed | by kind | dropped | errors | wrong | leaked | hangs | router RSS KiB | router fds | router threads |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for f in "$log_dir"/round-*.log; do
  line=$(grep -h "^chaos summary:" "$f" || true)
  [ -n "$line" ] || continue
  r=$(basename "$f" .log); r=${r#round-}
  field() { echo "$line" | grep -o " $1=[^ ]*" | head -1 | cut -d= -f2-; }
  echo "| $r | $(field seed) | $(field faults) | $(field requests) | $(field completed) | $(field by_kind) | $(field dropped) | $(field errors) | $(field wrong) | $(field leaked_blocks) | $(field hangs) | $(field router_rss_kib) | $(field router_fds) | $(field router_threads) |"
done
echo
echo "soak: $round rounds, $failed failed"
[ "$failed" -eq 0 ]
