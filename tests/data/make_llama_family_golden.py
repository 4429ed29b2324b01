#!/usr/bin/env python3
"""Writes tests/data/llama_family_golden.json: llama.cpp's greedy tokens on
random-weight llama models with other llama-family tokenizers and RoPE
variants than SmolLM2's.

Each case is a GGUF that `pdserve random-model --shape=tiny` writes (2
layers, width 128, Q8_0 weights; deterministic for a seed) with the
tokenizer of one of llama.cpp's vocabulary fixtures (scripts/fetch-vocab.sh)
and, for some, LLaMA 3.1's rope_freqs.weight or linear RoPE scaling. The
oracle is llama.cpp as bundled by llama-cpp-python 0.3.7: prompts are
tokenized with llm.tokenize(text, add_bos=True, special=True) (BOS when the
vocabulary asks for it), evaluated one token per decode, then STEPS greedy
tokens are the first index of the maximum raw logit (EOS does not stop).
The file records each GGUF's sha256, so tests/golden/
llama_family_golden_test.cc, which writes the same files itself, knows it
compares against the same weights.

Usage: python3 tests/data/make_llama_family_golden.py build/bin/pdserve [vocab_dir]
"""

import json
import os
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_golden import sha256  # noqa: E402

STEPS = 24
PROMPTS = [
    "The capital of France is",
    "def add(a, b):\n    return",
    " Once upon a time, in a land far away,",
    "Numbers: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23",
]
# name -> pdserve random-model flags beyond --shape=tiny --random_seed.
CASES = {
    "llama2_spm": ["--vocab_from={vocab}/ggml-vocab-llama-spm.gguf"],
    "llama2_spm_linear_rope": ["--vocab_from={vocab}/ggml-vocab-llama-spm.gguf",
                               "--rope_scaling_factor=4"],
    "llama3_bpe": ["--vocab_from={vocab}/ggml-vocab-llama-bpe.gguf"],
    "llama3_rope_freqs": ["--vocab_from={vocab}/ggml-vocab-llama-bpe.gguf",
                          "--llama3_rope_freqs"],
}
# Each RoPE variant must change some output of the same weights, or its
# case would not test it.
MUST_DIFFER = [("llama2_spm", "llama2_spm_linear_rope"), ("llama3_bpe", "llama3_rope_freqs")]
SEED = 7



def greedy(llm, prompt_tokens):
    llm.reset()
    llm.eval(prompt_tokens)
    out = []
    for _ in range(STEPS):
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()
        top2 = np.partition(logits, -2)[-2:]
        token = int(np.argmax(logits))
        out.append({"token": token, "gap": float(logits[token] - min(top2))})
        llm.eval([token])
    return out


def main():
    pdserve = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    vocab = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "models", "vocab")
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in CASES.items():
            path = os.path.join(tmp, name + ".gguf")
            subprocess.run([pdserve, "random-model", "--out=" + path, "--shape=tiny",
                            "--random_seed=%d" % SEED] + [f.format(vocab=vocab) for f in flags],
                           check=True)
            llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_batch=1, n_ubatch=1, n_threads=1,
                                  verbose=False)
            runs = []
            for text in PROMPTS:
                prompt = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
                steps = greedy(llm, prompt)
                runs.append({"text": text, "prompt_tokens": prompt,
                             "output_tokens": [s["token"] for s in steps],
                             "gap": [s["gap"] for s in steps]})
            cases.append({"name": name, "random_model_flags": flags, "seed": SEED,
                          "gguf_sha256": sha256(path), "runs": runs})
            del llm
    outputs = {c["name"]: [r["output_tokens"] for r in c["runs"]] for c in cases}
    for a, b in MUST_DIFFER:
        if outputs[a] == outputs[b]:
            sys.exit("cases %s and %s give the same tokens; the RoPE variant is untested" % (a, b))
    doc = {
        "oracle": "llama-cpp-python %s (llama.cpp): tokenize(add_bos=True, special=True), "
                  "eval one token per decode (n_batch = n_ubatch = 1, n_threads = 1), "
                  "argmax of raw logits for %d steps" % (llama_cpp.__version__, STEPS),
        "llama_cpp_python_version": llama_cpp.__version__,
        "command": "python3 tests/data/make_llama_family_golden.py build/bin/pdserve",
        "cases": cases,
    }
    out = os.path.join(here, "llama_family_golden.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %d cases to %s" % (len(cases), out))


if __name__ == "__main__":
    main()
