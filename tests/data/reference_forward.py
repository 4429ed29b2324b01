#!/usr/bin/env python3
"""Independent float64 forward pass of SmolLM2 (GGUF, Q4_1/Q8_0/F32 weights
dequantized with numpy) used to audit golden_greedy.json: it reports, for
the first generated step of each case, how far llama.cpp's recorded top-20
logits are from exact arithmetic and whether the argmax agrees.

Expected: differences of a few tenths (llama.cpp quantizes activations to
Q8_1/Q8_0 and stores KV in f16); differences of several logits mean the
oracle is broken (this is how the AMX problem was found).

Usage:
  python3 tests/data/reference_forward.py [--model PATH] [--golden PATH]
      [case names...]   (default: all cases; the 922-token one takes longest)
"""

import argparse
import json
import os
import struct

import numpy as np

N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM = 30, 9, 3, 64
RMS_EPS, ROPE_BASE = 1e-5, 100000.0


def read_gguf(path):
  buf = open(path, 'rb').read(); off = 0
  def u(fmt):
    nonlocal off; v = struct.unpack_from('<' + fmt, buf, off); off += struct.calcsize('<' + fmt); return v[0]
  def s():
    nonlocal off; n = u('Q'); v = buf[off:off + n].decode('utf-8', 'replace'); off += n; return v
  sizes = {0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}
  fmts = {0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'B',10:'Q',11:'q',12:'d'}
  def val(t):
    nonlocal off
    if t == 8: return s()
    if t == 9:
      et = u('I'); n = u('Q')
      if et == 8: return [s() for _ in range(n)]
      off += sizes[et] * n; return None
    return u(fmts[t])
  assert buf[:4] == b'GGUF'; off = 4; u('I'); nt = u('Q'); nkv = u('Q'); md = {}
  for _ in range(nkv):
    k = s(); md[k] = val(u('I'))
  infos = []
  for _ in range(nt):
    name = s(); nd = u('I'); dims = [u('Q') for _ in range(nd)]; t = u('I'); o = u('Q'); infos.append((name, dims, t, o))
  align = md.get('general.alignment', 32); base = (off + align - 1) // align * align
  return buf, md, infos, base

def dequant(buf, base, dims, t, o):
  n = int(np.prod(dims))
  if t == 0: return np.frombuffer(buf, np.float32, n, base + o).astype(np.float64).reshape(dims[::-1])
  if t == 3:
    nb = n // 32; raw = np.frombuffer(buf, np.uint8, nb * 20, base + o).reshape(nb, 20)
    d = raw[:, 0:2].copy().view(np.float16).astype(np.float64); m = raw[:, 2:4].copy().view(np.float16).astype(np.float64)
    qs = raw[:, 4:]; q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float64)
    return (q * d + m).reshape(dims[::-1])
  if t == 8:
    nb = n // 32; raw = np.frombuffer(buf, np.uint8, nb * 34, base + o).reshape(nb, 34)
    d = raw[:, 0:2].copy().view(np.float16).astype(np.float64); q = raw[:, 2:].copy().view(np.int8).astype(np.float64)
    return (q * d).reshape(dims[::-1])
  raise ValueError(t)


def forward_last_logits(w, tokens):
  """Logits of the last position, all in float64."""
  t = len(tokens)
  pos = np.arange(t, dtype=np.float64)

  def rms(x, weight):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + RMS_EPS) * weight

  def rope(x):  # [T, heads, 64]; adjacent pairs (llama.cpp NORM mode)
    ang = pos[:, None] * ROPE_BASE ** (-2 * np.arange(HEAD_DIM // 2) / HEAD_DIM)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out

  x = w["token_embd.weight"][tokens]
  mask = np.triu(np.full((t, t), -np.inf), 1)
  for layer in range(N_LAYER):
    p = f"blk.{layer}."
    h = rms(x, w[p + "attn_norm.weight"])
    q = rope((h @ w[p + "attn_q.weight"].T).reshape(t, N_HEAD, HEAD_DIM))
    k = rope((h @ w[p + "attn_k.weight"].T).reshape(t, N_HEAD_KV, HEAD_DIM))
    v = (h @ w[p + "attn_v.weight"].T).reshape(t, N_HEAD_KV, HEAD_DIM)
    o = np.empty((t, N_HEAD, HEAD_DIM))
    for head in range(N_HEAD):
      g = head // (N_HEAD // N_HEAD_KV)
      s = q[:, head] @ k[:, g].T / np.sqrt(HEAD_DIM) + mask
      s = np.exp(s - s.max(1, keepdims=True))
      o[:, head] = (s / s.sum(1, keepdims=True)) @ v[:, g]
    x = x + o.reshape(t, -1) @ w[p + "attn_output.weight"].T
    h = rms(x, w[p + "ffn_norm.weight"])
    gate = h @ w[p + "ffn_gate.weight"].T
    up = h @ w[p + "ffn_up.weight"].T
    x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
  return rms(x[-1], w["output_norm.weight"]) @ w["token_embd.weight"].T


def main():
  here = os.path.dirname(os.path.abspath(__file__))
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--model", default=os.path.expanduser(
      "~/.cache/pdserve/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
  parser.add_argument("--golden", default=os.path.join(here, "golden_greedy.json"))
  parser.add_argument("cases", nargs="*")
  args = parser.parse_args()

  buf, _, infos, base = read_gguf(args.model)
  w = {name: dequant(buf, base, dims, t, o) for name, dims, t, o in infos}
  cases = json.load(open(args.golden, encoding="utf-8"))["cases"]
  for case in cases:
    if args.cases and case["name"] not in args.cases:
      continue
    ref = forward_last_logits(w, case["prompt_tokens"])
    ids = [e["id"] for e in case["first_step_top20"]]
    got = np.array([e["logit"] for e in case["first_step_top20"]])
    top2 = np.sort(ref)[-2:]
    print(f"{case['name']:24s} T={len(case['prompt_tokens']):4d} "
          f"max|golden-ref|={np.abs(got - ref[ids]).max():.3f} "
          f"argmax golden={ids[0]} ref={int(np.argmax(ref))} "
          f"ref_gap={top2[1] - top2[0]:.3f}", flush=True)


if __name__ == "__main__":
  main()
