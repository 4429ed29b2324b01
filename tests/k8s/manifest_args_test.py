#!/usr/bin/env python3
"""Runs the three binaries with the container command and args of the rendered
cpu overlay and streams one answer through them.

  manifest_args_test.py --bin_dir build/bin --k8s_dir deploy/k8s [--model M.gguf]
                        [--components tls,kv-secret,router-auth]

With --components the overlay is rendered with those components, and the
Secrets its pods mount are made here as the cluster would hold them: for each
cert-manager Certificate a key and certificate (its dnsNames and usages, plus
"localhost", the name the local router dials in place of the Services'), issued
by one test CA (ca.crt in every Secret); the operator's Secrets (KV secret,
bearer tokens) with fresh values. Flags that name a file on a Secret volume
read the file made for that key. The client then connects over TLS with a
token, the answer must have travelled as KV (prefill's sent-bytes counter),
and /readyz and /healthz on every metrics port must answer 200 (the probes of
the tls component).

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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from k8s_render import (config_maps, env_values, expand, kubectl, mounted_secret,  # noqa: E402
                        parse_flags, render_dir, render_with_components, split_host_port,
                        split_worker_target)

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

    def log_line_has(self, *texts):
        with open(self.log, errors="replace") as f:
            return any(all(t in line for t in texts) for line in f)

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


def run(cmd):
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


def make_secrets(objects, root):
    """{secret name: {key: path}} for the Secrets the render's pods mount:
    Certificates' (a test CA issues them all) and the operator's."""
    out = {}
    certs = [o for o in objects if o.get("kind") == "Certificate" and not o["spec"].get("isCA")]
    if certs:
        ca = os.path.join(root, "ca")
        os.makedirs(ca)
        run(f"cd {ca} && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
            "-keyout ca.key -out ca.crt -days 2 -subj /CN=pdserve-test-ca")
        for c in certs:
            name = c["spec"]["secretName"]
            d = os.path.join(root, name)
            os.makedirs(d)
            sans = ",".join(f"DNS:{n}" for n in (c["spec"].get("dnsNames") or []) + ["localhost"])
            eku = ",".join({"server auth": "serverAuth", "client auth": "clientAuth"}[u]
                           for u in c["spec"].get("usages") or [])
            with open(os.path.join(d, "ext"), "w") as f:
                f.write(f"subjectAltName={sans}\n" + (f"extendedKeyUsage={eku}\n" if eku else ""))
            run(f"cd {d} && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                f"-keyout tls.key -out tls.csr -subj /CN={name} && openssl x509 -req -in tls.csr "
                f"-CA {ca}/ca.crt -CAkey {ca}/ca.key -CAcreateserial -days 2 -extfile ext "
                f"-out tls.crt && cp {ca}/ca.crt ca.crt")
            out[name] = {k: os.path.join(d, k) for k in ("tls.crt", "tls.key", "ca.crt")}
    values = {("pdserve-kv-secret", "kv-secret"): os.urandom(32).hex(),
              ("pdserve-router-tokens", "tokens"): "test-token\n"}
    for (name, key), value in values.items():
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, key), "w") as f:
            f.write(value)
        out.setdefault(name, {})[key] = os.path.join(d, key)
    return out


def secret_path(deploy, container, path, secrets):
    """The local file for `path` when a Secret volume mounted in the
    container provides it, else None."""
    loc = mounted_secret(deploy["spec"]["template"]["spec"], container, path)
    return None if loc is None else (secrets.get(loc[0]) or {}).get(loc[1])


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


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
    ap.add_argument("--components", default="", help="comma-separated components to add")
    args = ap.parse_args()

    if kubectl() is None:
        print("SKIP: kubectl not found; the manifests were not rendered")
        return 0
    bin_dir = os.path.abspath(args.bin_dir)
    k8s_dir = os.path.abspath(args.k8s_dir)
    components = [c for c in args.components.split(",") if c]
    if components and shutil.which("openssl") is None:
        print("SKIP: openssl not found to make the components' certificates")
        return 0
    if components:
        objects = render_with_components(k8s_dir, args.overlay, components)
    else:
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
    secrets_dir = tempfile.TemporaryDirectory(prefix="pdserve-k8s-secrets-")
    secrets = make_secrets(objects, secrets_dir.name)
    router_tls = "worker_tls_ca" in parse_flags([expand(a, router_env) for a in router_c["args"]])

    def argv_for(tier, substitute_targets=True):
        deploy, c = tiers[tier]
        ns = deploy["metadata"].get("namespace", "default")
        env = env_values(c, ns, f"{deploy['metadata']['name']}-test", maps)
        env = {k: ("127.0.0.1" if v == "10.0.0.1" else v) for k, v in env.items()}
        flags = parse_flags([expand(a, env) for a in c.get("args") or []])
        out = []
        for name, value in flags.items():
            local = secret_path(deploy, c, value, secrets)
            if local is not None:
                value = local
            elif name == "listen":
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
                    # still take the router's DNS discovery path. With TLS
                    # the router checks the name it was given: localhost,
                    # which the test certificates carry beside the Service's.
                    scheme = "dns:///" if dns else ""
                    host = "localhost" if router_tls else "127.0.0.1"
                    mapped.append(f"{scheme}{host}:{ports[name]}")
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
            # With --ready_needs_decode=false the router is SERVING before any
            # worker is live (requests would get UNAVAILABLE until then); wait
            # for both, the handshakes (TLS included) may still be on their way.
            for role in ("decode", "prefill"):
                while time.time() < deadline and not router.log_line_has(f"{role} worker", "is live"):
                    time.sleep(0.2)
                if not router.log_line_has(f"{role} worker", "is live"):
                    return fail(f"the router never saw the {role} worker live", procs)
            _, rflags = argv_for("router")
            client = [f"--router=127.0.0.1:{ports['router']}"]
            if "tls_cert" in rflags:  # the certificate names localhost, not 127.0.0.1
                cert_secret = secret_path(router_d, router_c, rflags["tls_cert"], secrets)
                client = [f"--router=localhost:{ports['router']}",
                          f"--tls_ca={os.path.join(os.path.dirname(cert_secret), 'ca.crt')}"]
            if "auth_token_file" in rflags:
                client.append(f"--auth_token_file={secret_path(router_d, router_c, rflags['auth_token_file'], secrets)}")
            gen = subprocess.run([os.path.join(bin_dir, "pdserve"), "generate"] + client +
                                 ["--max_tokens=16", args.prompt],
                                 capture_output=True, text=True, timeout=300)
            print(f"pdserve generate exited {gen.returncode}; stdout: {gen.stdout.strip()!r}")
            if gen.returncode != 0:
                return fail(f"generate failed: {gen.stderr.strip()[-2000:]}", procs)
            if not gen.stdout.strip():
                return fail("generate printed nothing", procs)

            # The /metrics endpoints the ServiceMonitor and the HPAs rely on.
            expected = {
                "router": ['pdserve_router_requests_total{api="grpc",code="OK"} 1\n',
                           'pdserve_router_ttft_seconds_count{api="grpc"} 1\n',
                           # The router autoscalers' and the endpoint picker's signals.
                           "pdserve_router_requests_waiting ", "pdserve_router_requests_running ",
                           "pdserve_router_decode_kv_utilization "],
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
            if components:
                url = f"http://127.0.0.1:{metrics_ports['prefill']}/metrics"
                with urllib.request.urlopen(url, timeout=10) as r:
                    sent = [line for line in r.read().decode().splitlines()
                            if line.startswith("pdserve_prefill_kv_sent_bytes_total ")]
                if not sent or float(sent[0].split()[1]) <= 0:
                    return fail(f"the answer did not travel as KV from prefill to decode: {sent}", procs)
                print(f"ok: KV moved prefill -> decode ({sent[0]})")
            for tier in tiers:
                for path in ("/healthz", "/readyz"):
                    code = http_status(f"http://127.0.0.1:{metrics_ports[tier]}{path}")
                    if code != 200:
                        return fail(f"{tier} {path} answered {code}", procs)
            print("ok: /healthz and /readyz of router, prefill and decode")

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
