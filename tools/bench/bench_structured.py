#!/usr/bin/env python3
"""Structured output's cost, pdserve beside llama-server, for docs/PERFORMANCE.md.

Starts pdserve (router + 1 prefill worker on core 0 + 1 decode worker on core
1) and llama.cpp's llama-server (cores 0-1, 2 threads, 8 slots; built from the
llama-cpp-python 0.3.36 sdist by tools/bench/build-llama-server.sh) on the same
GGUF, one after the other, and sends each the same greedy chat requests over
the OpenAI API: free text, then `response_format` json_schema (a three-field
person object), at concurrency 1 and 8. Reports output tokens/s and mean
end-to-end latency per case, and from pdserve's /metrics the admission compile
time (first compile of the schema, and the mean over all requests, cache hits
included) and the decode worker's mean logits-mask cost per token.

  python3 tools/bench/bench_structured.py [--model models/X.gguf] [--requests 16]
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_serving as bs  # noqa: E402  (process helpers shared with the serving bench)

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "city": {"type": "string"}},
          "required": ["name", "age", "city"]}
NAMES = ["Alice", "Bob", "Chen", "Dana", "Emil", "Farah", "Goro", "Hana", "Ivan", "Jun",
         "Kofi", "Lena", "Mateo", "Nia", "Omar", "Pia"]


def post(address, body, timeout=600):
    req = urllib.request.Request(f"http://{address}/v1/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def request_body(i, schema, max_tokens):
    name = NAMES[i % len(NAMES)]
    body = {"messages": [{"role": "user", "content":
                          f"Describe {name}, a made-up person, with a name, an age and a city, "
                          f"as JSON."}],
            "temperature": 0, "max_tokens": max_tokens, "seed": 1}
    if schema:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "person", "schema": SCHEMA}}
    return body


def run_case(address, schema, concurrency, requests, max_tokens):
    bodies = [request_body(i, schema, max_tokens) for i in range(requests)]
    start = time.time()
    latencies, tokens, rates = [], 0, []
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        def one(body):
            t = time.time()
            r = post(address, body)
            return time.time() - t, r
        for latency, r in pool.map(one, bodies):
            latencies.append(latency)
            tokens += r["usage"]["completion_tokens"]
            rates.append(decode_rate(r))
            if schema:
                doc = json.loads(r["choices"][0]["message"]["content"])  # must parse
                assert set(doc) == {"name", "age", "city"}, doc
    wall = time.time() - start
    rates = [x for x in rates if x > 0]
    return {"tokens_per_s": tokens / wall, "mean_e2e_s": sum(latencies) / len(latencies),
            "tokens": tokens, "stream_decode_tok_s": sum(rates) / max(len(rates), 1)}


def decode_rate(r):
    """One stream's decode speed after its first token, from the answer's
    own timings (pdserve: ttft/e2e; llama-server: predicted_*)."""
    t = r.get("timings", {})
    if "predicted_ms" in t and t.get("predicted_n", 0) > 1:
        return 1000.0 * (t["predicted_n"] - 1) / max(t["predicted_ms"], 1e-9)
    n = r["usage"]["completion_tokens"]
    if "e2e_ms" in t and n > 1 and t["e2e_ms"] > t["ttft_ms"]:
        return 1000.0 * (n - 1) / (t["e2e_ms"] - t["ttft_ms"])
    return 0.0


def scrape(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^" + re.escape(name) + r" ([0-9.eE+-]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def wait_http(address, timeout_s=180):
    deadline = time.time() + timeout_s
    while True:
        try:
            post(address, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                           "temperature": 0}, timeout=30)
            return
        except Exception:  # noqa: BLE001 - not up yet
            if time.time() > deadline:
                raise
            time.sleep(1)


def start_pdserve(cluster, metrics):
    prefill = bs.worker(cluster, "prefill", 0)
    decode = bs.worker(cluster, "decode", 1, [f"--metrics_port={metrics['decode']}"])
    http = bs.free_port()
    cluster.spawn("router", [os.path.join(bs.BIN, "pdserve-router"), "--model=" + bs.MODEL,
                             f"--listen=127.0.0.1:{bs.free_port()}", "--decode=" + decode,
                             "--prefill=" + prefill, f"--http_listen=127.0.0.1:{http}",
                             f"--metrics_port={metrics['router']}"])
    return f"127.0.0.1:{http}"


def start_llama_server(cluster, log_dir):
    """llama-server; on a CPU with AMX with AMX refused, as the engine bench
    runs the peer (its AMX path crashes on these VMs: tools/bench/bench-engine.sh)."""
    with open("/proc/cpuinfo") as f:
        amx = "amx_tile" in f.read()
    if not amx:
        return bs.start_llama_server(cluster)
    preload = os.path.join(log_dir, "no_amx.so")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC",
                    os.path.join(bs.ROOT, "tests", "data", "no_amx_preload.c"), "-o", preload,
                    "-ldl"], check=True)
    os.environ["LD_PRELOAD"] = preload
    try:
        return bs.start_llama_server(cluster)
    finally:
        del os.environ["LD_PRELOAD"]


def cases(address, args, on_first_schema=None):
    out = {}
    for concurrency in (1, 8):
        for schema in (False, True):
            key = f"{'schema' if schema else 'free'} c{concurrency}"
            r = run_case(address, schema, concurrency, args.requests, args.max_tokens)
            if schema and on_first_schema is not None:
                on_first_schema()
                on_first_schema = None
            out[key] = r
            print(f"  {key}: {r['tokens_per_s']:.1f} tok/s, e2e {r['mean_e2e_s']:.2f} s, "
                  f"per-stream decode {r['stream_decode_tok_s']:.1f} tok/s", flush=True)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=bs.MODEL)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--max_tokens", type=int, default=64)
    p.add_argument("--log_dir", default="/tmp/bench-structured")
    args = p.parse_args()
    bs.MODEL = os.path.abspath(args.model)
    os.makedirs(args.log_dir, exist_ok=True)
    results = {"cpu": bs.cpu_model(), "model": os.path.basename(bs.MODEL)}

    metrics = {"router": bs.free_port(), "decode": bs.free_port()}
    cluster = bs.Cluster(args.log_dir)
    try:
        address = start_pdserve(cluster, metrics)
        wait_http(address)
        print("pdserve (1 prefill + 1 decode worker):", flush=True)
        first = {}

        def first_compile():
            first["compile_s"] = scrape(metrics["router"],
                                        "pdserve_router_grammar_compile_seconds_sum")
        results["pdserve"] = cases(address, args, first_compile)
        count = scrape(metrics["router"], "pdserve_router_grammar_compile_seconds_count")
        total = scrape(metrics["router"], "pdserve_router_grammar_compile_seconds_sum")
        masks = scrape(metrics["decode"], "pdserve_decode_grammar_masks_total")
        mask_s = scrape(metrics["decode"], "pdserve_decode_grammar_mask_seconds_total")
        results["compile"] = {"schema_requests": count, "mean_s": total / max(count, 1),
                              "first_run_sum_s": first.get("compile_s", 0.0)}
        results["mask"] = {"masks": masks, "mean_us": 1e6 * mask_s / max(masks, 1)}
        print(f"  compile: {results['compile']}, mask: {results['mask']}", flush=True)
    finally:
        cluster.close()

    cluster = bs.Cluster(args.log_dir)
    try:
        address = start_llama_server(cluster, args.log_dir)
        wait_http(address)
        print("llama-server:", flush=True)
        results["llama-server"] = cases(address, args)
    finally:
        cluster.close()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
