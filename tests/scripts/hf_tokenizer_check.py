#!/usr/bin/env python3
"""Checks scripts/make-hf-tokenizer.py against llama.cpp's token ids.

Usage: python3 tests/scripts/hf_tokenizer_check.py [MODEL.gguf]

Builds the Hugging Face tokenizer folder for SmolLM2-135M-Instruct (the
model scripts/fetch-model.sh fetches; found as make_tokenizer_golden.py
finds it) into a temporary directory and encodes every string of
tests/data/tokenizer_golden.json with `tokenizers`, comparing with the ids
llama.cpp gave. When scripts/fetch-vocab.sh has fetched llama.cpp's
vocabulary-only fixtures (models/vocab/ or ~/.cache/pdserve/vocab/), it does
the same for tests/data/vocab_golden_{llama_bpe,llama_spm,gpt_neox}.json:
the llama-bpe and default pre-tokenizers and the SentencePiece pipeline.

Each golden entry is encoded with add_special_tokens=False (the golden ids
have no BOS) and with `Tokenizer.encode_special_tokens` set to the opposite
of the entry's parse_special: off, control tokens are plain text, as with
llama.cpp's parse_special=false; on, they are matched, which is what Hugging
Face does by default. Mismatches are printed; the exit status is 1 if there
is any, 0 otherwise.

If transformers is installed it also checks that AutoTokenizer loads the
folder, encodes like `tokenizers` and renders the chat template.

Needs: pip install tokenizers==0.23.3 (transformers==5.25.0 jinja2==3.1.6
optional).
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data")
SCRIPT = os.path.join(ROOT, "scripts", "make-hf-tokenizer.py")
MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# (golden file, GGUF it was made from, directory under models/ and ~/.cache/pdserve/)
FIXTURES = [
    ("tokenizer_golden.json", MODEL_NAME, "models"),
    ("vocab_golden_llama_bpe.json", "ggml-vocab-llama-bpe.gguf", "vocab"),
    ("vocab_golden_llama_spm.json", "ggml-vocab-llama-spm.gguf", "vocab"),
    ("vocab_golden_gpt_neox.json", "ggml-vocab-gpt-neox.gguf", "vocab"),
]


def find(name, subdir):
    candidates = []
    for root in (os.environ.get("PDSERVE_SOURCE_DIR"), ROOT):
        if root:
            candidates.append(os.path.join(root, "models", "" if subdir == "models" else subdir,
                                           name))
    candidates.append(os.path.expanduser(os.path.join("~/.cache/pdserve", subdir, name)))
    for path in candidates:
        if os.path.exists(path):
            return path
    return None


def make_folder(gguf, out):
    subprocess.run([sys.executable, SCRIPT, gguf, out], check=True, stdout=subprocess.DEVNULL)


def check_golden(golden_path, folder):
    """Returns the number of mismatches, printing each one."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    with open(golden_path, encoding="utf-8") as f:
        entries = json.load(f)["entries"]
    bad = 0
    for entry in entries:
        tok.encode_special_tokens = not entry["parse_special"]
        ids = tok.encode(entry["text"], add_special_tokens=False).ids
        if ids != entry["ids"]:
            bad += 1
            print("  MISMATCH parse_special=%s text=%r\n    llama.cpp: %s\n    tokenizers: %s"
                  % (entry["parse_special"], entry["text"][:80], entry["ids"], ids))
    print("%s: %d/%d match" % (os.path.basename(golden_path), len(entries) - bad, len(entries)))
    return bad


def check_transformers(folder, golden_path):
    """AutoTokenizer loads the folder, agrees with tokenizers and renders the template."""
    try:
        import transformers
    except ImportError:
        print("transformers not installed: AutoTokenizer check skipped")
        return 0
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    with open(golden_path, encoding="utf-8") as f:
        entries = [e for e in json.load(f)["entries"] if e["parse_special"]]
    bad = 0
    for entry in entries:
        ids = tok.encode(entry["text"], add_special_tokens=False)
        if ids != entry["ids"]:
            bad += 1
            print("  AutoTokenizer MISMATCH text=%r\n    llama.cpp: %s\n    transformers: %s"
                  % (entry["text"][:80], entry["ids"], ids))
    messages = [{"role": "user", "content": "What is 2+2?"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    want = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    if text != want:
        bad += 1
        print("  apply_chat_template gave %r, want %r" % (text, want))
    ids = tok.apply_chat_template(messages, add_generation_prompt=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    if ids != tok.encode(want, add_special_tokens=False):
        bad += 1
        print("  apply_chat_template(tokenize=True) gave %s" % ids)
    print("transformers %s AutoTokenizer (%s): %d/%d golden cases match, chat template %s"
          % (transformers.__version__, type(tok).__name__, len(entries) - bad, len(entries),
             "ok" if text == want else "WRONG"))
    return bad


def main(argv):
    try:
        import tokenizers
    except ImportError:
        sys.exit("hf_tokenizer_check: needs tokenizers (pip install tokenizers==0.23.3)")
    print("tokenizers %s" % tokenizers.__version__)
    bad = 0
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for golden, gguf_name, subdir in FIXTURES:
            gguf = argv[1] if len(argv) > 1 and gguf_name == MODEL_NAME else find(gguf_name, subdir)
            if gguf is None:
                if gguf_name == MODEL_NAME:
                    sys.exit("hf_tokenizer_check: %s not found; run scripts/fetch-model.sh or "
                             "pass its path" % MODEL_NAME)
                print("%s: %s not found (scripts/fetch-vocab.sh), skipped" % (golden, gguf_name))
                continue
            folder = os.path.join(tmp, gguf_name)
            make_folder(gguf, folder)
            bad += check_golden(os.path.join(DATA, golden), folder)
            checked += 1
            if gguf_name == MODEL_NAME:
                bad += check_transformers(folder, os.path.join(DATA, golden))
    print("FAIL: %d mismatches" % bad if bad else "OK: %d golden files" % checked)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
