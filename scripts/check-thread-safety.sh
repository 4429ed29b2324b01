#!/usr/bin/env bash
# Checks the ABSL_GUARDED_BY-style annotations (make test-thread-safety).
# GCC ignores them; absl's macros expand to clang attributes only under clang,
# so every C++ translation unit of the project goes through
#   clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety
# with the -I/-D/-std flags of BUILD_DIR/compile_commands.json (no code is
# generated). CUDA (.cu) files, generated sources (*.pb.cc, anything under
# BUILD_DIR) and files outside the source tree are skipped; headers are
# checked through the translation units that include them.
# A translation unit whose own text and project includes (followed
# transitively) name no lock and no thread-safety annotation cannot break
# the analysis, so it is skipped: two thirds of the files, most of the
# pass's minutes (THREAD_SAFETY_ALL=1 checks every file anyway).
# A file checked clean before with the same preprocessed text, flags and
# clang is not checked again (a cache outside the repository, like ccache's;
# THREAD_SAFETY_CACHE= turns it off).
# Quiet on success (one summary line); otherwise one line per violation, the
# output of any file clang could not parse, and a non-zero exit.
# Usage: scripts/check-thread-safety.sh BUILD_DIR [JOBS]
#   THREAD_SAFETY_ONLY=REGEX checks only the files whose path matches REGEX.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [JOBS]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build_dir="$(cd "$1" && pwd)"
jobs="${2:-$(nproc)}"
CLANGXX="${CLANGXX:-clang++}"
db="$build_dir/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "check-thread-safety: $db is missing (configure first)" >&2
  exit 2
fi
if ! command -v "$CLANGXX" >/dev/null; then
  echo "check-thread-safety: $CLANGXX not found (scripts/setup.sh installs clang)" >&2
  exit 2
fi

start=$(date +%s.%N)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Clean results, outside the repository like ccache's (THREAD_SAFETY_CACHE=
# empty: none).
cache="${THREAD_SAFETY_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/pdserve/thread-safety}"
"$CLANGXX" --version >"$work/clang-version"

# One shell command line per translation unit: $work/cmd/N.
python3 - "$db" "$root" "$build_dir" "$work" "$CLANGXX" "${THREAD_SAFETY_ONLY:-}" \
  "${THREAD_SAFETY_ALL:-0}" <<'EOF'
import json, os, re, shlex, sys

db, root, build_dir, work, clangxx, only, check_all = sys.argv[1:]
os.makedirs(os.path.join(work, "cmd"))
os.makedirs(os.path.join(work, "pre"))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# What the analysis can judge: absl's lock types and the annotations.
LOCKS = re.compile(r'ABSL_[A-Z_]*(GUARDED_BY|LOCKS_REQUIRED|LOCKS_EXCLUDED|LOCK_FUNCTION|'
                   r'LOCKABLE|ACQUIRED_|LOCK_RETURNED|THREAD_SAFETY|ASSERT_[A-Z_]*LOCK)|'
                   r'absl::(Mutex|CondVar)|MutexLock')
verdicts = {}


def uses_locks(path):
    """The file or a project header it includes, transitively, names a lock."""
    if path in verdicts:
        return verdicts[path]
    verdicts[path] = False  # an include cycle adds nothing
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    hit = bool(LOCKS.search(text))
    for inc in INCLUDE.findall(text):
        if hit:
            break
        for base in (root, os.path.dirname(path)):
            p = os.path.join(base, inc)
            if os.path.isfile(p):
                hit = uses_locks(os.path.realpath(p))
                break
    verdicts[path] = hit
    return hit


skipped = 0
# GCC-only flags clang rejects or warns about (none of them matter for a
# syntax-only pass). Flags taking a separate argument are in TAKES_ARG.
GCC_ONLY_PREFIXES = ("-fno-semantic-interposition", "-fconcepts-diagnostics-depth",
                     "-fmax-errors", "-fdiagnostics-color", "-fno-tree-", "-ftree-",
                     "-fipa-", "-fno-ipa-", "-flto", "-fuse-linker-plugin",
                     "-fvar-tracking", "-fno-var-tracking", "-fcf-protection",
                     "-fstack-clash-protection", "-Wa,", "-fsanitize", "-fno-sanitize")
TAKES_ARG = {"-o", "-MF", "-MT", "-MQ"}
seen = set()
n = 0
for entry in json.load(open(db)):
    d = entry["directory"]
    f = os.path.realpath(os.path.join(d, entry["file"]))
    if not f.endswith((".cc", ".cpp", ".cxx")) or f.endswith(".pb.cc"):
        continue
    if not f.startswith(root + os.sep) or f.startswith(build_dir + os.sep):
        continue
    if not os.path.exists(f):
        continue  # deleted since the last configure: nothing to check
    if only and not re.search(only, f):
        continue
    if f in seen:
        continue
    seen.add(f)
    if check_all != "1" and not uses_locks(f):
        skipped += 1
        continue
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [clangxx]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in TAKES_ARG:
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a.startswith(("-o", "-W", "-g", "-O")):
            continue  # outputs, warnings (ours come below), debug info, optimisation
        if a.startswith(GCC_ONLY_PREFIXES):
            continue
        if os.path.realpath(os.path.join(d, a)) == f:
            continue  # the source file; added back last
        out.append(a)
    # clang 14 rejects some feature names GCC's __builtin_cpu_supports knows
    # ("f16c"); what the runtime CPU check returns does not matter here.
    out.append("-D__builtin_cpu_supports(feature)=true")
    out += ["-fsyntax-only", "-fno-color-diagnostics", "-Wno-everything",
            "-Wthread-safety", "-Werror=thread-safety", f]
    n += 1
    with open(os.path.join(work, "cmd", str(n)), "w") as fh:
        fh.write("cd %s && exec %s\n" % (shlex.quote(d), shlex.join(out)))
    # The same flags preprocessing only (no line markers): the cache key.
    pre = [a for a in out if a not in ("-fsyntax-only",)] + ["-E", "-P"]
    with open(os.path.join(work, "pre", str(n)), "w") as fh:
        fh.write("cd %s && exec %s\n" % (shlex.quote(d), shlex.join(pre)))
    if n == 1:  # the canary, with the first file's flags
        with open(os.path.join(work, "canary.sh"), "w") as fh:
            fh.write("cd %s && exec %s\n" % (shlex.quote(d), shlex.join(
                out[:-1] + [os.path.join(work, "canary.cc")])))
with open(os.path.join(work, "skipped"), "w") as fh:
    fh.write(str(skipped))
EOF

# The canary: a known violation the analysis must report, so a pass that
# silently checks nothing (absl's macros expanding to nothing, a flag lost)
# fails instead of passing.
cat >"$work/canary.cc" <<'EOF'
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
struct Canary {
  absl::Mutex mu;
  int n ABSL_GUARDED_BY(mu) = 0;
  void Unlocked() { ++n; }
};
EOF
if [ ! -f "$work/canary.sh" ]; then
  echo "check-thread-safety: no C++ source in $db" >&2
  exit 2
fi
if sh "$work/canary.sh" >"$work/canary.out" 2>&1 \
   || ! grep -q "requires holding mutex 'mu' exclusively \[-Werror,-Wthread-safety-analysis\]" \
          "$work/canary.out"; then
  echo "check-thread-safety: clang did not report the canary's violation; the analysis is off:" >&2
  cat "$work/canary.out" >&2
  exit 1
fi

count=$(find "$work/cmd" -type f | wc -l)
mkdir -p "$work/out" "$cache"
# Each file: its clang output in out/N, its exit status in out/N.rc. A
# file whose preprocessed text (checkout paths masked), flags and clang
# were checked clean before is not checked again: preprocessing takes a
# tenth of the analysis. Only clean results are kept, so a cached entry
# can never hide a violation.
find "$work/cmd" -type f -printf '%f\n' | sort -n \
  | xargs -P "$jobs" -I{} sh -c '
      w="$1"; n="$2"; cache="$3"; key=""
      if [ -n "$cache" ]; then
        key=$( { cat "$w/clang-version"; sed -e "s|$4|@ROOT@|g" -e "s|$5|@BUILD@|g" "$w/cmd/$n";
                 sh "$w/pre/$n" 2>/dev/null | sed -e "s|$4|@ROOT@|g" -e "s|$5|@BUILD@|g"; } \
               | sha256sum | cut -c1-64)
        if [ -f "$cache/$key" ]; then : >"$w/out/$n"; echo 0 >"$w/out/$n.rc"; echo >"$w/out/$n.hit"; exit 0; fi
      fi
      sh "$w/cmd/$n" >"$w/out/$n" 2>&1; rc=$?; echo $rc >"$w/out/$n.rc"
      if [ -n "$key" ] && [ $rc -eq 0 ] && [ ! -s "$w/out/$n" ]; then : >"$cache/$key"; fi' \
      _ "$work" {} "$cache" "$root" "$build_dir"
hits=$(find "$work/out" -name '*.hit' | wc -l)

violations="$work/violations"
broken=0
: >"$violations"
for i in $(seq 1 "$count"); do
  rc=$(cat "$work/out/$i.rc" 2>/dev/null || echo 1)
  [ "$rc" -eq 0 ] && continue
  # Violations: "path:line:col: error: ... [-Werror,-Wthread-safety-...]".
  if grep -E '\[-Werror,-Wthread-safety[a-z-]*\]$' "$work/out/$i" >>"$violations"; then
    # Any other error in the same file is reported too.
    if grep -E ': (fatal )?error: ' "$work/out/$i" | grep -vqE '\[-Werror,-Wthread-safety'; then
      broken=$((broken + 1))
      echo "check-thread-safety: clang errors in $(awk '{print $NF}' "$work/cmd/$i"):" >&2
      grep -E ': (fatal )?error: ' "$work/out/$i" | grep -vE '\[-Werror,-Wthread-safety' | head -20 >&2
    fi
  else
    broken=$((broken + 1))
    echo "check-thread-safety: clang failed on $(awk '{print $NF}' "$work/cmd/$i") (exit $rc):" >&2
    head -40 "$work/out/$i" >&2
  fi
done

elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
# A header's violation shows up once per file that includes it: once here.
nviol=0
if [ -s "$violations" ]; then
  sort -u "$violations" | sed "s|^$root/||" >"$violations.u"
  nviol=$(wc -l <"$violations.u")
  cat "$violations.u"
fi
if [ "$nviol" -gt 0 ] || [ "$broken" -gt 0 ]; then
  echo "check-thread-safety: $nviol violation(s), $broken file(s) clang could not check," \
       "$count file(s) checked in ${elapsed}s" >&2
  exit 1
fi
echo "check-thread-safety: $count file(s) checked, no violations (${elapsed}s, $jobs jobs;" \
     "$hits clean before, unchanged; $(cat "$work/skipped") without locks skipped)"
