#!/usr/bin/env python3
"""Dumps llama.cpp's logits after each of the first N prompt tokens of a case
in golden_greedy.json, evaluating one token per llama_decode (the same
parameters as make_golden.py, AMX shim included).

Output: OUT holds N x n_vocab float32 (native byte order), OUT.json the
tokens. tests/golden/llama_cpp_golden_test.cc (PrefixLogitsEqualLlamaCppDump,
PDSERVE_LLAMA_PREFIX_LOGITS=OUT) checks our logits against it bit for bit.
The dump is 192 KiB per token, too big to keep in the tree.

Usage:
  python3 tests/data/dump_llama_logits.py CASE N OUT [--model PATH]
"""

import argparse
import json
import os
import sys

import numpy as np

import make_golden


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("case")
  parser.add_argument("n", type=int)
  parser.add_argument("out")
  parser.add_argument("--model", default=make_golden.DEFAULT_MODEL)
  args = parser.parse_args()
  make_golden.reexec_without_amx()

  here = os.path.dirname(os.path.abspath(__file__))
  with open(os.path.join(here, "golden_greedy.json"), encoding="utf-8") as f:
    cases = json.load(f)["cases"]
  tokens = next(c for c in cases if c["name"] == args.case)["prompt_tokens"]
  tokens = tokens[:args.n]
  llm, buffers = make_golden.load_model(args.model, make_golden.LLAMA_PARAMS)
  if any("AMX" in b for b in buffers):
    sys.exit(f"weights are in an AMX buffer ({buffers}); dump unusable")
  llm.reset()
  rows = []
  for t in tokens:
    llm.eval([t])
    rows.append(make_golden.last_logits(llm))
  np.stack(rows).astype(np.float32).tofile(args.out)
  with open(args.out + ".json", "w", encoding="utf-8") as f:
    json.dump({"case": args.case, "tokens": tokens,
               "llama_params": make_golden.LLAMA_PARAMS}, f)
  print(f"wrote {len(rows)} x {llm.n_vocab()} logits to {args.out}")


if __name__ == "__main__":
  main()
