#!/usr/bin/env bash
# Builds what tests/gpu/device_check.sh runs and packs it, with the shared
# libraries the GPU machine lacks, into device_bundle/ (git-ignored), for the
# device tool's `carry`. The GPU machine has the NVIDIA driver, cuBLAS and
# NCCL (from its Python packages) but none of our Debian libraries; CUDA and
# C/C++ runtime libraries are therefore left out, everything else is copied.
# Usage: scripts/make-device-bundle.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out=device_bundle
bins=(cuda_model_runner_test device_kv_transfer_test nccl_transfer_test gpu_serving_test pdserve
      pdserve-router pdserve-prefill pdserve-decode pdserve_gpu_transfer_bench)

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPDSERVE_CUDA=ON \
  -DPDSERVE_NCCL=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
ninja -C "$build" "${bins[@]}" pdserve_cuda_module

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libnccl|libnvidia)'
# The worker binaries load the CUDA module from their own folder.
for b in "${bins[@]}" libpdserve_cuda.so; do
  objcopy --strip-debug "$build/bin/$b" "$out/bin/$b"
  ldd "$build/bin/$b" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if ! [[ "$name" =~ $skip ]] && [ ! -f "$out/lib/$name" ]; then
      objcopy --strip-debug "$path" "$out/lib/$name"
    fi
  done
done
du -sh "$out" | awk '{print "device bundle: " $1}'
