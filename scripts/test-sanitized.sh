#!/usr/bin/env bash
# Runs the ASan + UBSan build's tests (make test-asan). Every process the
# tests start — test binaries and the worker/router binaries they spawn —
# writes its sanitizer reports under one folder, so a report from a child
# process fails the run even when the test around it tolerated the child's
# death (the chaos test kills workers on purpose).
# Usage: scripts/test-sanitized.sh BUILD_DIR LABEL_REGEX EXCLUDE_REGEX JOBS
set -euo pipefail

build_dir="$1"
labels="$2"
exclude="$3"
jobs="${4:-$(nproc)}"
root="$(cd "$(dirname "$0")/.." && pwd)"
logs="$(cd "$build_dir" && pwd)/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"

export ASAN_OPTIONS="detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=0:log_path=$logs/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizer/lsan.supp:print_suppressions=0"

status=0
(cd "$build_dir" && ctest --output-on-failure -j "$jobs" --timeout 1500 -L "$labels" -LE "$exclude") \
  || status=$?

reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
  echo "test-sanitized: sanitizer reports from $(echo "$reports" | wc -l) process(es):" >&2
  for f in $reports; do
    echo "==== $f" >&2
    head -c 20000 "$f" >&2
  done
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "test-sanitized: no sanitizer reports"
fi
exit "$status"
