#!/usr/bin/env python3
"""Runs the three binaries with the container command and args of the rendered
cpu overlay and streams one answer through them.

  manifest_args_test.py --bin_dir build/bin --k8s_dir deploy/k8s [--model M.gguf]

Only what cannot hold outside a cluster is substituted: listen addresses become
127.0.0.1 with free ports (--metrics_port a free port each), $(POD_IP) 127.0.0.1, the router's Service DNS
targets the local workers' ports, --model the local model file (and --threads
is capped at the CPUs here). Every other flag is passed as the manifest has it.
First the router alone is started with the manifest's DNS targets unchanged, to
prove it accepts them (it must keep running, resolving, not exit with
INVALID_ARGUMENT). After the answer each process's /metrics is scraped for the
series the HPAs and dashboards use. Finally every process gets SIGTERM and must drain and exit 0
within its --drain_timeout_ms.

Exit 0 on success, or with a "SKIP:" line when kubectl or the model is
missing; 1 on failure.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from k8s_render import (config_maps, env_values, expand, kubectl, parse_flags, render_dir,  # noqa: E402
                        split_host_port, split_worker_target)

TIERS = {"pdserve-router": "router", "pdserve-prefill": "prefill", "pdserve-decode": "decode"}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


class Proc:
    def __init__(self, name, argv, log_dir):
        self.name = name
        self.argv = argv
        self.log = os.path.join(log_dir, f"{name}.log")
        self.fh = open(self.log, "w")
        print(f"start {name}: {' '.join(argv)}", flush=True)
        self.p = subprocess.Popen(argv, stdout=self.fh, stderr=subprocess.STDOUT)

    def alive(self):
        return self.p.poll() is None

    def log_has(self, text):
        with open(self.log, errors="replace") as f:
            return text in f.read()

    def stop(self, timeout):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None
        finally:
            self.fh.close()


def containers_by_tier(objects):
    out = {}
    services = {}
    for o in objects:
        if o.get("kind") == "Deployment":
            for c in o["spec"]["template"]["spec"]["containers"]:
                cmd = (c.get("command") or [""])[0]
                if cmd in TIERS:
                    out[TIERS[cmd]] = (o, c)
        if o.get("kind") == "Service":
            services[o["metadata"]["name"]] = o
    return out, services


def fail(msg, procs=()):
    print(f"FAIL: {msg}")
    for p in procs:
        print(f"--- {p.name} ({p.log}) ---\n{tail(p.log)}")
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin_dir", required=True)
    ap.add_argument("--k8s_dir", required=True)
    ap.add_argument("--overlay", default="cpu")
    ap.add_argument("--model", default=None, help="default: <repo>/models/<the manifest's file name>")
    ap.add_argument("--prompt", default="Hi")
    args = ap.parse_args()

    if kubectl() is None:
        print("SKIP: kubectl not found; the manifests were not rendered")
        return 0
    bin_dir = os.path.abspath(args.bin_dir)
    k8s_dir = os.path.abspath(args.k8s_dir)
    objects = render_dir(os.path.join(k8s_dir, "overlays", args.overlay))
    tiers, services = containers_by_tier(objects)
    for t in ("router", "prefill", "decode"):
        if t not in tiers:
            return fail(f"the {args.overlay} overlay has no {t} container")

    # The model: the manifest's file name (from the ConfigMap), found locally.
    maps = config_maps(objects)
    router_d, router_c = tiers["router"]
    router_env = env_values(router_c, router_d["metadata"].get("namespace", "default"), "r", maps)
    manifest_model = parse_flags([expand(a, router_env) for a in router_c["args"]])["model"]
    model = args.model or os.path.join(os.path.dirname(os.path.dirname(k8s_dir)), "models",
                                       os.path.basename(manifest_model))
    if not os.path.exists(model):
        print(f"SKIP: model {model} not found (scripts/fetch-model.sh)")
        return 0
    for t, (_, c) in tiers.items():
        exe = os.path.join(bin_dir, c["command"][0])
        if not os.access(exe, os.X_OK):
            return fail(f"{exe} not built")

    ports = {t: free_port() for t in tiers}
    kv_port = free_port()
    http_port = free_port()
    # --metrics_port is the same on every pod; here the three share a host.
    metrics_ports = {t: free_port() for t in tiers}
    ncpu = os.cpu_count() or 1

    def argv_for(tier, substitute_targets=True):
        deploy, c = tiers[tier]
        ns = deploy["metadata"].get("namespace", "default")
        env = env_values(c, ns, f"{deploy['metadata']['name']}-test", maps)
        env = {k: ("127.0.0.1" if v == "10.0.0.1" else v) for k, v in env.items()}
        flags = parse_flags([expand(a, env) for a in c.get("args") or []])
        out = []
        for name, value in flags.items():
            if name == "listen":
                value = f"127.0.0.1:{ports[tier]}"
            elif name == "http_listen":
                value = f"127.0.0.1:{http_port}"
            elif name == "kv_listen":
                value = f"127.0.0.1:{kv_port}"
            elif name == "kv_advertise":
                host, _ = split_host_port(value)
                assert host == "127.0.0.1", f"--kv_advertise {value} is not the pod IP"
                value = f"127.0.0.1:{kv_port}"
            elif name == "model":
                value = model
            elif name == "metrics_port":
                value = str(metrics_ports[tier])
            elif name == "threads" and int(value) > ncpu:
                print(f"note: {tier} --threads {value} capped at {ncpu} CPUs")
                value = str(ncpu)
            elif name in ("prefill", "decode") and substitute_targets:
                mapped = []
                for target in value.split(","):
                    dns, host, port = split_worker_target(target)
                    svc = services.get(host.split(".")[0])
                    assert svc is not None, f"--{name} target {target}: no Service {host.split('.')[0]}"
                    sel = svc["spec"]["selector"]
                    worker = [t for t, (d, _) in tiers.items()
                              if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v
                                     for k, v in sel.items())]
                    assert worker == [name], f"--{name} target {target} selects {worker}"
                    # An IP literal resolves to itself: dns:/// targets
                    # still take the router's DNS discovery path.
                    scheme = "dns:///" if dns else ""
                    mapped.append(f"{scheme}127.0.0.1:{ports[name]}")
                value = ",".join(mapped)
            out.append(f"--{name}={value}")
        return [os.path.join(bin_dir, c["command"][0])] + out, flags

    procs = []
    with tempfile.TemporaryDirectory(prefix="pdserve-k8s-args-") as log_dir:
        try:
            # 1. The router accepts the manifest's Service DNS targets as written.
            argv, _ = argv_for("router", substitute_targets=False)
            p = Proc("router-dns-targets", argv, log_dir)
            time.sleep(3)
            if not p.alive():
                return fail("the router exited with the manifest's --prefill/--decode targets", [p])
            rc = p.stop(timeout=35)
            if rc != 0:
                return fail(f"router (DNS targets) exited {rc} on SIGTERM", [p])
            print("ok: router accepts the manifest's DNS targets and drains on SIGTERM")

            # 2. The three tiers with the manifest's args, one Generate through them.
            drain = {}
            for tier in ("decode", "prefill", "router"):
                argv, flags = argv_for(tier)
                drain[tier] = int(flags.get("drain_timeout_ms", "30000")) / 1000.0
                procs.append(Proc(tier, argv, log_dir))
            router = procs[-1]
            deadline = time.time() + 180
            while time.time() < deadline and not router.log_has("health: SERVING"):
                dead = [p for p in procs if not p.alive()]
                if dead:
                    return fail(f"{dead[0].name} exited with {dead[0].p.returncode}", procs)
                time.sleep(0.5)
            if not router.log_has("health: SERVING"):
                return fail("the router never became SERVING", procs)
            print("ok: router SERVING")
            gen = subprocess.run([os.path.join(bin_dir, "pdserve"), "generate",
                                  f"--router=127.0.0.1:{ports['router']}", "--max_tokens=16",
                                  args.prompt], capture_output=True, text=True, timeout=300)
            print(f"pdserve generate exited {gen.returncode}; stdout: {gen.stdout.strip()!r}")
            if gen.returncode != 0:
                return fail(f"generate failed: {gen.stderr.strip()[-2000:]}", procs)
            if not gen.stdout.strip():
                return fail("generate printed nothing", procs)

            # The /metrics endpoints the ServiceMonitor and the HPAs rely on.
            expected = {
                "router": ['pdserve_router_requests_total{api="grpc",code="OK"} 1\n',
                           'pdserve_router_ttft_seconds_count{api="grpc"} 1\n'],
                "prefill": ["pdserve_prefill_queued_prompt_tokens "],
                "decode": ["pdserve_decode_kv_blocks_utilization ",
                           "pdserve_decode_kv_blocks_total "],
            }
            for tier, series in expected.items():
                url = f"http://127.0.0.1:{metrics_ports[tier]}/metrics"
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:
                        body = r.read().decode()
                except OSError as e:
                    return fail(f"scraping {tier} {url}: {e}", procs)
                missing = [x.strip() for x in series if x not in body]
                if missing:
                    return fail(f"{tier} /metrics lacks {missing}:\n{body}", procs)
            print("ok: /metrics of router, prefill and decode")

            # 3. SIGTERM: every tier drains and exits 0 within its drain timeout.
            for p in reversed(procs):
                rc = p.stop(timeout=drain[p.name] + 10)
                if rc != 0:
                    return fail(f"{p.name} exited {rc} after SIGTERM", procs)
            procs = []
            print("ok: router, prefill and decode drained and exited 0")
        finally:
            for p in procs:
                if p.alive():
                    p.p.kill()
                    p.p.wait()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
