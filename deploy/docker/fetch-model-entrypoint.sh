#!/bin/sh
# Entrypoint of the pdserve-model-fetch image (deploy/docker/Dockerfile.*,
# target model-fetch). Puts the model into $MODEL_DIR (default /models) with
# scripts/fetch-model.sh, or with --wait only waits until another pod (the
# model-pvc Job) has put a verified copy there.
#
# fetch-model.sh links the file into <its repository>/models/, so it runs from
# a copy under $TMPDIR: the image's root filesystem stays read-only.
set -eu

MODEL_DIR="${MODEL_DIR:-/models}"
SCRIPT="${FETCH_MODEL_SCRIPT:-/opt/pdserve/scripts/fetch-model.sh}"
NAME="$(sed -n 's/^NAME="\(.*\)"$/\1/p' "$SCRIPT")"
SHA256="$(sed -n 's/^SHA256="\(.*\)"$/\1/p' "$SCRIPT")"
[ -n "$NAME" ] && [ -n "$SHA256" ] || { echo "fetch-model: cannot read NAME/SHA256 from $SCRIPT" >&2; exit 1; }

verified() { echo "$SHA256  $MODEL_DIR/$NAME" | sha256sum --check --status 2>/dev/null; }

if [ "${1:-}" = "--wait" ]; then
  interval="${WAIT_INTERVAL_S:-5}"
  until verified; do
    echo "fetch-model: waiting for a verified $MODEL_DIR/$NAME"
    sleep "$interval"
  done
  echo "fetch-model: $MODEL_DIR/$NAME verified"
  exit 0
fi

if verified; then
  echo "fetch-model: $MODEL_DIR/$NAME already verified"
  exit 0
fi
work="${TMPDIR:-/tmp}/pdserve-fetch"
mkdir -p "$work/scripts"
cp "$SCRIPT" "$work/scripts/fetch-model.sh"
HOME="${TMPDIR:-/tmp}" PDSERVE_MODEL_CACHE="$MODEL_DIR" "$work/scripts/fetch-model.sh"
rm -rf "$work"
verified
echo "fetch-model: $MODEL_DIR/$NAME ready"
