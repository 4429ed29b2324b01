#!/usr/bin/env bash
# Builds llama.cpp's C++ `llama-server` (continuous batching), the serving
# peer of docs/PERFORMANCE.md, from the llama.cpp sources vendored in the
# PyPI sdist llama-cpp-python==0.3.36, and caches it outside the repository
# (nothing of it is committed). CPU only, no curl, native ISA. Prints the
# binary's path. Not part of `make test`; takes ~10 min on 2 cores once.
#
#   scripts/build-llama-server.sh            # -> ~/.cache/pdserve/llama-server-0.3.36/llama-server
set -euo pipefail

VERSION=0.3.36
CACHE_DIR="${PDSERVE_LLAMA_SERVER_CACHE:-$HOME/.cache/pdserve/llama-server-$VERSION}"
BIN="$CACHE_DIR/llama-server"
JOBS="${JOBS:-$(nproc)}"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE_DIR"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "build-llama-server: downloading the llama-cpp-python==$VERSION sdist" >&2
python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$tmp" \
  "llama-cpp-python==$VERSION" >&2
tar -xzf "$tmp"/llama_cpp_python-"$VERSION".tar.gz -C "$tmp"
src="$tmp/llama_cpp_python-$VERSION/vendor/llama.cpp"
echo "build-llama-server: building llama-server (-j$JOBS)" >&2
cmake -S "$src" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
  -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF >&2
ninja -C "$tmp/build" -j "$JOBS" llama-server >&2
cp "$tmp/build/bin/llama-server" "$BIN"
echo "$BIN"
