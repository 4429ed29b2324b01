#!/usr/bin/env python3
"""Validates deploy/k8s without a cluster.

  validate_manifests.py <deploy/k8s>

Renders every overlay (and the cpu overlay with each component) with
`kubectl kustomize`, then:
  * checks every built-in object strictly against the Kubernetes API models of
    the Python client (kubernetes 32.x = Kubernetes 1.32): the object is
    deserialised into its model class (required fields enforced) and
    re-serialised, and the two must be equal, so an unknown field or a value of
    the wrong type fails; CRDs (ServiceMonitor) get a structural check;
  * checks the cross-references: Service selectors and ports against the pods;
    container and probe ports against the binaries' --listen/--kv_listen args;
    flags against the ABSL_FLAGs in the binaries' sources; router --prefill /
    --decode targets against the headless Services; HPA targets and metric
    names against the Deployments and the prometheus-adapter rules; PDB,
    topology-spread and NetworkPolicy selectors against the pods; the traffic
    the NetworkPolicies allow (exactly router->workers gRPC and prefill->decode
    KV between pdserve pods); drain timing against the grace period.

Exit 0 when everything holds (or, with a message, when kubectl is missing),
1 otherwise.
"""

import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

KUBERNETES_PY = "kubernetes==32.0.1"

# Built-in kinds the manifests may use, with the only apiVersion accepted.
BUILTIN = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "Service": "v1",
    "ConfigMap": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "PodDisruptionBudget": "policy/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "NetworkPolicy": "networking.k8s.io/v1",
}
CLUSTER_SCOPED = {"Namespace"}
# The ConfigMap that names the model (deploy/k8s/base/model.yaml).
MODEL_CONFIG = "pdserve-model"

# Which binary serves which tier, where its flags are defined, and the HPA
# metric each worker tier scales on.
BINARIES = {
    "pdserve-router": {"tier": "router",
                       "flag_sources": ["router", "common/rpc/server_tls_flags.cc"]},
    "pdserve-prefill": {"tier": "prefill",
                        "flag_sources": ["prefill_worker", "common/rpc/server_tls_flags.cc",
                                         "common/worker/engine_runtime_flags.cc",
                                         "common/worker/worker_flags.cc"],
                        "hpa_metric": "pdserve_prefill_queued_prompt_tokens"},
    "pdserve-decode": {"tier": "decode",
                       "flag_sources": ["decode_worker", "common/rpc/server_tls_flags.cc",
                                        "common/worker/engine_runtime_flags.cc",
                                        "common/worker/worker_flags.cc"],
                       "hpa_metric": "pdserve_decode_kv_blocks_utilization"},
}
METRICS_PORT = 9090
CLUSTER_DOMAIN = "svc.cluster.local"


def ensure_kubernetes_client():
    try:
        import kubernetes
        return kubernetes
    except ImportError:
        print(f"validate_manifests: installing {KUBERNETES_PY} with pip", flush=True)
        base = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        if subprocess.run(base + [KUBERNETES_PY]).returncode != 0:
            # Debian's python3 refuses plain installs (PEP 668): the user site then.
            subprocess.run(base + ["--user", "--break-system-packages", KUBERNETES_PY])
        import site
        import importlib
        importlib.invalidate_caches()
        if site.getusersitepackages() not in sys.path:
            sys.path.append(site.getusersitepackages())
    import kubernetes
    return kubernetes


class Report:
    def __init__(self):
        self.errors = []
        self.checks = 0

    def check(self, ok, where, message):
        self.checks += 1
        if not ok:
            self.errors.append(f"{where}: {message}")
        return ok


def obj_id(o):
    m = o.get("metadata", {})
    return f"{o.get('kind')}/{m.get('name')}"


# ---------------------------------------------------------------------------
# Strict schema check against the client's models.

def strict_diff(given, roundtrip, path, out):
    """Differences between the manifest and its model round trip."""
    if isinstance(given, dict):
        if not isinstance(roundtrip, dict):
            out.append(f"{path}: expected {type(roundtrip).__name__}, got an object")
            return
        for k, v in given.items():
            if v is None:
                out.append(f"{path}.{k}: null value")
            elif k not in roundtrip:
                out.append(f"{path}.{k}: unknown field")
            else:
                strict_diff(v, roundtrip[k], f"{path}.{k}", out)
    elif isinstance(given, list):
        if not isinstance(roundtrip, list) or len(roundtrip) != len(given):
            out.append(f"{path}: list does not survive the round trip")
            return
        for i, (a, b) in enumerate(zip(given, roundtrip)):
            strict_diff(a, b, f"{path}[{i}]", out)
    elif type(given) is not type(roundtrip) or given != roundtrip:
        out.append(f"{path}: {given!r} ({type(given).__name__}) has the wrong type "
                   f"(the API model makes it {roundtrip!r}; quote quantities and label values)")


def check_schema(kubernetes, o, report, where):
    kind, api_version = o.get("kind"), o.get("apiVersion")
    if kind not in BUILTIN:
        if api_version == "monitoring.coreos.com/v1" and kind == "ServiceMonitor":
            check_service_monitor_structure(o, report, where)
        elif api_version == "monitoring.coreos.com/v1" and kind == "PrometheusRule":
            check_prometheus_rule_structure(o, report, where)
        else:
            report.check(False, where, f"unexpected kind {api_version} {kind}")
        return
    if not report.check(api_version == BUILTIN[kind], where,
                        f"apiVersion {api_version}, expected {BUILTIN[kind]}"):
        return
    version = api_version.split("/")[-1]
    cls = version[0].upper() + version[1:] + kind
    if not report.check(hasattr(kubernetes.client, cls), where, f"no model class {cls}"):
        return
    api = kubernetes.client.ApiClient()

    class Response:
        data = json.dumps(o)

    try:
        model = api.deserialize(Response(), cls)
    except (ValueError, TypeError) as e:
        report.check(False, where, f"does not deserialize into {cls}: {e}")
        return
    roundtrip = api.sanitize_for_serialization(model)
    diffs = []
    strict_diff(o, roundtrip, kind, diffs)
    report.check(not diffs, where, "not a valid " + cls + ":\n    " + "\n    ".join(diffs))


def check_service_monitor_structure(o, report, where):
    spec = o.get("spec")
    meta = o.get("metadata", {})
    report.check(isinstance(meta.get("name"), str), where, "metadata.name missing")
    if not report.check(isinstance(spec, dict), where, "spec missing"):
        return
    allowed_spec = {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels",
                    "podTargetLabels", "sampleLimit", "attachMetadata"}
    report.check(set(spec) <= allowed_spec, where,
                 f"unknown spec fields {sorted(set(spec) - allowed_spec)}")
    sel = spec.get("selector")
    report.check(isinstance(sel, dict) and set(sel) <= {"matchLabels", "matchExpressions"}
                 and all(isinstance(v, str) for v in (sel.get("matchLabels") or {}).values()),
                 where, "spec.selector must be a label selector with string values")
    eps = spec.get("endpoints")
    if not report.check(isinstance(eps, list) and eps, where, "spec.endpoints must be a non-empty list"):
        return
    allowed_ep = {"port", "targetPort", "path", "scheme", "interval", "scrapeTimeout",
                  "honorLabels", "honorTimestamps", "relabelings", "metricRelabelings", "params",
                  "tlsConfig", "bearerTokenSecret", "authorization", "followRedirects"}
    for i, ep in enumerate(eps):
        report.check(isinstance(ep, dict) and set(ep) <= allowed_ep, where,
                     f"endpoints[{i}]: unknown fields {sorted(set(ep) - allowed_ep)}")
        report.check(isinstance(ep.get("port"), str), where, f"endpoints[{i}].port must name a Service port")
        for d in ("interval", "scrapeTimeout"):
            if d in ep:
                report.check(re.fullmatch(r"\d+(ms|s|m|h)", str(ep[d])) is not None, where,
                             f"endpoints[{i}].{d} {ep[d]!r} is not a Prometheus duration")
        report.check(ep.get("scheme", "http") in ("http", "https"), where, f"endpoints[{i}].scheme")


def check_prometheus_rule_structure(o, report, where):
    spec = o.get("spec")
    if not report.check(isinstance(spec, dict) and set(spec) == {"groups"}, where,
                        "spec must hold exactly 'groups'"):
        return
    groups = spec["groups"]
    if not report.check(isinstance(groups, list) and groups, where, "spec.groups must be a non-empty list"):
        return
    for g in groups:
        report.check(isinstance(g.get("name"), str) and set(g) <= {"name", "interval", "rules"}, where,
                     f"group {g.get('name')!r}: needs a name; unknown fields {sorted(set(g) - {'name', 'interval', 'rules'})}")
        for r in g.get("rules") or []:
            here = f"{where} alert {r.get('alert')!r}"
            allowed = {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
            report.check(set(r) <= allowed, here, f"unknown rule fields {sorted(set(r) - allowed)}")
            report.check(isinstance(r.get("alert"), str) and isinstance(r.get("expr"), str), here,
                         "an alerting rule needs 'alert' and 'expr' strings")
            if "for" in r:
                report.check(re.fullmatch(r"\d+(ms|s|m|h)", str(r["for"])) is not None, here,
                             f"'for' {r['for']!r} is not a Prometheus duration")
            report.check((r.get("labels") or {}).get("severity") in ("warning", "critical"), here,
                         "labels.severity must be warning or critical")
            report.check(bool((r.get("annotations") or {}).get("summary")), here, "annotations.summary missing")


# ---------------------------------------------------------------------------
# Cross-references.

def defined_metrics(source_root):
    """pdserve_* metric names the binaries define (quoted in their sources)."""
    names = set()
    for d in ("common", "router", "prefill_worker", "decode_worker"):
        for dirpath, _, files in os.walk(os.path.join(source_root, d)):
            for f in files:
                if f.endswith(".cc"):
                    with open(os.path.join(dirpath, f), errors="replace") as fh:
                        names |= set(re.findall(r'"(pdserve_[a-z0-9_]+)"', fh.read()))
    return names

class Pod:
    """A pod template of a workload, with what the checks need."""

    def __init__(self, workload, template, namespace):
        self.workload = workload
        self.name = workload["metadata"]["name"]
        self.kind = workload["kind"]
        self.labels = template.get("metadata", {}).get("labels", {}) or {}
        self.spec = template.get("spec", {})
        self.namespace = namespace
        self.containers = self.spec.get("containers", []) or []
        self.init_containers = self.spec.get("initContainers", []) or []

    def ports(self):
        """[(container, port dict)] of the serving containers."""
        return [(c, p) for c in self.containers for p in (c.get("ports") or [])]

    def resolve_port(self, port):
        """A numeric or named port -> container port number, or None."""
        for _, p in self.ports():
            if (isinstance(port, int) and p["containerPort"] == port) or p.get("name") == port:
                return p["containerPort"]
        return None

    def binary(self):
        for c in self.containers:
            cmd = (c.get("command") or [""])[0]
            if cmd in BINARIES:
                return cmd, c
        return None, None

    @property
    def tier(self):
        b, _ = self.binary()
        return BINARIES[b]["tier"] if b else self.labels.get("app.kubernetes.io/component")


def flags_defined(source_root, sources):
    """ABSL_FLAG names in the given directories' .cc files and .cc files."""
    names = set()
    files = []
    for src in sources:
        path = os.path.join(source_root, src)
        if src.endswith(".cc"):
            files.append(path)
        else:
            files += [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".cc")]
    for f in files:
        with open(f) as fh:
            names |= set(re.findall(r"ABSL_FLAG\(\s*[^,]+,\s*([A-Za-z0-9_]+)\s*,", fh.read()))
    return names


def adapter_metrics(k8s_dir):
    """Metric names exposed by prometheus-adapter/values.yaml."""
    import yaml
    path = os.path.join(k8s_dir, "prometheus-adapter", "values.yaml")
    with open(path) as f:
        values = yaml.safe_load(f)
    out = {}
    for rule in (values.get("rules") or {}).get("custom") or []:
        series = re.match(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)", rule.get("seriesQuery", "")).group(1)
        name = (rule.get("name") or {}).get("as") or series
        out[name] = rule
    return out


def default_model(source_root):
    """(file name, sha256) of scripts/fetch-model.sh's default model."""
    path = os.path.join(source_root, "scripts", "fetch-model.sh")
    with open(path) as f:
        text = f.read()
    name = re.search(r'^NAME="([^"]+)"', text, re.M)
    sha = re.search(r'^SHA256="([^"]+)"', text, re.M)
    return (name.group(1) if name else None, sha.group(1) if sha else None)


def duration_s(text):
    return int(text) / 1000.0


class RenderCheck:
    def __init__(self, name, objects, k8s_dir, kubernetes, report):
        from k8s_render import pod_templates
        self.name = name
        self.objects = objects
        self.k8s_dir = k8s_dir
        self.source_root = os.path.dirname(os.path.dirname(os.path.abspath(k8s_dir)))
        self.kubernetes = kubernetes
        self.report = report
        namespaces = [o for o in objects if o.get("kind") == "Namespace"]
        self.namespace = namespaces[0]["metadata"]["name"] if len(namespaces) == 1 else None
        self.ns_labels = dict(namespaces[0]["metadata"].get("labels") or {}) if namespaces else {}
        if self.namespace:
            # The apiserver adds this label to every namespace.
            self.ns_labels["kubernetes.io/metadata.name"] = self.namespace
        self.by_kind = {}
        for o in objects:
            self.by_kind.setdefault(o.get("kind"), []).append(o)
        self.pods = [Pod(w, t, w["metadata"].get("namespace")) for w, t in pod_templates(objects)]

    def where(self, o, detail=""):
        return f"[{self.name}] {obj_id(o)}{detail}"

    def c(self, ok, o, message, detail=""):
        return self.report.check(ok, self.where(o, detail), message)

    def kind(self, k):
        return self.by_kind.get(k, [])

    def run(self):
        before = len(self.report.errors)
        self.check_objects()
        if len(self.report.errors) > before:
            self.report.check(False, f"[{self.name}]", "cross-references not checked: fix the objects first")
            return
        try:
            self.check_cross_references()
        except Exception as e:  # a malformed object the checks did not expect
            self.report.check(False, f"[{self.name}]", f"cross-reference check crashed: {e!r}")

    def check_cross_references(self):
        self.check_workloads()
        self.check_services()
        self.check_router_targets()
        self.check_hpas()
        self.check_pdbs()
        self.check_network_policies()
        self.check_service_monitors()
        self.check_alert_metrics()
        self.check_overlay_specifics()

    # -- every object ------------------------------------------------------
    def check_objects(self):
        seen = set()
        self.report.check(self.namespace is not None, f"[{self.name}]", "expected exactly one Namespace")
        for o in self.objects:
            check_schema(self.kubernetes, o, self.report, self.where(o))
            key = (o.get("kind"), o.get("metadata", {}).get("name"))
            self.c(key not in seen, o, "defined twice")
            seen.add(key)
            ns = o.get("metadata", {}).get("namespace")
            if o.get("kind") in CLUSTER_SCOPED:
                self.c(ns is None, o, "cluster-scoped object with a namespace")
            else:
                self.c(ns == self.namespace, o, f"namespace {ns!r}, expected {self.namespace!r}")
            labels = o.get("metadata", {}).get("labels") or {}
            self.c(labels.get("app.kubernetes.io/part-of") == "pdserve", o,
                   "missing label app.kubernetes.io/part-of=pdserve")

    # -- Deployments, Jobs, containers --------------------------------------
    def check_workloads(self):
        from kubernetes.utils import parse_quantity
        from k8s_render import config_maps, env_values, expand, parse_flags, split_host_port
        maps = config_maps(self.objects)
        model_name = self.check_model_config(maps)
        tiers = {}
        for pod in self.pods:
            w = pod.workload
            self.c(pod.labels.get("app.kubernetes.io/part-of") == "pdserve", w,
                   "pod template lacks app.kubernetes.io/part-of=pdserve (NetworkPolicies select on it)")
            spec_sec = pod.spec.get("securityContext") or {}
            self.c(spec_sec.get("runAsNonRoot") is True, w, "pods must set runAsNonRoot")
            self.c(pod.spec.get("automountServiceAccountToken") is False, w,
                   "pods call no API: automountServiceAccountToken must be false")
            node_selector = pod.spec.get("nodeSelector") or {}
            self.c(node_selector.get("kubernetes.io/arch") == "amd64", w,
                   "pods must select kubernetes.io/arch: amd64 (the images are amd64 only)")
            for c in pod.containers + pod.init_containers:
                image = c.get("image", "")
                self.c(re.search(r"(:[^/:]+|@sha256:[0-9a-f]+)$", image) is not None
                       and not image.endswith(":latest"), w,
                       f"image {image!r} needs a pinned tag", f" container {c['name']}")
                sc = c.get("securityContext") or {}
                self.c(sc.get("allowPrivilegeEscalation") is False
                       and sc.get("readOnlyRootFilesystem") is True
                       and (sc.get("capabilities") or {}).get("drop") == ["ALL"], w,
                       "containers must drop ALL capabilities, forbid privilege escalation and "
                       "use a read-only root filesystem", f" container {c['name']}")
                req = (c.get("resources") or {}).get("requests") or {}
                lim = (c.get("resources") or {}).get("limits") or {}
                ok = self.c("cpu" in req and "memory" in req and "memory" in lim, w,
                            "needs requests.cpu, requests.memory and limits.memory",
                            f" container {c['name']}")
                if ok:
                    self.c(parse_quantity(lim["memory"]) >= parse_quantity(req["memory"]), w,
                           "limits.memory < requests.memory", f" container {c['name']}")
                if c["name"] == "fetch-model":
                    self.c({"configMapRef": {"name": MODEL_CONFIG}} in (c.get("envFrom") or []), w,
                           f"fetch-model must take its model from the ConfigMap {MODEL_CONFIG} "
                           "(envFrom), the one the tiers' --model names")
                mounts = {m["name"] for m in c.get("volumeMounts") or []}
                vols = {v["name"] for v in pod.spec.get("volumes") or []}
                self.c(mounts <= vols, w, f"mounts undefined volumes {sorted(mounts - vols)}",
                       f" container {c['name']}")
            if w["kind"] == "Deployment":
                self.c(self._selector_ok(w["spec"].get("selector"), pod.labels), w,
                       "spec.selector does not match the pod template labels")
                strat = w["spec"].get("strategy") or {}
                ru = strat.get("rollingUpdate") or {}
                if any("nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})
                       for c in pod.containers):
                    self.c(strat.get("type") == "RollingUpdate" and ru.get("maxUnavailable") == 1
                           and ru.get("maxSurge") == 0, w,
                           "a GPU Deployment must roll with maxSurge 0 / maxUnavailable 1: a surge "
                           "pod cannot schedule on a full GPU pool")
                else:
                    self.c(strat.get("type") == "RollingUpdate" and ru.get("maxUnavailable") == 0
                           and ru.get("maxSurge") == 1, w,
                           "rolling update must be maxUnavailable 0 / maxSurge 1")
                for i, tsc in enumerate(pod.spec.get("topologySpreadConstraints") or []):
                    self.c(self._selector_ok(tsc.get("labelSelector"), pod.labels), w,
                           "labelSelector does not select this Deployment's pods",
                           f" topologySpreadConstraints[{i}]")
                self.c(len(pod.spec.get("topologySpreadConstraints") or []) > 0, w,
                       "needs topologySpreadConstraints")

            binary, c = pod.binary()
            if binary is None:
                continue
            tier = BINARIES[binary]["tier"]
            self.c(tier not in tiers, w, f"a second {tier} Deployment")
            tiers[tier] = pod
            self.c(pod.labels.get("app.kubernetes.io/component") == tier, w,
                   f"pod label app.kubernetes.io/component should be {tier}")
            where = f" container {c['name']}"
            env = env_values(c, pod.namespace, f"{pod.name}-0", maps)
            missing = []
            args = [expand(a, env, missing) for a in c.get("args") or []]
            self.c(not missing, w, f"args use undefined variables {missing}", where)
            try:
                flags = parse_flags(args)
            except ValueError as e:
                self.c(False, w, str(e), where)
                continue
            known = flags_defined(self.source_root, BINARIES[binary]["flag_sources"])
            unknown = sorted(set(flags) - known)
            self.c(not unknown, w, f"{binary} has no flags {unknown}", where)

            ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
            # --listen <-> containerPort grpc <-> probes.
            if self.c("listen" in flags, w, "--listen missing", where):
                host, listen_port = split_host_port(flags["listen"])
                self.c(host == "0.0.0.0", w, f"--listen host {host}: pods must listen on 0.0.0.0", where)
                self.c(ports.get("grpc") == listen_port, w,
                       f"containerPort 'grpc' {ports.get('grpc')} != --listen port {listen_port}", where)
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    p = c.get(probe)
                    if p is None:
                        continue
                    if "grpc" in p:
                        self.c(p["grpc"].get("port") == listen_port, w,
                               f"{probe} gRPC port {p['grpc'].get('port')} != --listen port {listen_port}", where)
                    elif "tcpSocket" in p:
                        self.c(pod.resolve_port(p["tcpSocket"]["port"]) == listen_port, w,
                               f"{probe} tcpSocket port does not resolve to {listen_port}", where)
                    else:
                        self.c(False, w, f"{probe} must be a gRPC (or TCP) probe", where)
                self.c("grpc" in (c.get("readinessProbe") or {}), w,
                       "readinessProbe must be the gRPC health check", where)
                self.c(c.get("livenessProbe") is not None, w, "livenessProbe missing", where)
            self.c(ports.get("metrics") == METRICS_PORT, w,
                   f"containerPort 'metrics' must be {METRICS_PORT}", where)
            # The HPAs' metrics come from this endpoint: it must be on, on that port.
            self.c(flags.get("metrics_port") == str(METRICS_PORT), w,
                   f"--metrics_port must be {METRICS_PORT} (the 'metrics' containerPort)", where)
            if binary == "pdserve-decode":
                ok = self.c("kv_listen" in flags and "kv_advertise" in flags, w,
                            "decode needs --kv_listen and --kv_advertise", where)
                if ok:
                    kv_host, kv_port = split_host_port(flags["kv_listen"])
                    self.c(kv_host == "0.0.0.0", w, "--kv_listen must listen on 0.0.0.0", where)
                    self.c(ports.get("kv") == kv_port, w,
                           f"containerPort 'kv' {ports.get('kv')} != --kv_listen port {kv_port}", where)
                    raw = next(a for a in c["args"] if a.startswith("--kv_advertise="))
                    self.c(raw == f"--kv_advertise=$(POD_IP):{kv_port}", w,
                           "--kv_advertise must be $(POD_IP):<kv port>", where)
                    pod_ip = [e for e in c.get("env") or [] if e["name"] == "POD_IP"]
                    self.c(pod_ip and pod_ip[0].get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                           == "status.podIP", w, "env POD_IP must come from status.podIP", where)
            # Model: a file the fetch script produces, on a mounted volume (or baked).
            if self.c("model" in flags, w, "--model missing", where):
                self.c(os.path.basename(flags["model"]) == model_name, w,
                       f"--model {flags['model']} is not the ConfigMap pdserve-model's MODEL_FILE "
                       f"{model_name}", where)
                mount = [m for m in c.get("volumeMounts") or []
                         if flags["model"].startswith(m["mountPath"].rstrip("/") + "/")]
                fetchers = [ic for ic in pod.init_containers if ic["name"] == "fetch-model"]
                if mount:
                    self.c(mount[0].get("readOnly") is True, w, "model mount should be read-only", where)
                    self.c(any(m["name"] == mount[0]["name"] for ic in fetchers
                               for m in ic.get("volumeMounts") or []), w,
                           "the model volume is not filled by a fetch-model initContainer", where)
                else:
                    self.c(not fetchers, w, "fetch-model initContainer but no model volume", where)
            # Drain: the grace period covers preStop + --drain_timeout_ms.
            if self.c("drain_timeout_ms" in flags, w, "--drain_timeout_ms must be explicit", where):
                pre = (((c.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}).get("seconds", 0)
                grace = pod.spec.get("terminationGracePeriodSeconds", 30)
                need = pre + duration_s(flags["drain_timeout_ms"]) + 1
                self.c(grace >= need, w, f"terminationGracePeriodSeconds {grace} < preStop {pre} s + "
                       f"drain {duration_s(flags['drain_timeout_ms'])} s + 1", where)
                self.c(pre > 0, w, "needs a preStop sleep (endpoint removal before SIGTERM)", where)
            if "threads" in flags and "cpu" in ((c.get("resources") or {}).get("requests") or {}):
                cpu = parse_quantity(c["resources"]["requests"]["cpu"])
                self.c(int(flags["threads"]) <= cpu, w,
                       f"--threads {flags['threads']} > requests.cpu {cpu}", where)
        for t in ("router", "prefill", "decode"):
            self.report.check(t in tiers, f"[{self.name}]", f"no {t} Deployment")
        self.tiers = tiers

    def check_model_config(self, maps):
        """The ConfigMap that names the model in one place: its three keys, a
        known URI scheme, and (as shipped) the default model of
        scripts/fetch-model.sh, which the tests run. Returns MODEL_FILE."""
        data = maps.get(MODEL_CONFIG)
        if not self.report.check(data is not None, f"[{self.name}]", f"no ConfigMap {MODEL_CONFIG}"):
            return None
        cm = [o for o in self.kind("ConfigMap") if o["metadata"]["name"] == MODEL_CONFIG][0]
        missing = sorted({"MODEL_FILE", "MODEL_SHA256", "MODEL_URI"} - set(data))
        self.c(not missing, cm, f"missing keys {missing}")
        uri = data.get("MODEL_URI", "")
        self.c(re.match(r"(pypi:[^#]+#.+|https?://.+|file:///.+)$", uri) is not None, cm,
               f"MODEL_URI {uri!r}: want pypi:<requirements>#<member glob>, https://, http:// or file:///")
        self.c(re.fullmatch(r"[0-9a-f]{64}", data.get("MODEL_SHA256", "")) is not None, cm,
               "MODEL_SHA256 must be 64 lowercase hex digits")
        name, sha = default_model(self.source_root)
        self.c((data.get("MODEL_FILE"), data.get("MODEL_SHA256")) == (name, sha), cm,
               f"ships {data.get('MODEL_FILE')} but scripts/fetch-model.sh's default (the tested "
               f"model) is {name}")
        return data.get("MODEL_FILE")

    def _selector_ok(self, selector, labels):
        from k8s_render import labels_match
        return selector is not None and labels_match(selector, labels)

    def pods_selected(self, selector, namespace=None):
        from k8s_render import labels_match
        return [p for p in self.pods
                if labels_match(selector, p.labels) and (namespace is None or p.namespace == namespace)]

    # -- Services -----------------------------------------------------------
    def check_services(self):
        for s in self.kind("Service"):
            sel = s["spec"].get("selector")
            pods = self.pods_selected(sel) if sel else []
            if not self.c(len(pods) == 1, s, f"selector {sel} matches {len(pods)} workloads, expected 1"):
                continue
            pod = pods[0]
            self.c(pod.kind == "Deployment", s, "selects a non-Deployment")
            for p in s["spec"].get("ports") or []:
                target = p.get("targetPort", p["port"])
                self.c(pod.resolve_port(target) is not None, s,
                       f"targetPort {target!r} is not a container port of {pod.name}", f" port {p.get('name')}")
            if pod.tier in ("prefill", "decode"):
                self.c(s["spec"].get("clusterIP") == "None", s, "worker Services must be headless")
                self.c(s["spec"].get("publishNotReadyAddresses") is False, s,
                       "publishNotReadyAddresses must be false")
        for pod in self.pods:
            if pod.kind == "Deployment":
                svcs = [s for s in self.kind("Service")
                        if s["spec"].get("selector") and self._selector_ok(s["spec"]["selector"], pod.labels)]
                self.c(len(svcs) == 1, pod.workload, f"exposed by {len(svcs)} Services, expected 1")

    def service(self, name):
        for s in self.kind("Service"):
            if s["metadata"]["name"] == name:
                return s
        return None

    # -- router -> workers --------------------------------------------------
    def check_router_targets(self):
        from k8s_render import (env_values, expand, parse_flags, split_host_port,
                                split_worker_target)
        router = self.tiers.get("router")
        if router is None:
            return
        _, c = router.binary()
        env = env_values(c, router.namespace, "router-0")
        flags = parse_flags([expand(a, env) for a in c.get("args") or []])
        w = router.workload
        for flag, tier in (("prefill", "prefill"), ("decode", "decode")):
            if not self.c(flag in flags, w, f"router --{flag} missing"):
                continue
            worker = self.tiers.get(tier)
            for target in flags[flag].split(","):
                where = f" --{flag}={target}"
                # As router/worker_target.cc parses it. Only dns:/// expands
                # a headless Service into its pods; a plain host:port would be
                # one channel to whichever pod the name resolves to first.
                try:
                    dns, host, port = split_worker_target(target)
                except ValueError as e:
                    self.c(False, w, f"the router would reject this target: {e}", where)
                    continue
                self.c(dns, w, "use dns:///host:port so every pod of the tier is a worker",
                       where)
                parts = host.split(".")
                svc_name = parts[0]
                ns = parts[1] if len(parts) > 1 else router.namespace
                self.c(len(parts) in (1, 2) or ".".join(parts[2:]) == CLUSTER_DOMAIN, w,
                       f"host {host} is not <service>.<namespace>.{CLUSTER_DOMAIN}", where)
                self.c(ns == self.namespace, w, f"namespace {ns} != {self.namespace}", where)
                s = self.service(svc_name)
                if not self.c(s is not None, w, f"no Service {svc_name}", where):
                    continue
                sp = [p for p in s["spec"]["ports"] if p["port"] == port]
                if not self.c(len(sp) == 1, w, f"Service {svc_name} has no port {port}", where):
                    continue
                self.c(s["spec"].get("clusterIP") == "None", w,
                       f"Service {svc_name} must be headless (one address per pod)", where)
                pods = self.pods_selected(s["spec"]["selector"])
                self.c(worker is not None and pods == [worker], w,
                       f"Service {svc_name} does not select the {tier} pods", where)
                if worker is not None:
                    _, wc = worker.binary()
                    wflags = parse_flags([expand(a, env_values(wc, worker.namespace, "w-0"))
                                          for a in wc.get("args") or []])
                    listen_port = split_host_port(wflags["listen"])[1]
                    self.c(worker.resolve_port(sp[0].get("targetPort", port)) == listen_port, w,
                           f"Service {svc_name} port {port} does not reach the {tier} --listen port "
                           f"{listen_port}", where)

    # -- HPAs ---------------------------------------------------------------
    def check_hpas(self):
        exposed = adapter_metrics(self.k8s_dir)
        targeted = {}
        for h in self.kind("HorizontalPodAutoscaler"):
            ref = h["spec"]["scaleTargetRef"]
            deps = [d for d in self.kind("Deployment") if d["metadata"]["name"] == ref.get("name")]
            if not self.c(ref.get("kind") == "Deployment" and ref.get("apiVersion") == "apps/v1"
                          and len(deps) == 1, h, f"scaleTargetRef {ref} names no Deployment"):
                continue
            d = deps[0]
            targeted[d["metadata"]["name"]] = h
            self.c("replicas" not in d["spec"], h,
                   f"{d['metadata']['name']} sets spec.replicas, which fights the HPA on every apply")
            lo, hi = h["spec"].get("minReplicas", 1), h["spec"]["maxReplicas"]
            self.c(1 <= lo <= hi, h, f"minReplicas {lo} / maxReplicas {hi}")
            down = ((h["spec"].get("behavior") or {}).get("scaleDown") or {})
            self.c("stabilizationWindowSeconds" in down, h,
                   "behavior.scaleDown.stabilizationWindowSeconds must be set")
            pod = next(p for p in self.pods if p.workload is d)
            binary, _ = pod.binary()
            want = BINARIES.get(binary, {}).get("hpa_metric")
            names = []
            for m in h["spec"].get("metrics") or []:
                self.c(m.get("type") == "Pods", h, "metrics must be per-pod (type Pods)")
                if m.get("type") == "Pods":
                    name = m["pods"]["metric"]["name"]
                    names.append(name)
                    self.c(name in exposed, h,
                           f"metric {name} is not exposed by prometheus-adapter/values.yaml")
                    self.c(m["pods"]["target"].get("type") == "AverageValue", h,
                           "Pods metrics take an AverageValue target")
            self.c(names == [want], h, f"{binary} should scale on exactly {want}, not {names}")
        for tier in ("prefill", "decode"):
            pod = self.tiers.get(tier)
            if pod is not None:
                self.c(pod.name in targeted, pod.workload, "no HorizontalPodAutoscaler")

    # -- PDBs ---------------------------------------------------------------
    def check_pdbs(self):
        covered = set()
        for b in self.kind("PodDisruptionBudget"):
            pods = self.pods_selected(b["spec"].get("selector"))
            self.c(len(pods) == 1, b, f"selector matches {len(pods)} workloads, expected 1")
            covered |= {p.name for p in pods}
            self.c(("maxUnavailable" in b["spec"]) != ("minAvailable" in b["spec"]), b,
                   "set exactly one of maxUnavailable / minAvailable")
            self.c(b["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow", b,
                   "unhealthyPodEvictionPolicy must be AlwaysAllow (pods that never became ready "
                   "must not block node drains)")
        for p in self.pods:
            if p.kind == "Deployment":
                self.c(p.name in covered, p.workload, "no PodDisruptionBudget")

    # -- NetworkPolicies ----------------------------------------------------
    def _peer_matches(self, peer, src):
        """Does a NetworkPolicy peer match `src` ({namespace labels, pod labels, ip})?"""
        from k8s_render import labels_match
        if "ipBlock" in peer:
            return src.get("ip_any", True)
        ns_ok = (labels_match(peer["namespaceSelector"], src["ns_labels"]) if "namespaceSelector" in peer
                 else src["namespace"] == self.namespace)
        pod_ok = labels_match(peer["podSelector"], src["labels"]) if "podSelector" in peer else True
        return ns_ok and pod_ok

    def _port_matches(self, rule_ports, port, protocol, dst_pod):
        if not rule_ports:
            return True
        for rp in rule_ports:
            if rp.get("protocol", "TCP") != protocol:
                continue
            p = rp.get("port")
            if p is None:
                return True
            if isinstance(p, str):
                p = dst_pod.resolve_port(p) if dst_pod is not None else None
            end = rp.get("endPort", p)
            if p is not None and p <= port <= end:
                return True
        return False

    def _allowed(self, src, dst, port, protocol="TCP"):
        """Would the policies let src open port on dst? src/dst: endpoint dicts;
        a dict with a 'pod' is a pdserve pod (policies may select it)."""
        from k8s_render import labels_match
        policies = self.kind("NetworkPolicy")

        def direction_ok(policy_type, me, peer_ep, rules_key, peer_key, port_pod):
            pod = me.get("pod")
            if pod is None:
                return True  # not a pod these policies govern
            selecting = [np for np in policies
                         if labels_match(np["spec"]["podSelector"], pod.labels)
                         and policy_type in np["spec"].get("policyTypes", ["Ingress"])]
            if not selecting:
                return True
            for np in selecting:
                for rule in np["spec"].get(rules_key) or []:
                    peers = rule.get(peer_key)
                    if (not peers or any(self._peer_matches(pe, peer_ep) for pe in peers)) and \
                            self._port_matches(rule.get("ports"), port, protocol, port_pod):
                        return True
            return False

        return (direction_ok("Egress", src, dst, "egress", "to", dst.get("pod"))
                and direction_ok("Ingress", dst, src, "ingress", "from", dst.get("pod")))

    def endpoint(self, pod):
        return {"pod": pod, "labels": pod.labels, "namespace": self.namespace,
                "ns_labels": self.ns_labels, "ip_any": True}

    def check_network_policies(self):
        nps = self.kind("NetworkPolicy")
        here = f"[{self.name}] NetworkPolicies"
        for np in nps:
            self.c(len(self.pods_selected(np["spec"]["podSelector"])) > 0, np, "podSelector selects no pods")
            for key, peer_key in (("ingress", "from"), ("egress", "to")):
                for i, rule in enumerate(np["spec"].get(key) or []):
                    for pe in rule.get(peer_key) or []:
                        if "podSelector" in pe and "namespaceSelector" not in pe:
                            self.c(len(self.pods_selected(pe["podSelector"])) > 0, np,
                                   f"{key}[{i}] podSelector selects no pods")
        # Exactly the intended flows between pdserve pods.
        wanted = set()
        for a, b, port_name in (("router", "prefill", "grpc"), ("router", "decode", "grpc"),
                                ("prefill", "decode", "kv")):
            if a in self.tiers and b in self.tiers:
                wanted.add((a, b, self.tiers[b].resolve_port(port_name)))
        for a, pa in self.tiers.items():
            for b, pb in self.tiers.items():
                for _, p in pb.ports():
                    port = p["containerPort"]
                    got = self._allowed(self.endpoint(pa), self.endpoint(pb), port)
                    self.report.check(got == ((a, b, port) in wanted), here,
                                      f"{a} -> {b}:{port} is {'allowed' if got else 'denied'}, "
                                      f"expected {'allowed' if (a, b, port) in wanted else 'denied'}")
        outsider = {"labels": {}, "namespace": "clients", "ns_labels": {"kubernetes.io/metadata.name": "clients"},
                    "ip_any": True}
        monitoring = {"labels": {"app.kubernetes.io/name": "prometheus"}, "namespace": "monitoring",
                      "ns_labels": {"kubernetes.io/metadata.name": "monitoring"}, "ip_any": True}
        dns = {"labels": {"k8s-app": "kube-dns"}, "namespace": "kube-system",
               "ns_labels": {"kubernetes.io/metadata.name": "kube-system"}, "ip_any": True}
        for t, pod in self.tiers.items():
            grpc = pod.resolve_port("grpc")
            ep = self.endpoint(pod)
            self.report.check(self._allowed(outsider, ep, grpc) == (t == "router"), here,
                              f"clients -> {t}:{grpc} should be {'allowed' if t == 'router' else 'denied'}")
            self.report.check(self._allowed(monitoring, ep, METRICS_PORT), here,
                              f"monitoring -> {t}:{METRICS_PORT} (scrape) should be allowed")
            for proto in ("UDP", "TCP"):
                self.report.check(self._allowed(ep, dns, 53, proto), here, f"{t} -> kube-dns:53/{proto} denied")
        for pod in self.pods:
            if pod.kind == "Job":
                self.report.check(self._allowed(self.endpoint(pod), dns, 53, "UDP"), here,
                                  f"{pod.name} -> kube-dns denied")

    # -- PrometheusRule -----------------------------------------------------
    def check_alert_metrics(self):
        """Every pdserve_* series an alert reads is one the binaries export
        (a histogram's _bucket/_sum/_count count as its name)."""
        rules = self.kind("PrometheusRule")
        if not rules:
            return
        known = defined_metrics(self.source_root)
        for pr in rules:
            for g in pr["spec"]["groups"]:
                for r in g.get("rules") or []:
                    for name in re.findall(r"\b(pdserve_[a-z0-9_]+)", r.get("expr", "")):
                        base = re.sub(r"_(bucket|sum|count)$", "", name)
                        self.c(name in known or base in known, pr,
                               f"alert {r.get('alert')}: no binary exports {name}")

    # -- ServiceMonitor -----------------------------------------------------
    def check_service_monitors(self):
        from k8s_render import labels_match
        sms = self.kind("ServiceMonitor")
        self.report.check(len(sms) == 1, f"[{self.name}]", f"{len(sms)} ServiceMonitors, expected 1")
        for sm in sms:
            svcs = [s for s in self.kind("Service")
                    if labels_match(sm["spec"]["selector"], s["metadata"].get("labels"))]
            names = {s["metadata"]["name"] for s in svcs}
            for t, pod in self.tiers.items():
                mine = [s for s in svcs if self.pods_selected(s["spec"].get("selector") or {"x": "y"}) == [pod]]
                self.c(len(mine) == 1, sm, f"scrapes no Service of the {t} pods (selects {sorted(names)})")
            for ep in sm["spec"]["endpoints"]:
                for s in svcs:
                    sp = [p for p in s["spec"]["ports"] if p.get("name") == ep["port"]]
                    if self.c(len(sp) == 1, sm, f"Service {s['metadata']['name']} has no port {ep['port']}"):
                        pods = self.pods_selected(s["spec"]["selector"])
                        self.c(all(p.resolve_port(sp[0].get("targetPort")) == METRICS_PORT for p in pods), sm,
                               f"Service {s['metadata']['name']} port {ep['port']} does not reach "
                               f"container port {METRICS_PORT}")

    # -- overlay specifics --------------------------------------------------
    def check_overlay_specifics(self):
        gpu = self.name.startswith("gpu")
        for t, pod in self.tiers.items():
            _, c = pod.binary()
            limits = (c.get("resources") or {}).get("limits") or {}
            wants_gpu = gpu and t in ("prefill", "decode")
            self.c(("nvidia.com/gpu" in limits) == wants_gpu, pod.workload,
                   f"nvidia.com/gpu limit {'missing' if wants_gpu else 'unexpected'}")
            if wants_gpu:
                self.c(limits.get("nvidia.com/gpu") == "1", pod.workload, "one GPU per worker pod")
                self.c(any(tol.get("key") == "nvidia.com/gpu" for tol in pod.spec.get("tolerations") or []),
                       pod.workload, "needs the nvidia.com/gpu toleration")
                # The GPU limit places the pod; GPU Operator labels are optional.
                labels = sorted(k for k in pod.spec.get("nodeSelector") or {}
                                if k.startswith("nvidia.com/"))
                self.c(not labels, pod.workload,
                       f"nodeSelector on {labels} requires the GPU Operator's labels; the "
                       "nvidia.com/gpu limit places the pod (pin products with components/gpu-product)")
                if "gpu-product" in self.name:
                    terms = ((((pod.spec.get("affinity") or {}).get("nodeAffinity") or {})
                              .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
                             .get("nodeSelectorTerms") or [])
                    self.c(any(e.get("key") == "nvidia.com/gpu.product" and e.get("values")
                               for t in terms for e in t.get("matchExpressions") or []),
                           pod.workload, "gpu-product: no nvidia.com/gpu.product node affinity")


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    k8s_dir = os.path.abspath(argv[1])
    if shutil.which("kubectl") is None:
        print("SKIP: kubectl not found; the Kubernetes manifests were not validated")
        return 0
    kubernetes = ensure_kubernetes_client()  # brings PyYAML too
    from k8s_render import kubectl, render_targets
    print(f"kubectl: {subprocess.run([kubectl(), 'version', '--client'], capture_output=True, text=True).stdout.strip()}")
    print(f"kubernetes (Python client): {kubernetes.__version__}")
    report = Report()
    try:
        renders = render_targets(k8s_dir)
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    for name, objects in renders.items():
        kinds = {}
        for o in objects:
            kinds[o.get("kind")] = kinds.get(o.get("kind"), 0) + 1
        print(f"rendered {name}: {len(objects)} objects "
              f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
        RenderCheck(name, objects, k8s_dir, kubernetes, report).run()
    for e in report.errors:
        print(f"FAIL {e}")
    print(f"{report.checks} checks, {len(report.errors)} failed, renders: {', '.join(renders)}")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
