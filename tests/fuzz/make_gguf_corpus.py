#!/usr/bin/env python3
"""Writes the seed corpus for tests/fuzz/gguf_fuzz.cc.

Small valid GGUF files (every value type, several tensor types, custom
alignment, a llama-like tokenizer layout) give the fuzzer the structure to
mutate; small invalid ones put it next to each rejection path. Every file is
under 4 KB. Pure Python (struct only) so it runs anywhere:

    python3 tests/fuzz/make_gguf_corpus.py [OUT_DIR]

OUT_DIR defaults to tests/fuzz/corpus/gguf next to this script. The output
is deterministic, so regenerating it leaves git clean.
"""

import os
import struct
import sys

# gguf_type ids
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
              F32: "<f", BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id -> (block elements, block bytes)
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
        "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144), "Q6_K": (14, 256, 210),
        "BF16": (30, 1, 2)}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return gstr(v)
    if vtype == ARRAY:
        elem, items = v
        out = struct.pack("<IQ", elem, len(items))
        return out + b"".join(value(elem, x) for x in items)
    return struct.pack(SCALAR_FMT[vtype], v)


def kv(key, vtype, v):
    return gstr(key) + struct.pack("<I", vtype) + value(vtype, v)


def pad(b, align):
    return b + b"\0" * ((-len(b)) % align)


def tensor_bytes(type_name, dims, seed):
    _, blk, size = GGML[type_name]
    n = 1
    for d in dims:
        n *= d
    nbytes = n // blk * size
    return bytes((i * 31 + seed) & 0xFF for i in range(nbytes))


def gguf(kvs, tensors=(), version=3, align=32):
    """kvs: list of encoded kv bytes; tensors: list of (name, type, dims)."""
    infos, data, offset = b"", b"", 0
    for i, (name, type_name, dims) in enumerate(tensors):
        raw = tensor_bytes(type_name, dims, i)
        infos += gstr(name) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", GGML[type_name][0], offset)
        data += pad(raw, align)
        offset += len(pad(raw, align))
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    return pad(head + b"".join(kvs) + infos, align) + data


def raw_tensor_file(info_tail, data_len=64, name="w"):
    """One tensor whose info after the name is given raw (for invalid shapes)."""
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + gstr(name) + info_tail
    return pad(head, 32) + b"\x5a" * data_len


def valid_files():
    all_types = [
        kv("t.u8", U8, 200), kv("t.i8", I8, -100), kv("t.u16", U16, 60000),
        kv("t.i16", I16, -30000), kv("t.u32", U32, 4000000000), kv("t.i32", I32, -7),
        kv("t.f32", F32, 1.5), kv("t.bool", BOOL, 1), kv("t.str", STRING, "hello"),
        kv("t.u64", U64, 1 << 63), kv("t.i64", I64, -(1 << 60)), kv("t.f64", F64, 0.1),
        kv("t.strs", ARRAY, (STRING, ["a", "", "ccc"])),
        kv("t.ints", ARRAY, (I32, [1, -2, 3])), kv("t.u64s", ARRAY, (U64, [1, 1 << 63])),
        kv("t.floats", ARRAY, (F32, [0.5, -1.25])), kv("t.f64s", ARRAY, (F64, [2.0])),
        kv("t.bools", ARRAY, (BOOL, [0, 1])), kv("t.empty", ARRAY, (U8, [])),
    ]
    tensors = [("w.f32", "F32", [4, 2]), ("w.f16", "F16", [3]), ("w.q4_0", "Q4_0", [32, 2]),
               ("w.q4_1", "Q4_1", [64]), ("w.q8_0", "Q8_0", [32, 1, 2]),
               ("w.bf16", "BF16", [2, 2, 2, 2]), ("w.q4_k", "Q4_K", [256])]
    vocab = ["<|endoftext|>", "a", "b", "ab", "\u0120the", "<|im_start|>", "<|im_end|>"]
    llama = [
        kv("general.architecture", STRING, "llama"), kv("general.name", STRING, "tiny"),
        kv("llama.block_count", U32, 1), kv("llama.embedding_length", U32, 64),
        kv("llama.attention.head_count", U32, 2),
        kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        kv("tokenizer.ggml.model", STRING, "gpt2"), kv("tokenizer.ggml.pre", STRING, "smollm"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, vocab)),
        kv("tokenizer.ggml.token_type", ARRAY, (I32, [3, 1, 1, 1, 1, 3, 3])),
        kv("tokenizer.ggml.merges", ARRAY, (STRING, ["a b"])),
        kv("tokenizer.ggml.bos_token_id", U32, 5),
    ]
    llama_tensors = [("token_embd.weight", "Q8_0", [64, 7]), ("output_norm.weight", "F32", [64]),
                     ("blk.0.attn_q.weight", "Q4_1", [64, 4])]
    return {
        "valid_empty_v3.gguf": gguf([]),
        "valid_empty_v2.gguf": gguf([], version=2),
        "valid_all_value_types.gguf": gguf(all_types),
        "valid_tensors.gguf": gguf([kv("general.name", STRING, "t")], tensors),
        "valid_alignment_64.gguf": gguf([kv("general.alignment", U32, 64)], tensors[:3], align=64),
        "valid_llama_like.gguf": gguf(llama, llama_tensors),
    }


def invalid_files():
    one_f32 = gguf([kv("general.name", STRING, "x" * 40)], [("w", "F32", [8])])
    return {
        "bad_magic.gguf": b"GGUX" + one_f32[4:],
        "bad_version_1.gguf": gguf([], version=1),
        "big_endian.gguf": b"GGUF" + struct.pack(">IQQ", 3, 0, 0),
        "truncated_header.gguf": one_f32[:20],
        "truncated_kv.gguf": one_f32[:60],
        "truncated_tensor_info.gguf": one_f32[:one_f32.index(gstr("w")) + 9 + 4 + 4],
        "truncated_data.gguf": one_f32[:-8],
        "string_past_eof.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstr("k")
        + struct.pack("<IQ", STRING, 1000) + b"abc",
        "huge_tensor_count.gguf": b"GGUF" + struct.pack("<IQQ", 3, 2**64 - 1, 0) + b"\0" * 40,
        "huge_array_count.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstr("a")
        + struct.pack("<IIQ", ARRAY, U32, 2**61) + b"\0" * 16,
        "nested_array.gguf": gguf([gstr("a") + struct.pack("<IIQIQ", ARRAY, ARRAY, 1, U8, 0)]),
        "unknown_value_type.gguf": gguf([gstr("a") + struct.pack("<IQ", 13, 0)]),
        "duplicate_key.gguf": gguf([kv("a", U32, 1), kv("a", U32, 2)]),
        "alignment_48.gguf": gguf([kv("general.alignment", U32, 48)]),
        "alignment_i32.gguf": gguf([kv("general.alignment", I32, 32)]),
        "unknown_tensor_type.gguf": raw_tensor_file(struct.pack("<IQIQ", 1, 32, 4, 0)),
        "ndims_0.gguf": raw_tensor_file(struct.pack("<IIQ", 0, 0, 0)),
        "ndims_5.gguf": raw_tensor_file(struct.pack("<I5QIQ", 5, 1, 1, 1, 1, 1, 0, 0)),
        "dim_overflow.gguf": raw_tensor_file(struct.pack("<I2QIQ", 2, 2**32, 2**32, 0, 0)),
        "ne0_not_block_multiple.gguf": raw_tensor_file(struct.pack("<IQIQ", 1, 48, 3, 0)),
        "misaligned_offset.gguf": raw_tensor_file(struct.pack("<IQIQ", 1, 4, 0, 16)),
        "data_past_eof.gguf": raw_tensor_file(struct.pack("<IQIQ", 1, 8, 0, 64)),
        "name_too_long.gguf": raw_tensor_file(struct.pack("<IQIQ", 1, 8, 0, 0), name="n" * 65),
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus", "gguf")
    os.makedirs(out_dir, exist_ok=True)
    files = {**valid_files(), **invalid_files()}
    for name, data in sorted(files.items()):
        assert len(data) < 4096, (name, len(data))
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(files)} files to {out_dir}")


if __name__ == "__main__":
    main()
