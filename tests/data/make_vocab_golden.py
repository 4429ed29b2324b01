#!/usr/bin/env python3
"""Writes tests/data/vocab_golden_<fixture>.json: llama.cpp's token ids for
llama-family vocabularies other than SmolLM2's.

The fixtures are llama.cpp's own vocabulary-only GGUFs, fetched by
scripts/fetch-vocab.sh into models/vocab/: ggml-vocab-llama-spm.gguf (the
LLaMA 2 SentencePiece tokenizer, tokenizer.ggml.model "llama") and
ggml-vocab-llama-bpe.gguf (LLaMA 3: byte-level BPE, pre-tokenizer
"llama-bpe"). The oracle is llama.cpp as bundled by llama-cpp-python 0.3.7,
loaded vocab-only through its C API (the fixtures have no weights, so no
context). For every string of make_tokenizer_golden.py plus the extra
strings below and for parse_special false and true it records
llama_tokenize(text, add_special=False, parse_special) and the bytes of each
id's llama_token_to_piece(lstrip=0, special=True), joined.
tests/unit/text/tokenizer_vocab_fixture_test.cc checks pdserve's Tokenizer
against every entry.

Usage: python3 tests/data/make_vocab_golden.py [vocab_dir]
       python3 tests/data/make_vocab_golden.py --models   (the real models' vocabularies)
"""

import ctypes
import json
import os
import sys

import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_golden import STRINGS, sha256  # noqa: E402

FIXTURES = {
    "llama_spm": "ggml-vocab-llama-spm.gguf",
    "llama_bpe": "ggml-vocab-llama-bpe.gguf",
    # Byte-level BPE without tokenizer.ggml.pre: llama.cpp's "default"
    # pre-tokenizer. It has no .inp/.out, so its entries include llama.cpp's
    # test strings (ggml-vocab-llama-bpe.gguf.inp) as well.
    "gpt_neox": "ggml-vocab-gpt-neox.gguf",
}
WITH_TEST_STRINGS = {"gpt_neox"}
# The real models' own vocabularies (scripts/fetch-model.sh links them at
# models/), written with --models. llama-cpp-python 0.3.7 predates gemma3, so
# these come from 0.3.36; the file's "oracle" says which. Gemma's strings add
# its chat markers; Qwen's its ChatML and tool-call markers.
MODEL_VOCABS = {
    "gemma3": "gemma-3-270m.Q4_K_M.gguf",
    "qwen2_5_coder": "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
}
MODEL_STRINGS = [
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\n  spaced   out  <end_of_turn>",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|endoftext|><|fim_prefix|>def<|fim_suffix|><|fim_middle|>",
    "    indented code\n\tand tabs\n        def  g():  pass",
]

EXTRA_STRINGS = [
    # SentencePiece: the space prefix, runs of spaces and U+2581 itself.
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "\u2581already escaped \u2581\u2581",
    "\t\ttabs\tand\nnew\r\nlines\n\n",
    # Special tokens of both vocabularies, mixed with text.
    "<s>hello</s>",
    "<s> [INST] What is 2+2? [/INST] 4 </s><s>[INST] and 3+3? [/INST]",
    "<unk> <s></s>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|eot_id|>text<|begin_of_text",
    # Byte fallback: characters the vocabularies lack.
    "\U0001F999\U0001F525 \U0001F9D1\u200D\U0001F680 \u2603\ufe0f",
    "\u4e2d\u6587\u5206\u8bcd \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4",
    "\u01c5 \u1e9e \u2c65 \ua7c0 \U0001d4d7\U0001d4ee\U0001d4f5\U0001d4f5\U0001d4f8",
    # LLaMA 3 regex corners: contractions in any case, digit groups, newlines.
    "I'M SURE YOU'RE RIGHT, WE'LL SEE. He'S, they'Ve, it'D",
    "1234567 12 123456789012 3.14159",
    "a\n\n\n b \r\n\r\n c  \n  d",
    "!!!\n\n?? ...\r\n",
    # llama.cpp's "default" regexes: punctuation runs, symbols, digit groups.
    "say (hi), ok?! \"quoted\" [x] {y} a_b a-b a/b @home #tag 50% & *",
    "a $+<=>^~| `b` c$d e+f 1+1=2 x<y>z ^^ ~~ ||",
    "\u00abx\u00bb \u201cq\u201d \u2014 \u2026 \u00bfqu\u00e9? \u00a1s\u00ed! \u20ac5 \u00a3 \u00a7 \u00b6",
    "n 1234567 12 1234 12345678901 0.5 1,000,000 -42 +7",
    "\u0661\u0662\u066334567 \u0967\u0968\u0969 \u2460\u2461 \u00bd",
    "a   (b)   c  .  d\t!\n?",
    "def f(x):\n    return x**2 + 3*x - 1  # comment\n",
]



class Vocab:
    def __init__(self, path):
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        if not self.model:
            sys.exit("cannot load " + path)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)

    def tokenize(self, text, parse_special):
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, cap, False, parse_special)
        assert n >= 0, n
        return list(buf[:n])

    def pieces(self, ids):
        out = b""
        buf = ctypes.create_string_buffer(256)
        for i in ids:
            n = llama_cpp.llama_token_to_piece(self.vocab, i, buf, len(buf), 0, True)
            out += buf.raw[:n]
        return out


def test_strings(vocab_dir):
    """llama.cpp's own test strings (test-tokenizer-0's .inp format)."""
    with open(os.path.join(vocab_dir, "ggml-vocab-llama-bpe.gguf.inp"), encoding="utf-8") as f:
        return f.read().split("\n__ggml_vocab_test__\n")


def write(fixture, path, out, extra):
    v = Vocab(path)
    entries = []
    for text in STRINGS + EXTRA_STRINGS + extra:
        for parse_special in (False, True):
            ids = v.tokenize(text, parse_special)
            entries.append({"text": text, "parse_special": parse_special, "ids": ids,
                            "decoded_hex": v.pieces(ids).hex()})
    doc = {
        "oracle": "llama-cpp-python %s (llama.cpp) C API on a vocab_only model: "
                  "llama_tokenize(text, add_special=False, parse_special); decoded_hex = "
                  "llama_token_to_piece(id, lstrip=0, special=True) joined"
                  % llama_cpp.__version__,
        "llama_cpp_python_version": llama_cpp.__version__,
        "fixture": fixture,
        "vocab": os.path.basename(path),
        "vocab_sha256": sha256(path),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(v.vocab)),
        "bos_id": llama_cpp.llama_vocab_bos(v.vocab),
        "eos_id": llama_cpp.llama_vocab_eos(v.vocab),
        "entries": entries,
    }
    header = json.dumps({k: v for k, v in doc.items() if k != "entries"}, ensure_ascii=False,
                        indent=1)
    lines = [json.dumps(e, ensure_ascii=False) for e in entries]
    with open(out, "w", encoding="utf-8") as f:
        f.write(header[:-2] + ',\n "entries": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")
    print("wrote %d entries to %s" % (len(entries), out))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.argv[1:] == ["--models"]:
        models_dir = os.path.join(here, "..", "..", "models")
        for fixture, name in MODEL_VOCABS.items():
            write(fixture, os.path.join(models_dir, name),
                  os.path.join(here, "vocab_golden_%s.json" % fixture),
                  test_strings(os.path.join(models_dir, "vocab")) + MODEL_STRINGS)
        return
    vocab_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "models",
                                                                   "vocab")
    for fixture, name in FIXTURES.items():
        extra = test_strings(vocab_dir) if fixture in WITH_TEST_STRINGS else []
        write(fixture, os.path.join(vocab_dir, name),
              os.path.join(here, "vocab_golden_%s.json" % fixture), extra)


if __name__ == "__main__":
    main()
