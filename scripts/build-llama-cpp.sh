#!/usr/bin/env bash
# Builds one of llama.cpp's C++ programs (`llama-bench`, the engine peer of
# docs/PERFORMANCE.md, or `llama-server`, the serving peer) from the
# llama.cpp sources vendored in the PyPI sdist llama-cpp-python==0.3.36
# (sha256 checked), natively for this CPU, and caches it outside the
# repository (nothing of it is committed). CPU only, no curl. Prints the
# binary's path. Not part of `make test`; ~10 min on 2 cores per program.
#
#   scripts/build-llama-cpp.sh llama-bench   # -> ~/.cache/pdserve/llama-cpp-0.3.36/llama-bench
set -euo pipefail

TARGET="${1:?usage: build-llama-cpp.sh llama-bench|llama-server}"
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
CACHE_DIR="${PDSERVE_LLAMA_CPP_CACHE:-$HOME/.cache/pdserve/llama-cpp-$VERSION}"
BIN="$CACHE_DIR/$TARGET"
SDIST="$CACHE_DIR/llama_cpp_python-$VERSION.tar.gz"
JOBS="${JOBS:-$(nproc)}"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
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
echo "build-llama-cpp: building $TARGET (-j$JOBS)" >&2
cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF >&2
ninja -C "$tmp/build" -j "$JOBS" "$TARGET" >&2
cp "$tmp/build/bin/$TARGET" "$BIN"
echo "$BIN"
