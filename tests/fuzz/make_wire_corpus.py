#!/usr/bin/env python3
"""Writes the seed corpora of kv_frame_fuzz and request_fuzz: valid and
near-valid messages, hand-encoded in protobuf wire format (no protobuf
package needed), so the fuzzer starts from inputs that reach deep checks.

  python3 tests/fuzz/make_wire_corpus.py tests/fuzz/corpus
"""
import os
import struct
import sys


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    return varint(num << 3 | wire) + payload


def vint(num, n):
    return field(num, 0, varint(n))


def ldel(num, data):
    return field(num, 2, varint(len(data)) + data)


def f32(num, x):
    return field(num, 5, struct.pack("<f", x))


def framed(msg):
    return struct.pack("<I", len(msg)) + msg


BLOCK = 12288  # SmolLM2 layer-block bytes, as in kv_frame_fuzz.cc


def frames():
    layer = (vint(1, 7) + vint(2, 1) + vint(3, 1) + vint(4, 0) +
             ldel(5, b"".join(varint(i) for i in (3, 4))) + vint(6, 2 * BLOCK))
    commit = vint(1, 7) + vint(2, 1) + vint(3, 2) + vint(7, 30) + vint(8, 60 * BLOCK) + vint(9, 42)
    abort = vint(1, 7) + vint(2, 2) + vint(3, 3) + ldel(10, b"client cancelled")
    ack_ok = vint(1, 7) + vint(2, 1) + vint(3, 1)
    ack_err = vint(1, 7) + vint(2, 1) + vint(5, 9) + ldel(4, b"stale epoch") + vint(6, 1)
    # CUDA IPC: the attach, then a layer whose bytes the receiver pulls
    # (payload_path 1, src_blocks), so no payload follows on the wire.
    attach = vint(3, 4) + ldel(13, b"\x11" * 64) + vint(14, 1024 * 30 * BLOCK) + vint(15, 1024)
    ipc_layer = layer + vint(11, 1) + ldel(12, b"".join(varint(i) for i in (9, 10)))
    return {
        "layer_then_commit": framed(layer) + b"\x00" * (2 * BLOCK) + framed(commit),
        "ipc_attach_layer_commit": framed(attach) + framed(ipc_layer) + framed(commit),
        "ipc_src_mismatch": framed(layer + vint(11, 1) + ldel(12, varint(9))),
        "ipc_attach_without_handle": framed(vint(3, 4) + vint(15, 8)),
        "unknown_payload_path": framed(layer + vint(11, 7)),
        "abort": framed(abort),
        "short_payload": framed(layer) + b"\x01" * 100,
        "payload_mismatch": framed(layer[:-3] + vint(6, BLOCK)),
        "huge_length": struct.pack("<I", 0xFFFFFFF0) + layer,
        "zero_length": struct.pack("<I", 0),
        "commit_with_payload": framed(commit + vint(6, 4)) + b"abcd",
        "unknown_kind": framed(vint(1, 1) + vint(3, 9)),
        "ack_ok": ack_ok,
        "ack_error": ack_err,
    }


def requests():
    sampling = f32(1, 0.7) + vint(2, 40) + f32(3, 0.9) + vint(9, 1234)
    chat = ldel(2, ldel(1, ldel(1, b"user") + ldel(2, b"Hello there")))
    return {
        "text": ldel(1, b"Once upon a time") + vint(5, 16),
        "chat_sampled": chat + ldel(4, sampling) + vint(5, 32) + ldel(6, b"\n\n"),
        "tokens": ldel(3, ldel(1, b"".join(varint(i) for i in (5, 6, 7, 300)))) + vint(5, 8),
        "bad_token": ldel(3, ldel(1, varint(1 << 40))) + vint(5, 8),
        "negative_max": ldel(1, b"hi") + vint(5, -1),
        "nan_temperature": ldel(1, b"hi") + ldel(4, field(1, 5, b"\x00\x00\xc0\x7f")),
        "too_long": ldel(1, b"ab " * 400) + vint(5, 100),
        "many_stops": ldel(1, b"hi") + b"".join(ldel(6, b"x") for _ in range(20)),
        "request_id": ldel(1, b"hi") + ldel(8, b"bad id with spaces") + vint(9, 1),
        "empty": b"",
    }


def main():
    root = sys.argv[1]
    for name, corpus in (("kv_frame", frames()), ("request", requests())):
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        for key, data in corpus.items():
            with open(os.path.join(d, key), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
