#!/usr/bin/env python3
"""Prefix-aware routing against least-loaded and round-robin, for
docs/PERFORMANCE.md: a multi-tenant workload (N system prompts shared by many
users) through router + 1 prefill + 2 decode workers with prefix caches on,
one fresh cluster per policy. Reports the prefix hit rate of each tier (from
the workers' /metrics), TTFT p50/p99 and KV bytes moved per request.

  python3 tools/bench/bench_prefix_routing.py --out /tmp/prefix-routing
"""
import argparse
import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_serving import BIN, MODEL, Cluster, bench, free_port, wait_ready  # noqa: E402


def start(cluster, policy):
    metrics = {}

    def spawn(kind, name, cores):
        port, mport = free_port(), free_port()
        args = [os.path.join(BIN, "pdserve-" + kind), "--model=" + MODEL, "--threads=1",
                f"--listen=127.0.0.1:{port}", f"--worker_id={name}", f"--metrics_port={mport}"]
        if kind == "decode":
            args.append("--kv_listen=127.0.0.1:0")
        cluster.spawn(name, args, cores=cores)
        metrics[name] = mport
        return f"127.0.0.1:{port}"

    prefill = spawn("prefill", "prefill", "0,1")
    decode = [spawn("decode", "decode0", "0"), spawn("decode", "decode1", "1")]
    port = free_port()
    cluster.spawn("router", [os.path.join(BIN, "pdserve-router"), "--model=" + MODEL,
                             f"--listen=127.0.0.1:{port}", "--prefill=" + prefill,
                             "--decode=" + ",".join(decode), f"--policy_decode={policy}",
                             f"--policy_prefill={policy}"])
    return f"127.0.0.1:{port}", metrics


def scrape(port, names):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for n in names:
        m = re.search(r"^" + n + r"(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M)
        out[n] = float(m.group(1)) if m else 0.0
    return out


def hit_rate(metrics, tier):
    hit = lookup = 0.0
    for name, port in metrics.items():
        if not name.startswith(tier):
            continue
        m = scrape(port, [f"pdserve_{tier}_prefix_cache_hit_tokens_total",
                          f"pdserve_{tier}_prefix_cache_lookup_tokens_total"])
        hit += m[f"pdserve_{tier}_prefix_cache_hit_tokens_total"]
        lookup += m[f"pdserve_{tier}_prefix_cache_lookup_tokens_total"]
    return hit / lookup if lookup else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--policies", default="prefix_aware,least_loaded,round_robin")
    ap.add_argument("--prefixes", type=int, default=8)
    ap.add_argument("--prefix_len", type=int, default=256)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    rows = []
    for policy in args.policies.split(","):
        cluster = Cluster(os.path.join(args.out, "logs"))
        try:
            router, metrics = start(cluster, policy)
            wait_ready("router", router, args.out)
            print(f"[prefix-routing] {policy}", file=sys.stderr, flush=True)
            doc = bench("router", router, os.path.join(args.out, policy + ".json"), [
                f"--shared_prefixes={args.prefixes}", f"--shared_prefix_len={args.prefix_len}",
                "--input_len=16:48", "--output_len=16", "--ignore_eos", "--warmup_requests=0",
                f"--max_concurrency={args.concurrency}", f"--num_requests={args.requests}",
                "--seed=3"])
            s = doc["summary"]
            rows.append({"policy": policy, "decode_hit": hit_rate(metrics, "decode"),
                         "prefill_hit": hit_rate(metrics, "prefill"),
                         "ttft_p50": s["ttft_ms"]["p50"], "ttft_p99": s["ttft_ms"]["p99"],
                         "kv_bytes": s["phases_mean"]["kv_transfer_bytes"],
                         "req_s": s["request_throughput"], "failed": s["failed"]})
        finally:
            cluster.close()
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("| policy | decode prefix hit | prefill prefix hit | TTFT p50 (ms) | TTFT p99 (ms) | "
          "KV MB moved / request | req/s | failed |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['policy']} | {100 * r['decode_hit']:.0f}% | {100 * r['prefill_hit']:.0f}% | "
              f"{r['ttft_p50']:.0f} | {r['ttft_p99']:.0f} | {r['kv_bytes'] / 1e6:.2f} | "
              f"{r['req_s']:.2f} | {r['failed']} |")


if __name__ == "__main__":
    main()
