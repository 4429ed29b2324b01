#!/usr/bin/env python3
"""Writes tests/data/quant_golden.json: ggml's own decoding of random
Q5_0, Q5_1 and Q5_K rows, for the formats without a hand-written decoder in
tests/unit/quant_formats_test.cc.

The oracle is gguf-py (the `gguf` package that ships with llama.cpp; its
gguf.quants is a numpy port of ggml's dequantize_row_* functions). Each row
is random bytes whose f16 scale fields are set to small positive values
(random ones would include NaN/Inf); the file stores the bytes and the
float32 values, both hex-encoded, so the test can compare bit for bit.

Usage: python3 tests/data/make_quant_golden.py
"""

import importlib.metadata
import json
import os

import gguf
import numpy as np
from gguf.quants import dequantize

N = 512  # elements per row: 16 legacy blocks, 2 K-quant super-blocks
ROWS = 3
# type -> (block bytes, byte offsets of its f16 scale fields)
LAYOUTS = {
    "Q5_0": (gguf.GGMLQuantizationType.Q5_0, 22, [0]),
    "Q5_1": (gguf.GGMLQuantizationType.Q5_1, 24, [0, 2]),
    "Q5_K": (gguf.GGMLQuantizationType.Q5_K, 176, [0, 2]),
}


def main():
    rng = np.random.default_rng(1234)
    entries = []
    for name, (qtype, block_bytes, scale_offsets) in LAYOUTS.items():
        block_elems = gguf.GGML_QUANT_SIZES[qtype][0]
        for _ in range(ROWS):
            raw = rng.integers(0, 256, size=(N // block_elems) * block_bytes, dtype=np.uint8)
            blocks = raw.reshape(-1, block_bytes)
            for off in scale_offsets:
                scales = rng.uniform(0.001, 0.05, size=blocks.shape[0]).astype(np.float16)
                blocks[:, off:off + 2] = scales.view(np.uint8).reshape(-1, 2)
            values = dequantize(blocks.reshape(-1), qtype).astype(np.float32).reshape(-1)
            assert values.size == N and np.all(np.isfinite(values))
            entries.append({"type": name, "n": N, "bytes_hex": blocks.tobytes().hex(),
                            "f32_hex": values.astype("<f4").tobytes().hex()})
    doc = {
        "oracle": "gguf-py %s gguf.quants.dequantize (numpy port of ggml's dequantize_row_*)"
                  % importlib.metadata.version("gguf"),
        "command": "python3 tests/data/make_quant_golden.py",
        "entries": entries,
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant_golden.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote %d rows to %s" % (len(entries), out))


if __name__ == "__main__":
    main()
