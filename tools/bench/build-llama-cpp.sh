#!/usr/bin/env bash
# Builds llama.cpp's C++ programs (`llama-bench` and `llama-batched-bench`,
# the engine peers of docs/PERFORMANCE.md, or `llama-server`, the serving
# peer) from the llama.cpp sources vendored in the PyPI sdist
# llama-cpp-python==0.3.36 (sha256 checked), natively for this CPU, and
# caches them outside the repository (nothing of it is committed). CPU
# only, no curl. Prints each binary's path, one per line, in the order
# asked. Not part of `make test`; ~10 min on 2 cores for a first build.
#
#   tools/bench/build-llama-cpp.sh llama-bench llama-batched-bench
#   # -> ~/.cache/pdserve/llama-cpp-0.3.36/llama-bench, .../llama-batched-bench
set -euo pipefail

[[ $# -ge 1 ]] || { echo "usage: build-llama-cpp.sh llama-bench|llama-batched-bench|llama-server..." >&2; exit 2; }
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CACHE_DIR="${PDSERVE_LLAMA_CPP_CACHE:-$HOME/.cache/pdserve/llama-cpp-$VERSION}"
SDIST="$CACHE_DIR/llama_cpp_python-$VERSION.tar.gz"
JOBS="${JOBS:-$(nproc)}"

missing=()
for t in "$@"; do [[ -x "$CACHE_DIR/$t" ]] || missing+=("$t"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  for t in "$@"; do echo "$CACHE_DIR/$t"; done
  exit 0
fi
mkdir -p "$CACHE_DIR"
if [[ ! -f "$SDIST" ]] || ! echo "$SHA256  $SDIST" | sha256sum -c --quiet - 2>/dev/null; then
  echo "build-llama-cpp: downloading the llama-cpp-python==$VERSION sdist" >&2
  python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$CACHE_DIR" \
    "llama-cpp-python==$VERSION" >&2
  echo "$SHA256  $SDIST" | sha256sum -c --quiet - || { rm -f "$SDIST"; exit 1; }
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$SDIST" -C "$tmp"
src="$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp"
echo "build-llama-cpp: building ${missing[*]} (-j$JOBS)" >&2
cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF >&2
ninja -C "$tmp/build" -j "$JOBS" "${missing[@]}" >&2
for t in "${missing[@]}"; do cp "$tmp/build/bin/$t" "$CACHE_DIR/$t"; done
for t in "$@"; do echo "$CACHE_DIR/$t"; done
