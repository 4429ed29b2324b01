#!/usr/bin/env python3
"""Speculative decoding, pdserve against llama.cpp's llama-server, on the chat
workloads of `pdserve bench --workload` (tools/bench/bench_conversation.h), in one
run on one machine:

  code-edit  rename a parameter in 24 short Python functions
  summary    summarise a passage, quoting it word for word
  chat       a multi-turn chat whose last turn asks to restate an answer
  no-copy    a story: nothing to copy, the cost of drafts that fail; greedy
             decoding of a small model falls into loops over a long answer
             (which then copy well), so it also runs sampled (T = 0.8), and
             at T = 1.5, where the text is close to random and drafts fail:
             the floor of what speculating costs

Servers, each started in turn with the same model and threads:
  pdserve       `pdserve up` (one prefill, one decode worker, OpenAI API)
                with --speculative=false and =true
  llama-server  the C++ server of the pinned llama.cpp
                (tools/bench/build-llama-server.sh), --parallel = batch, with
                --spec-type none, ngram-simple and ngram-map-k

Every server gets the same requests from `pdserve bench --target=openai`
(greedy, natural end or --max_tokens): one stream at a time (decode rate =
1000 / mean TPOT, so prompt processing is not in it) and `--batch` streams at
once (output tokens/s of the whole run and mean TPOT). Kept drafts come from
pdserve's decode-worker metrics and llama-server's log. Prints markdown; a
peer's run whose requests fail (time out under load) shows as nan.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

# (row name, --workload, extra pdserve bench flags)
WORKLOADS = [("code-edit", "code-edit", []), ("summary", "summary", []), ("chat", "chat", []),
             ("no-copy", "no-copy", []),
             ("no-copy (T=0.8)", "no-copy", ["--temperature", "0.8", "--top_p", "0.95"]),
             ("random text (T=1.5)", "no-copy", ["--temperature", "1.5"])]


def wait_ready(url, proc, what):
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready after 300 s")


class Pdserve:
    def __init__(self, args, speculative, tmp):
        self.name, self.mode = "pdserve", "on" if speculative else "off"
        self.port = 18300 + speculative
        self.log_dir = os.path.join(tmp, f"pdserve-{self.mode}")
        self.out = open(os.path.join(tmp, f"pdserve-{self.mode}.out"), "w")
        self.proc = subprocess.Popen(
            [args.pdserve, "up", "--model", args.model, "--threads", str(args.threads),
             "--router_port", "0", "--http_listen", f"127.0.0.1:{self.port}",
             # The same KV room as llama-server's context (blocks of 16 tokens).
             "--kv_blocks", str(args.ctx_per_stream * max(1, args.batch) // 16),
             f"--speculative={str(speculative).lower()}", "--worker_metrics",
             "--log_dir", self.log_dir], stdout=self.out, stderr=self.out)
        wait_ready(f"http://127.0.0.1:{self.port}/v1/models", self.proc, "pdserve up")
        with open(os.path.join(self.log_dir, "decode-0.port")) as f:
            self.metrics = int(re.search(r"metrics=(\d+)", f.read()).group(1))

    def drafts(self):
        """(verified, kept) draft tokens so far, all sources."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics") as r:
            text = r.read().decode()
        total = lambda name: sum(float(v) for v in re.findall(
            rf"^pdserve_decode_spec_{name}_total{{[^}}]*}} (\S+)$", text, re.M))
        return total("draft_tokens"), total("accepted_tokens")

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=60)


class LlamaServer:
    def __init__(self, args, spec_type, tmp):
        self.name, self.mode = "llama-server", spec_type
        self.port = 18310
        self.log = os.path.join(tmp, f"llama-server-{spec_type}.log")
        self.out = open(self.log, "w")
        slots = max(1, args.batch)
        self.proc = subprocess.Popen(
            [args.llama_server, "-m", args.model, "-t", str(args.threads), "-tb",
             str(args.threads), "-c", str(args.ctx_per_stream * slots), "-np", str(slots),
             "--host", "127.0.0.1", "--port", str(self.port), "--spec-type", spec_type],
            stdout=self.out, stderr=self.out)
        wait_ready(f"http://127.0.0.1:{self.port}/health", self.proc, "llama-server")

    def drafts(self):
        with open(self.log, errors="replace") as f:
            pairs = re.findall(r"draft acceptance = \S+ \(\s*(\d+) accepted /\s*(\d+) generated\)",
                               f.read())
        return sum(int(g) for _, g in pairs), sum(int(a) for a, _ in pairs)

    def stop(self):
        if self.proc.poll() is not None:
            # It died during the run: its last words go with the results.
            with open(self.log, errors="replace") as f:
                print("".join(f.readlines()[-15:]), file=sys.stderr)
            return
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def bench(args, server, workload, streams, tmp):
    row, name, extra = workload
    out = os.path.join(tmp, f"{server.name}-{server.mode}-{len(row)}-{name}-{streams}.json")
    before = server.drafts()
    try:
        subprocess.run(
            [args.pdserve, "bench", "--model", args.model, "--target", "openai", "--address",
             f"127.0.0.1:{server.port}", "--workload", name, "--max_concurrency", str(streams),
             "--num_requests", str(args.requests if streams == 1 else streams),
             "--output_len", str(args.max_tokens), "--seed", str(args.seed),
             "--json_out", out] + extra,
            check=True, stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError as e:
        # No request succeeded: say whether the server itself is gone.
        code = server.proc.poll()
        state = "still running" if code is None else f"exited with {code}"
        raise RuntimeError(f"{server.name} {server.mode} {row}: bench exited with "
                           f"{e.returncode}; the server {state}") from e
    after = server.drafts()
    with open(out) as f:
        s = json.load(f)["summary"]
    if s["failed"]:
        raise RuntimeError(f"{server.name} {server.mode} {row}: {s['error_examples']}")
    drafted, kept = after[0] - before[0], after[1] - before[1]
    return {"tokens": s["output_tokens"] / s["completed"],
            "decode": 1000.0 / s["tpot_ms"]["mean"], "tpot": s["tpot_ms"]["mean"],
            "throughput": s["output_token_throughput"],
            "kept": kept / drafted if drafted else None}


# Stands in for a run that failed: its cells print as "nan" (kept as "–").
FAILED = {"tokens": float("nan"), "decode": float("nan"), "tpot": float("nan"),
          "throughput": float("nan"), "kept": None}


def pct(x):
    return "–" if x is None else f"{100 * x:.0f}%"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--pdserve", default="build/bin/pdserve")
    ap.add_argument("--llama_server", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max_tokens", type=int, default=600)
    ap.add_argument("--requests", type=int, default=2, help="single-stream requests per workload")
    ap.add_argument("--batch", type=int, default=8, help="streams at once (0 = skip)")
    ap.add_argument("--ctx_per_stream", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workloads", help="comma-separated row names to run (default: all)")
    ap.add_argument("--systems", help="comma-separated system-mode names to run, e.g. "
                    "llama-server-ngram-map-k (default: all; the others print as nan)")
    ap.add_argument("--json")
    args = ap.parse_args()
    workloads = [w for w in WORKLOADS
                 if not args.workloads or w[0] in args.workloads.split(",")]

    systems = [("pdserve-off", Pdserve, False), ("pdserve-on", Pdserve, True),
               ("llama-server-none", LlamaServer, "none"),
               ("llama-server-ngram-simple", LlamaServer, "ngram-simple"),
               ("llama-server-ngram-map-k", LlamaServer, "ngram-map-k")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for system, make, mode in systems:
            if args.systems and system not in args.systems.split(","):
                continue
            server = make(args, mode, tmp)
            try:
                # Batches compare plain decode with each system's best mode.
                batched = args.batch > 1 and mode != "ngram-simple"
                for w in workloads:
                    for streams in [1] + ([args.batch] if batched else []):
                        key = (server.name, server.mode, w[0], streams)
                        try:
                            results[key] = bench(args, server, w, streams, tmp)
                        except RuntimeError as e:
                            # A peer that fails (its requests time out under
                            # load) is a result too; pdserve failing is not.
                            if server.name == "pdserve":
                                raise
                            results[key] = None
                            print(f"bench-speculative: {e}", file=sys.stderr)
                        # Progress, so a late failure loses nothing measured.
                        print(f"bench-speculative: {key}: {results[key]}", file=sys.stderr)
            finally:
                server.stop()

    r = lambda system, mode, w, n=1: results.get((system, mode, w, n)) or FAILED
    print("Single stream: decode tokens/s (1000 / mean TPOT), kept share of drafted tokens\n")
    print("| workload | tokens | pdserve off | pdserve on | speed-up | kept | llama-server off "
          "| ngram-simple | speed-up | kept | ngram-map-k | speed-up | kept |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w, _, _ in workloads:
        off, on = r("pdserve", "off", w), r("pdserve", "on", w)
        lo = r("llama-server", "none", w)
        ls, lm = r("llama-server", "ngram-simple", w), r("llama-server", "ngram-map-k", w)
        print(f"| {w} | {on['tokens']:.0f} | {off['decode']:.1f} | {on['decode']:.1f} "
              f"| {on['decode'] / off['decode']:.2f}x | {pct(on['kept'])} | {lo['decode']:.1f} "
              f"| {ls['decode']:.1f} | {ls['decode'] / lo['decode']:.2f}x | {pct(ls['kept'])} "
              f"| {lm['decode']:.1f} | {lm['decode'] / lo['decode']:.2f}x | {pct(lm['kept'])} |")
    if args.batch > 1:
        b = args.batch
        print(f"\n{b} streams at once: output tokens/s of the whole run (prompts included), "
              "mean TPOT in ms\n")
        print("| workload | pdserve off | pdserve on | speed-up | TPOT off | TPOT on | kept "
              "| llama-server off | ngram-map-k | speed-up | TPOT off | TPOT ngram-map-k |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for w, _, _ in workloads:
            off, on = r("pdserve", "off", w, b), r("pdserve", "on", w, b)
            lo, lm = r("llama-server", "none", w, b), r("llama-server", "ngram-map-k", w, b)
            print(f"| {w} | {off['throughput']:.1f} | {on['throughput']:.1f} "
                  f"| {on['throughput'] / off['throughput']:.2f}x | {off['tpot']:.1f} "
                  f"| {on['tpot']:.1f} | {pct(on['kept'])} | {lo['throughput']:.1f} "
                  f"| {lm['throughput']:.1f} | {lm['throughput'] / lo['throughput']:.2f}x "
                  f"| {lo['tpot']:.1f} | {lm['tpot']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"system": k[0], "mode": k[1], "workload": k[2], "streams": k[3], **v}
                       for k, v in results.items() if v is not None], f, indent=1)


if __name__ == "__main__":
    main()
