#!/usr/bin/env python3
"""pdserve's OpenAI HTTP API under a third-party benchmark client, for docs/PERFORMANCE.md.

Starts pdserve disaggregated (router + 1 prefill worker on core 0 + 1 decode
worker on core 1, as tools/bench/bench_serving.py does), then drives the router's
HTTP API with the same workload twice: NVIDIA's `aiperf` (PyPI) and
`pdserve bench --target=openai`. Fixed input and output lengths (EOS
ignored), constant-rate arrivals, streamed /v1/completions. Prints both
clients' TTFT, ITL and output throughput side by side and writes the raw
results under --out.

aiperf needs a tokenizer offline: a Hugging Face folder generated from the
GGUF by scripts/make-hf-tokenizer.py. Both live in a virtual environment
made here (pinned; not part of `make test`):

  python3 tools/bench/bench_aiperf.py --out /tmp/aiperf [--rates 1,2] [--requests 40]

Note: aiperf 0.13 refuses a local tokenizer folder while HF_HUB_OFFLINE or
TRANSFORMERS_OFFLINE is set; this script unsets them for it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_serving as bs  # noqa: E402

AIPERF = "aiperf==0.13.0"
TOKENIZERS = "tokenizers==0.23.3"


def venv(path):
    """A venv with aiperf and tokenizers; returns its python."""
    python = os.path.join(path, "bin", "python")
    if not os.path.exists(os.path.join(path, ".pdserve-ready")):
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([python, "-m", "pip", "install", "--quiet", AIPERF, TOKENIZERS], check=True)
        open(os.path.join(path, ".pdserve-ready"), "w").close()
    return python


def tokenizer_dir(python, out):
    path = os.path.join(out, "hf-tokenizer")
    subprocess.run([python, os.path.join(bs.ROOT, "scripts", "make-hf-tokenizer.py"), bs.MODEL,
                    path], check=True)
    return path


def run_aiperf(python, address, tokenizer, rate, args, out):
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    artifacts = os.path.join(out, f"aiperf-rate{rate}")
    cmd = [os.path.join(os.path.dirname(python), "aiperf"), "profile",
           "--model", "SmolLM2-135M-Instruct.Q4_1", "--tokenizer", tokenizer,
           "--url", f"http://{address}", "--endpoint-type", "completions", "--streaming",
           "--isl", str(args.input_len), "--isl-stddev", "0",
           "--osl", str(args.output_len), "--osl-stddev", "0",
           "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0",
           "--use-legacy-max-tokens",
           "--request-rate", str(rate), "--request-rate-mode", "constant",
           "--request-count", str(args.requests), "--warmup-request-count", "2",
           "--random-seed", "0", "--artifact-dir", artifacts, "--ui", "none",
           "--no-server-metrics", "--no-gpu-telemetry"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800,
                       cwd=out)
    if r.returncode != 0:
        raise RuntimeError(f"aiperf failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    with open(os.path.join(artifacts, "profile_export_aiperf.json")) as f:
        return json.load(f)


def run_pdserve_bench(address, rate, args, out):
    extra = [f"--input_len={args.input_len}", f"--output_len={args.output_len}",
             f"--request_rate={rate}", "--burstiness=1000", f"--num_requests={args.requests}",
             "--warmup_requests=2", "--seed=0"]
    doc = bs.bench("openai", address, os.path.join(out, f"pdserve-bench-rate{rate}.json"), extra)
    return doc["summary"]


def aiperf_metric(doc, key, stat):
    m = doc.get(key) or doc.get("records", {}).get(key) or {}
    return m.get(stat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rates", default="1,2")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--input_len", type=int, default=256)
    ap.add_argument("--output_len", type=int, default=64)
    ap.add_argument("--venv", default=os.path.join(bs.ROOT, "build", "aiperf-venv"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    python = venv(args.venv)
    tokenizer = tokenizer_dir(python, args.out)
    rows = []
    with tempfile.TemporaryDirectory() as log_dir:
        cluster = bs.Cluster(log_dir)
        try:
            http_port = bs.free_port()
            router, _ = bs.start_pdserve(cluster, "disagg", http_port=http_port)
            address = f"127.0.0.1:{http_port}"
            bs.wait_ready("openai", address, args.out)
            for rate in [float(r) for r in args.rates.split(",")]:
                a = run_aiperf(python, address, tokenizer, rate, args, args.out)
                p = run_pdserve_bench(address, rate, args, args.out)
                rows.append((rate, a, p))
        finally:
            cluster.close()
    print("| rate (req/s) | client | TTFT p50 | TTFT p90 | ITL p50 | ITL p99 | output tok/s | "
          "server prompt tokens (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    for rate, a, p in rows:
        print(f"| {rate:g} | aiperf | {aiperf_metric(a, 'time_to_first_token', 'p50'):.1f} | "
              f"{aiperf_metric(a, 'time_to_first_token', 'p90'):.1f} | "
              f"{aiperf_metric(a, 'inter_token_latency', 'p50'):.1f} | "
              f"{aiperf_metric(a, 'inter_token_latency', 'p99'):.1f} | "
              f"{aiperf_metric(a, 'output_token_throughput', 'avg'):.1f} | "
              f"{aiperf_metric(a, 'usage_prompt_tokens', 'avg'):.1f} |")
        print(f"| {rate:g} | pdserve bench | {p['ttft_ms']['p50']:.1f} | {p['ttft_ms']['p90']:.1f} | "
              f"{p['itl_ms']['p50']:.1f} | {p['itl_ms']['p99']:.1f} | "
              f"{p['output_token_throughput']:.1f} | {p['input_tokens'] / p['completed']:.1f} |")


if __name__ == "__main__":
    main()
