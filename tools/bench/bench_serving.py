#!/usr/bin/env python3
"""Serving comparison for docs/PERFORMANCE.md, in one run on one machine.

Starts each system on loopback, drives it with `pdserve bench` (one load
generator and one set of metric definitions for every system), tears it down,
and writes the raw JSON, a markdown report and PNG plots:

  disagg        router + 1 prefill worker (core 0) + 1 decode worker (core 1)
  colocated     router + 2 decode workers prefilling locally (cores 0 and 1)
  llama-server  llama.cpp's C++ server, continuous batching (--parallel 8
                --cont-batching, cores 0-1, 2 threads), built from the
                llama-cpp-python 0.3.36 sdist by tools/bench/build-llama-server.sh

Every system is driven over the OpenAI HTTP API (/v1/completions, streamed)
by the same client, so pdserve's HTTP front is part of what is measured.
Workload (same seed for every system): mostly short prompts, a share of long
ones, fixed output length (EOS ignored), Poisson arrivals swept over rates.
SLOs are slowdowns over an unloaded run: TTFT p90 <= 3x and TPOT p90 <= 1.5x
the better of the two pdserve layouts' unloaded p90s, one SLO for all.

Also: router overhead (the same requests through the router and straight
from the decode worker, unloaded, alternated) and KV transfer vs raw TCP.

  python3 tools/bench/bench_serving.py --out /tmp/serving [--quick]
"""
import argparse
import contextlib
import datetime
import json
import os
import platform
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "bin")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Processes of one system under test; killed on exit."""

    def __init__(self, log_dir):
        self.procs = []
        self.log_dir = log_dir

    def spawn(self, name, args, cores=None):
        cmd = (["taskset", "-c", cores] if cores else []) + args
        log = open(os.path.join(self.log_dir, name + ".log"), "w")
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT))

    def close(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


def worker(cluster, kind, core, extra=()):
    port = free_port()
    # Every rate point replays the same seeded prompts (so the points compare),
    # which a prefix cache would serve from memory after the first point:
    # off, as the workload is meant to share no prefixes.
    args = [os.path.join(BIN, "pdserve-" + kind), "--model=" + MODEL, "--threads=1",
            f"--listen=127.0.0.1:{port}", f"--worker_id={kind}{core}",
            "--prefix_cache=false"] + list(extra)
    if kind == "decode":
        args.append("--kv_listen=127.0.0.1:0")
    cluster.spawn(f"{kind}{core}", args, cores=str(core))
    return f"127.0.0.1:{port}"


def start_pdserve(cluster, layout, decode_flags=(), http_port=None):
    """Returns (router address, first decode worker address). `http_port`:
    serve the OpenAI HTTP API there (else off)."""
    if layout == "disagg":
        prefill = [worker(cluster, "prefill", 0)]
        decode = [worker(cluster, "decode", 1, decode_flags)]
    elif layout == "colocated":
        prefill = []
        decode = [worker(cluster, "decode", 0, decode_flags),
                  worker(cluster, "decode", 1, decode_flags)]
    else:  # one decode worker, for the router-overhead measurement
        prefill, decode = [], [worker(cluster, "decode", 1, decode_flags)]
    port = free_port()
    args = [os.path.join(BIN, "pdserve-router"), "--model=" + MODEL,
            f"--listen=127.0.0.1:{port}", "--decode=" + ",".join(decode),
            f"--http_listen=127.0.0.1:{http_port}" if http_port else "--http_listen=none"]
    if prefill:
        args.append("--prefill=" + ",".join(prefill))
    else:
        args.append("--colocated")
    # For the overhead measurement the router gets core 0 with the client, as
    # it would have its own cores in a deployment: unpinned, it lands on the
    # decode worker's core now and then and slows decode steps, which is CPU
    # contention on a 2-vCPU box, not latency the hop adds.
    cluster.spawn("router", args, cores="0" if layout == "single" else None)
    return f"127.0.0.1:{port}", decode[0]


LLAMA_SLOTS = 8


def start_llama_server(cluster):
    binary = subprocess.run([os.path.join(ROOT, "tools", "bench", "build-llama-server.sh")],
                            check=True, capture_output=True, text=True).stdout.strip()
    port = free_port()
    # Each of the slots gets 1024 tokens of context: the longest request
    # here is 520 + 64. Prompt caching is off, as pdserve's prefix cache is:
    # every rate point replays the same seeded prompts.
    cluster.spawn("llama_server", [
        binary, "--model", MODEL, "--host", "127.0.0.1", "--port", str(port),
        "--threads", "2", "--threads-batch", "2", "--parallel", str(LLAMA_SLOTS),
        "--cont-batching", "--ctx-size", str(1024 * LLAMA_SLOTS), "--no-cache-prompt",
        "--cache-ram", "0"], cores="0,1")
    return f"127.0.0.1:{port}"


def bench(target, address, out_json, extra, timeout=900, cores=None):
    cmd = (["taskset", "-c", cores] if cores else []) + [os.path.join(BIN, "pdserve"), "bench", "--model=" + MODEL, "--target=" + target,
           "--address=" + address, "--json_out=" + out_json] + extra
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"bench failed ({' '.join(cmd)}):\n{r.stderr[-2000:]}")
    with open(out_json) as f:
        return json.load(f)


def wait_ready(target, address, tmp, timeout_s=180):
    probe = ["--num_requests=1", "--max_concurrency=1", "--warmup_requests=0", "--input_len=4",
             "--output_len=2", "--request_timeout_s=20"]
    deadline = time.time() + timeout_s
    while True:
        try:
            bench(target, address, os.path.join(tmp, "probe.json"), probe, timeout=30)
            return
        except (RuntimeError, subprocess.TimeoutExpired):
            if time.time() > deadline:
                raise
            time.sleep(1)


def workload(args):
    return [f"--input_len={args.short_len}", f"--long_fraction={args.long_fraction}",
            f"--long_input_len={args.long_len}", f"--output_len={args.output_len}",
            "--ignore_eos", f"--seed={args.seed}", "--warmup_requests=2",
            "--request_timeout_s=600"]


def run_system(name, args, out_dir, log_dir):
    """Unloaded baseline plus the rate sweep for one system; list of runs."""
    runs = []
    repeats = args.repeats if name != "llama-server" else args.peer_repeats
    for rep in range(repeats):
        cluster = Cluster(log_dir)
        try:
            target = "openai"
            if name == "llama-server":
                address = start_llama_server(cluster)
            else:
                http_port = free_port()
                start_pdserve(cluster, name, args.decode_flags, http_port=http_port)
                address = f"127.0.0.1:{http_port}"
            wait_ready(target, address, out_dir)
            text = ["--text_prompts"] if args.text_prompts else []
            points = [("unloaded", ["--max_concurrency=1", f"--num_requests={args.baseline_requests}"])]
            for rate in args.rates:
                points.append((rate, [f"--request_rate={rate}", f"--num_requests={args.requests}"]))
            for label, extra in points:
                path = os.path.join(out_dir, f"{name}-{label}-r{rep}.json")
                print(f"[bench-serving] {name} rate={label} repeat={rep}", file=sys.stderr, flush=True)
                doc = bench(target, address, path, workload(args) + text + extra)
                runs.append({"system": name, "rate": label, "repeat": rep, "doc": doc})
        finally:
            cluster.close()
    return runs


def router_overhead(args, out_dir, log_dir):
    """Same requests via the router and straight from its decode worker."""
    cluster = Cluster(log_dir)
    out = {"router": [], "decode": []}
    try:
        router, decode = start_pdserve(cluster, "single")
        wait_ready("router", router, out_dir)
        extra = ["--input_len=32", "--output_len=64", "--ignore_eos", "--max_concurrency=1",
                 f"--num_requests={args.overhead_requests}", "--warmup_requests=2",
                 f"--seed={args.seed}"]
        # A first, unrecorded pass warms the worker (page cache, allocator);
        # then the order alternates so that drift does not favour one side.
        bench("router", router, os.path.join(out_dir, "overhead-warm.json"), extra, cores="0")
        for rep in range(args.overhead_rounds):
            pair = (("router", router), ("decode", decode))
            for target, addr in (pair if rep % 2 == 0 else pair[::-1]):
                path = os.path.join(out_dir, f"overhead-{target}-r{rep}.json")
                print(f"[bench-serving] overhead {target} round={rep}", file=sys.stderr, flush=True)
                out[target].append(bench(target, addr, path, extra, cores="0")["summary"])
    finally:
        cluster.close()
    return out


def kv_raw(out_dir):
    path = os.path.join(out_dir, "kv_bench.txt")
    r = subprocess.run([os.path.join(BIN, "pdserve_kv_bench"), "--mb=256", "--prompt_tokens=512"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    with open(path, "w") as f:
        f.write(r.stdout + r.stderr)
    return r.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rates", default="0.5,1,1.5,2,2.5")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--baseline_requests", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--peer_repeats", type=int, default=1)
    ap.add_argument("--short_len", default="16:64")
    ap.add_argument("--long_len", default="480:520")
    ap.add_argument("--long_fraction", type=float, default=0.2)
    ap.add_argument("--output_len", default="64")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--systems", default="disagg,colocated,llama-server")
    ap.add_argument("--decode_flags", default="",
                    help="extra flags for every decode worker, comma-separated, e.g. "
                         "--prefill_tokens_while_decoding=0")
    ap.add_argument("--overhead_requests", type=int, default=30)
    ap.add_argument("--overhead_rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="tiny run to check the plumbing")
    args = ap.parse_args()
    args.rates = [float(r) if "." in r else int(r) for r in args.rates.split(",")]
    args.decode_flags = [f for f in args.decode_flags.split(",") if f]
    # pdserve gets the same text prompts as llama.cpp, so every system sees
    # identical requests.
    args.text_prompts = True
    if args.quick:
        args.rates, args.requests, args.baseline_requests = [1], 6, 3
        args.repeats, args.overhead_requests, args.overhead_rounds = 1, 5, 1
    out_dir = os.path.abspath(args.out)
    log_dir = os.path.join(out_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    runs = []
    failures = {}
    for name in filter(None, args.systems.split(",")):
        try:
            runs += run_system(name, args, out_dir, log_dir)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            # Keep what the other systems measured; say what broke.
            print(f"[bench-serving] {name} failed: {e}", file=sys.stderr, flush=True)
            failures[name] = str(e)[-2000:]
    overhead = router_overhead(args, out_dir, log_dir)
    kv = kv_raw(out_dir)
    meta = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()}: {os.cpu_count()} vCPUs, {cpu_model()}",
        "command": "python3 tools/bench/bench_serving.py " + " ".join(sys.argv[1:]),
        "args": {k: v for k, v in vars(args).items()},
    }
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs, "overhead": overhead, "kv_bench": kv,
                   "failures": failures}, f, indent=1)
    print(os.path.join(out_dir, "results.json"))


def cpu_model():
    with contextlib.suppress(OSError):
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    main()
