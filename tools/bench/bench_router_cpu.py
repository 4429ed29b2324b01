#!/usr/bin/env python3
"""The router's CPU time per streamed token, by door (gRPC and OpenAI HTTP).

Starts one decode worker (prefilling locally) and a router with its HTTP API,
then streams the same requests through each door with `pdserve bench` and
reads the router's user+system CPU time (/proc/<pid>/stat) before and after.
CPU time rather than latency: the hop's cost on a busy 2-vCPU box shows up
as noise in ITL but exactly in the router's own CPU seconds.

  tools/bench/bench_router_cpu.py [--bin build/bin] [--requests 24] [--tokens 256]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def bench(args, target, address, out_json, requests, tokens):
    cmd = [os.path.join(args.bin, "pdserve"), "bench", "--model=" + args.model,
           "--target=" + target, "--address=" + address, "--json_out=" + out_json,
           "--input_len=16", f"--output_len={tokens}", "--ignore_eos", "--max_concurrency=4",
           f"--num_requests={requests}", "--warmup_requests=0", "--seed=1"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"bench failed: {r.stderr[-2000:]}")
    with open(out_json) as f:
        return json.load(f)["summary"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="router-cpu-")
    procs = []
    try:
        dport, rport, hport = free_port(), free_port(), free_port()
        procs.append(subprocess.Popen(
            ["taskset", "-c", "1", os.path.join(args.bin, "pdserve-decode"), "--model=" + args.model,
             "--threads=1", f"--listen=127.0.0.1:{dport}", "--kv_listen=127.0.0.1:0",
             "--prefix_cache=false"], stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/decode.log", "w")))
        router = subprocess.Popen(
            ["taskset", "-c", "0", os.path.join(args.bin, "pdserve-router"), "--model=" + args.model,
             f"--listen=127.0.0.1:{rport}", f"--http_listen=127.0.0.1:{hport}",
             f"--decode=127.0.0.1:{dport}", "--colocated"],
            stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/router.log", "w"))
        procs.append(router)
        doors = {"router": f"127.0.0.1:{rport}", "openai": f"127.0.0.1:{hport}"}
        deadline = time.time() + 120
        while True:  # ready: one tiny request through each door
            try:
                for target, address in doors.items():
                    bench(args, target, address, f"{tmp}/probe.json", 1, 2)
                break
            except (RuntimeError, subprocess.TimeoutExpired):
                if time.time() > deadline:
                    raise
                time.sleep(1)
        rows = {t: [] for t in doors}
        for rnd in range(args.rounds):
            order = list(doors.items()) if rnd % 2 == 0 else list(doors.items())[::-1]
            for target, address in order:
                before = cpu_seconds(router.pid)
                s = bench(args, target, address, f"{tmp}/{target}-{rnd}.json", args.requests, args.tokens)
                used = cpu_seconds(router.pid) - before
                tokens = args.requests * args.tokens
                rows[target].append(1e6 * used / tokens)
                print(f"round {rnd} {target}: {used:.2f} s router CPU for {tokens} tokens = "
                      f"{1e6 * used / tokens:.1f} us/token (ITL p50 {s['itl_ms']['p50']:.2f} ms, {s['failed']} failed)",
                      file=sys.stderr, flush=True)
        print("| door | router CPU per token, us (median of rounds) | rounds |")
        print("|---|---|---|")
        for target, vals in rows.items():
            name = "gRPC Generate" if target == "router" else "OpenAI HTTP (SSE)"
            print(f"| {name} | {sorted(vals)[len(vals) // 2]:.1f} | {', '.join(f'{v:.1f}' for v in vals)} |")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


if __name__ == "__main__":
    main()
