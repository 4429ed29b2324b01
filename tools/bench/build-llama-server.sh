#!/usr/bin/env bash
# Builds llama.cpp's C++ `llama-server` (continuous batching), the serving
# peer of docs/PERFORMANCE.md; see tools/bench/build-llama-cpp.sh. Prints the
# binary's path.
exec "$(dirname "$0")/build-llama-cpp.sh" llama-server
