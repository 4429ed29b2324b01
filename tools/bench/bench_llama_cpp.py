#!/usr/bin/env python3
"""The peer side of `pdserve bench-engine`: llama.cpp (through
llama-cpp-python) on the same GGUF, same tests, same thread counts.

  pp<N>        one prompt of N tokens in one llama_decode (n_batch = N)
  tg<N>        N single-token decode steps after a --context-token prompt
               (16 by default)
  decode_b<B>  B sequences (--context-token prompts) decoding together, one
               llama_decode per step with B tokens (llama.cpp's batched mode)

Prompts are the same deterministic pseudo-random token ids pdserve uses.
Each test is repeated and the best run reported, as pdserve does.
Usage: python3 tools/bench/bench_llama_cpp.py --model M [--threads 1,2] [--json out]
"""
import argparse
import json
import time

import llama_cpp as L
import numpy as np


def synthetic_prompt(n, vocab, salt):
    x = (2463534242 ^ salt) & 0xFFFFFFFF
    out = []
    for _ in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(100 + x % (vocab - 200))
    return out


def clear_kv(ctx):
    # 0.3.7 has llama_kv_cache_clear; later versions clear the context's memory.
    if hasattr(L, "llama_kv_cache_clear"):
        L.llama_kv_cache_clear(ctx)
    else:
        L.llama_memory_clear(L.llama_get_memory(ctx), True)


class Runner:
    def __init__(self, model, threads, n_seq, n_ctx, n_batch):
        p = L.llama_context_default_params()
        p.n_ctx = n_ctx
        p.n_batch = n_batch
        p.n_ubatch = n_batch
        p.n_seq_max = n_seq
        p.n_threads = threads
        p.n_threads_batch = threads
        self.ctx = L.llama_init_from_model(model, p)
        self.batch = L.llama_batch_init(n_batch, 0, n_seq)

    def close(self):
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)

    def decode(self, items):
        """items: list of (token, pos, seq, want_logits)."""
        b = self.batch
        b.n_tokens = len(items)
        for i, (tok, pos, seq, logits) in enumerate(items):
            b.token[i] = tok
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = 1 if logits else 0
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def argmax(self, i, vocab):
        ptr = L.llama_get_logits_ith(self.ctx, i)
        return int(np.ctypeslib.as_array(ptr, shape=(vocab,)).argmax())


def run_batch(r, vocab, batch, prompt_len, steps):
    """Returns (prefill seconds, decode seconds) for `batch` sequences."""
    clear_kv(r.ctx)
    t0 = time.perf_counter()
    last = []
    for s in range(batch):
        p = synthetic_prompt(prompt_len, vocab, s)
        r.decode([(t, i, s, i == prompt_len - 1) for i, t in enumerate(p)])
        last.append(r.argmax(prompt_len - 1, vocab))
    t1 = time.perf_counter()
    pos = prompt_len
    for _ in range(steps):
        r.decode([(last[s], pos, s, True) for s in range(batch)])
        last = [r.argmax(s, vocab) for s in range(batch)]
        pos += 1
    return t1 - t0, time.perf_counter() - t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--batches", default="1,4,8,16")
    ap.add_argument("--batch_tokens", type=int, default=64)
    ap.add_argument("--context", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="")
    a = ap.parse_args()

    L.llama_backend_init()
    mp = L.llama_model_default_params()
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    batches = [int(b) for b in a.batches.split(",")]
    results = []
    for threads in [int(t) for t in a.threads.split(",")]:
        # The unified KV cache holds every sequence's context and steps.
        n_ctx = max(4096, a.pp, max(batches) * (a.context + max(a.tg, a.batch_tokens) + 1))
        r = Runner(model, threads, max(batches), n_ctx, max(512, a.pp, a.context))
        best_pp = max(a.pp / run_batch(r, vocab, 1, a.pp, 0)[0] for _ in range(a.repeats))
        best_tg = max(a.tg / run_batch(r, vocab, 1, a.context, a.tg)[1] for _ in range(a.repeats))
        results.append({"test": f"pp{a.pp}", "threads": threads, "tokens_per_s": best_pp})
        results.append({"test": f"tg{a.tg}", "threads": threads, "tokens_per_s": best_tg})
        for b in batches:
            best = max(b * a.batch_tokens / run_batch(r, vocab, b, a.context, a.batch_tokens)[1]
                       for _ in range(a.repeats))
            results.append({"test": f"decode_b{b}", "threads": threads, "tokens_per_s": best})
        r.close()
    print(f"{'test':<14} {'threads':>8} {'tokens/s':>12}")
    for x in results:
        print(f"{x['test']:<14} {x['threads']:>8} {x['tokens_per_s']:>12.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"peer": "llama.cpp via llama-cpp-python " + L.__version__,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
