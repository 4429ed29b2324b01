#!/usr/bin/env bash
# Installs every system package pdserve's build and tests need (Debian 12).
# Idempotent and quiet when everything is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgoogle-glog-dev libabsl-dev libboost-dev libboost-system-dev
  libgtest-dev libgmock-dev nlohmann-json3-dev
  libssl-dev openssl python3 python3-pip python3-venv unzip clang
  json-schema-test-suite
)
# json-schema-test-suite: the JSON Schema conformance corpus that
# json_schema_suite_test runs structured output against (data only).
# python3-venv: Debian's python3 has no ensurepip without it, so `python3 -m
# venv` fails; scripts/setup-venv.sh makes the OpenAI SDK test's venv with it.

# The Kubernetes manifest test (tests/k8s) validates against the Python
# client's API models (kubernetes 32.x = Kubernetes 1.32). pip, quietly, only
# when missing; PDSERVE_SETUP_SKIP_PIP=1 skips it (container builds).
KUBERNETES_PY="kubernetes==32.0.1"
python_packages() {
  if [ "${PDSERVE_SETUP_SKIP_PIP:-0}" != "1" ] && command -v python3 >/dev/null \
     && ! python3 -c 'import kubernetes' 2>/dev/null; then
    # Debian's own python3 refuses plain pip installs (PEP 668): then the user site.
    python3 -m pip install --quiet --disable-pip-version-check "$KUBERNETES_PY" >/dev/null 2>&1 \
      || python3 -m pip install --quiet --disable-pip-version-check --user --break-system-packages \
           "$KUBERNETES_PY" >/dev/null 2>&1 \
      || echo "setup: could not pip install $KUBERNETES_PY (the k8s_manifests test tries again)" >&2
  fi
  return 0
}

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  python_packages
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
python_packages
