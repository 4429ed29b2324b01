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
"$CLANGXX" --version >"$work/clang-version"

# One shell command line per translation unit: $work/cmd/N.
python3 - "$db" "$root" "$build_dir" "$work" "$CLANGXX" "${THREAD_SAFETY_ONLY:-}" \
  "${THREAD_SAFETY_ALL:-0}" <<'EOF'
import json, os, re, shlex, sys

db, root, build_dir, work, clangxx, only, check_all = sys.argv[1:]
os.makedirs(os.path.join(work, "cmd"))
os.makedirs(os.path.join(work, "unit"))
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
    with open(os.path.join(work, "unit", str(n)), "w") as fh:
        json.dump({"dir": d, "argv": out}, fh)
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
mkdir -p "$work/out"
# Each file: its clang output in out/N, its exit status in out/N.rc.
python3 - "$work" "$jobs" "$root" "$build_dir" <<'EOF'
import concurrent.futures, hashlib, json, os, subprocess, sys, time

work, jobs, root, build_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
# Clean results are kept outside the repository, as ccache keeps objects
# (THREAD_SAFETY_CACHE set but empty: none): a file whose preprocessed
# text (checkout and build paths masked, so another clone hits), flags and
# clang were checked clean before is not checked again. Preprocessing
# takes a tenth of the analysis, and the analysis then reads the very
# bytes that were hashed. Only clean results are kept, and a key is made
# only when preprocessing succeeded, so an entry cannot hide a violation.
cache = os.environ.get("THREAD_SAFETY_CACHE")
if cache is None:
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(os.environ["HOME"], ".cache") if os.environ.get("HOME") else "")
    cache = os.path.join(base, "pdserve", "thread-safety") if base else ""
if cache:
    try:
        os.makedirs(cache, exist_ok=True)
        # Entries unused for 30 days (files since changed) go.
        stale = time.time() - 30 * 86400
        for e in os.scandir(cache):
            if e.is_file() and e.stat().st_mtime < stale:
                os.unlink(e.path)
    except OSError as e:
        print(f"check-thread-safety: no result cache ({e})", file=sys.stderr)
        cache = ""
with open(os.path.join(work, "clang-version"), "rb") as fh:
    salt = b"check-thread-safety cache 1\n" + fh.read()


def masked(data):
    return data.replace(build_dir.encode(), b"@BUILD@").replace(root.encode(), b"@ROOT@")


def run(n):
    with open(os.path.join(work, "unit", n)) as fh:
        unit = json.load(fh)
    argv = unit["argv"]
    out = os.path.join(work, "out", n)
    key = None
    if cache:
        pre = subprocess.run([a for a in argv if a != "-fsyntax-only"] + ["-E"],
                             cwd=unit["dir"], capture_output=True)
        if pre.returncode == 0 and pre.stdout:
            key = hashlib.sha256(salt + masked(json.dumps(argv).encode()) + b"\0" +
                                 masked(pre.stdout)).hexdigest()
            entry = os.path.join(cache, key)
            if os.path.exists(entry):
                os.utime(entry)
                for suffix, text in (("", ""), (".rc", "0\n"), (".hit", "")):
                    with open(out + suffix, "w") as fh:
                        fh.write(text)
                return
            ii = os.path.join(work, "unit", n + ".ii")
            with open(ii, "wb") as fh:
                fh.write(pre.stdout)
            argv = argv[:-1] + ["-x", "c++-cpp-output", ii]
    check = subprocess.run(argv, cwd=unit["dir"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    with open(out, "wb") as fh:
        fh.write(check.stdout)
    with open(out + ".rc", "w") as fh:
        fh.write(f"{check.returncode}\n")
    if key and check.returncode == 0 and not check.stdout:
        open(os.path.join(cache, key), "w").close()


units = sorted((u for u in os.listdir(os.path.join(work, "unit")) if u.isdigit()), key=int)
with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
    list(pool.map(run, units))
EOF
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
echo "check-thread-safety: $count file(s), no violations (${elapsed}s, $jobs jobs; $hits of them" \
     "clean before and unchanged; $(cat "$work/skipped") without locks skipped)"
