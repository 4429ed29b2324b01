#!/usr/bin/env bash
# Creates the Python virtual environment of the OpenAI-API integration test
# (tests/integration/openai_sdk_check.py, run with the official `openai` SDK)
# and installs tests/integration/openai_sdk_requirements.txt into it, every
# version pinned. `make test-default` and `make test-asan` call it with
# $(BUILD_DIR)/venv and hand the test its interpreter as PDSERVE_OPENAI_PYTHON.
#
# Usage: scripts/setup-venv.sh DIR
#   PDSERVE_VENV_PYTHON  the interpreter to build the venv from (default python3)
#
# Idempotent and silent when DIR already holds this exact environment: a stamp
# file in DIR records the requirements file's sha256 and the base interpreter,
# and DIR is created afresh when either changes. The venv is part of set-up,
# so failing to create it (no python3-venv, no route to PyPI) is an error:
# a clear message and exit status 1, never a silently skipped test.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="$root/tests/integration/openai_sdk_requirements.txt"
python="${PDSERVE_VENV_PYTHON:-python3}"
stamp="$dir/.pdserve-venv-stamp"

fail() {
  echo "setup-venv: $*" >&2
  exit 1
}

command -v "$python" >/dev/null 2>&1 || fail "no '$python' on PATH (scripts/setup.sh installs python3)"
base="$("$python" -c 'import sys; print(sys.version.split()[0], sys.base_prefix)')" \
  || fail "'$python' does not run"
want="requirements $(sha256sum "$requirements" | cut -d' ' -f1)
python $base"

# Already there: the stamp matches and the venv's interpreter still runs (its
# base interpreter may have been removed since).
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && "$dir/bin/python" -c '' >/dev/null 2>&1; then
  exit 0
fi

# Never delete a folder that is not a venv (a mistyped DIR).
if [ -e "$dir" ] && [ ! -f "$dir/pyvenv.cfg" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
  fail "$dir exists and is not a virtual environment; remove it or pick another DIR"
fi
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"

pin="$(grep -m1 '^openai==' "$requirements")"
echo "setup-venv: creating $dir ($pin, $base)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$python" -m venv "$dir" >"$log" 2>&1; then
  cat "$log" >&2
  rm -rf "$dir"
  fail "'$python -m venv $dir' failed; on Debian it needs the python3-venv package (scripts/setup.sh installs it)"
fi
if ! "$dir/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
       --retries 2 --timeout 30 -r "$requirements" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  rm -rf "$dir"
  fail "could not pip install $requirements into $dir (is PyPI reachable?)"
fi
"$dir/bin/python" -c 'import openai' 2>"$log" || { cat "$log" >&2; rm -rf "$dir"; fail "'import openai' fails in $dir"; }
printf '%s\n' "$want" >"$stamp"
