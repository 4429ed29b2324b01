"""Renders deploy/k8s with `kubectl kustomize` and reads the result.

Shared by validate_manifests.py and manifest_args_test.py. Standard library
plus PyYAML only.
"""

import os
import re
import shutil
import subprocess
import tempfile

import yaml

# Values the downward API would give, for expanding $(VAR) in args.
FAKE_POD_IP = "10.0.0.1"


def kubectl():
    return shutil.which("kubectl")


def render_dir(path):
    """`kubectl kustomize path` as a list of objects."""
    proc = subprocess.run([kubectl(), "kustomize", path], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path} failed:\n{proc.stderr.strip()}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d is not None]


def render_with_components(k8s_dir, overlay, components):
    """Renders `overlay` with kustomize Components added to its own
    kustomization.yaml (so its images and patches apply to what the components
    add too), from a temporary copy of the tree."""
    import yaml as _yaml
    with tempfile.TemporaryDirectory(prefix="pdserve-k8s-") as tmp:
        root = os.path.join(tmp, "k8s")
        shutil.copytree(k8s_dir, root)
        path = os.path.join(root, "overlays", overlay, "kustomization.yaml")
        with open(path) as f:
            k = _yaml.safe_load(f)
        k["components"] = (k.get("components") or []) + [f"../../components/{c}" for c in components]
        with open(path, "w") as f:
            _yaml.safe_dump(k, f, sort_keys=False)
        return render_dir(os.path.dirname(path))


def render_on_top(k8s_dir, overlay, components, namespace=None):
    """Renders the way an operator builds on an overlay: a kustomization of
    theirs with `resources: [the overlay]`, the components, the overlay's
    `images:`, `transformers: [params]` (deploy/k8s/README.md, "Parameters")
    and, when given, `namespace:`, from a temporary copy of the tree."""
    import yaml as _yaml
    with tempfile.TemporaryDirectory(prefix="pdserve-k8s-") as tmp:
        root = os.path.join(tmp, "k8s")
        shutil.copytree(k8s_dir, root)
        with open(os.path.join(root, "overlays", overlay, "kustomization.yaml")) as f:
            images = _yaml.safe_load(f).get("images") or []
        stack = os.path.join(root, "stack")
        os.makedirs(stack)
        k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
             "resources": [f"../overlays/{overlay}"],
             "components": [f"../components/{c}" for c in components],
             "images": images, "transformers": ["../params"]}
        if namespace is not None:
            k["namespace"] = namespace
        with open(os.path.join(stack, "kustomization.yaml"), "w") as f:
            _yaml.safe_dump(k, f, sort_keys=False)
        return render_dir(stack)


# Components that exclude each other: one autoscaler per Deployment, one
# source of the model (model-egress redirects a download, which model-baked
# does not have).
EXCLUSIVE = [{"autoscaling-hpa", "autoscaling-keda"}, {"model-baked", "model-pvc"},
             {"model-baked", "model-egress"}, {"kv-tls", "gpu-kv-nccl"}]
# Components that patch what another one adds.
REQUIRES = {"gateway-inference-pool": ["gateway"], "kv-tls": ["tls"]}
# Components that patch what the overlay's own patches add (the GPU
# tolerations): they go in a kustomization on top of the overlay, never into
# it (components run before the kustomization's own patches).
ON_TOP = {"gpu-tolerations"}

# Whole deployments as an operator would assemble them, rendered beside the
# single components so that components that touch the same objects are
# checked together.
COMBINATIONS = [
    ("cpu", ["monitoring", "alerts", "autoscaling-hpa", "model-pvc", "model-egress"]),
    ("cpu", ["monitoring", "alerts", "autoscaling-keda", "model-baked", "gateway",
             "gateway-inference-pool"]),
    ("gpu", ["monitoring", "alerts", "autoscaling-keda", "gpu-kv-nccl", "gpu-product", "model-pvc"]),
    ("gpu", ["monitoring", "autoscaling-hpa", "gpu-product", "gpu-tolerations", "model-baked"]),
    ("cpu", ["tls", "kv-tls", "kv-secret", "router-auth", "monitoring", "alerts", "autoscaling-keda"]),
    ("gpu", ["tls", "kv-tls", "monitoring", "autoscaling-keda", "model-pvc"]),
    ("gpu", ["tls", "kv-secret", "gpu-kv-nccl", "monitoring", "autoscaling-hpa", "model-pvc"]),
]
# The same in a namespace of the operator's (their kustomization sets
# `namespace:`): everything that names the namespace must follow it.
OTHER_NAMESPACE = "llm"
NAMESPACED = [
    ("cpu", ["tls", "kv-tls", "kv-secret", "router-auth", "monitoring", "alerts", "autoscaling-keda",
             "gateway", "gateway-inference-pool", "model-egress"]),
    ("gpu", ["tls", "kv-secret", "gpu-kv-nccl", "monitoring", "alerts", "autoscaling-hpa",
             "model-pvc"]),
]


def compatible(overlay, components):
    """A "gpu-" component needs the gpu overlay; exclusive pairs never meet;
    a component comes with the ones it patches."""
    if overlay != "gpu" and any(c.startswith("gpu-") for c in components):
        return False
    if any(r not in components for c in components for r in REQUIRES.get(c, [])):
        return False
    return all(len(group & set(components)) <= 1 for group in EXCLUSIVE)


def target_names(k8s_dir):
    """{name: (overlay, components, namespace)} of what render_targets
    renders: every overlay, each component on the cpu overlay (a "gpu-"
    component on the gpu overlay; with the components it REQUIRES),
    COMBINATIONS, and NAMESPACED in OTHER_NAMESPACE (namespace None: the
    overlay's own). Components go into the overlay's kustomization, unless
    one is ON_TOP or a namespace is set: then all go into one on top of it."""
    out = {}
    overlays_dir = os.path.join(k8s_dir, "overlays")
    for name in sorted(os.listdir(overlays_dir)):
        if os.path.exists(os.path.join(overlays_dir, name, "kustomization.yaml")):
            out[name] = (name, [], None)
    components_dir = os.path.join(k8s_dir, "components")
    if os.path.isdir(components_dir):
        for name in sorted(os.listdir(components_dir)):
            if os.path.exists(os.path.join(components_dir, name, "kustomization.yaml")):
                overlay = "gpu" if name.startswith("gpu-") else "cpu"
                out[f"{overlay}+{name}"] = (overlay, REQUIRES.get(name, []) + [name], None)

        def have(components):
            return all(os.path.isdir(os.path.join(components_dir, c)) for c in components)

        for overlay, components in COMBINATIONS:
            assert compatible(overlay, components), (overlay, components)
            if have(components):
                out["+".join([overlay] + components)] = (overlay, components, None)
        for overlay, components in NAMESPACED:
            assert compatible(overlay, components), (overlay, components)
            if have(components):
                name = f"{OTHER_NAMESPACE}:" + "+".join([overlay] + components)
                out[name] = (overlay, components, OTHER_NAMESPACE)
    return out


def render_targets(k8s_dir, only=None):
    """{name: objects} of target_names (those in `only`, when given)."""
    out = {}
    for name, (overlay, components, namespace) in target_names(k8s_dir).items():
        if only is not None and name not in only:
            continue
        if namespace is not None or ON_TOP & set(components):
            out[name] = render_on_top(k8s_dir, overlay, components, namespace)
        elif components:
            out[name] = render_with_components(k8s_dir, overlay, components)
        else:
            out[name] = render_dir(os.path.join(k8s_dir, "overlays", overlay))
    return out


def mounted_secret(pod_spec, container, path):
    """(Secret name, key) of the file `path` when a Secret volume mounted in
    `container` provides it (through its items, if listed), else None."""
    for m in container.get("volumeMounts") or []:
        root = m["mountPath"].rstrip("/") + "/"
        if not path.startswith(root):
            continue
        vols = [v for v in pod_spec.get("volumes") or [] if v["name"] == m["name"]]
        secret = vols[0].get("secret") if vols else None
        if secret is None:
            return None
        rel = path[len(root):]
        items = secret.get("items")
        key = {i["path"]: i["key"] for i in items}.get(rel) if items else rel
        return secret.get("secretName"), key
    return None


def pod_templates(objects):
    """(workload object, pod template) for Deployments and Jobs."""
    out = []
    for o in objects:
        if o.get("kind") in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            out.append((o, o.get("spec", {}).get("template", {})))
    return out


def config_maps(objects):
    """{name: data} of the rendered ConfigMaps."""
    return {o["metadata"]["name"]: o.get("data") or {}
            for o in objects if o.get("kind") == "ConfigMap"}


def env_values(container, pod_namespace, pod_name, maps=None):
    """The container's env as the kubelet would resolve it (downward API
    faked; ConfigMap keys from `maps`, see config_maps). A reference to a
    ConfigMap or key that is not there leaves the variable undefined."""
    values = {}
    for e in container.get("env", []) or []:
        ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
        if "value" in e:
            values[e["name"]] = expand(str(e["value"]), values)
        elif ref is not None:
            data = (maps or {}).get(ref.get("name")) or {}
            if ref.get("key") in data:
                values[e["name"]] = str(data[ref["key"]])
        elif "valueFrom" in e and "fieldRef" in e["valueFrom"]:
            field = e["valueFrom"]["fieldRef"].get("fieldPath")
            values[e["name"]] = {
                "metadata.namespace": pod_namespace,
                "metadata.name": pod_name,
                "status.podIP": FAKE_POD_IP,
            }.get(field, f"<{field}>")
    return values


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text, env, missing=None):
    """Kubernetes $(VAR) expansion of command/args. An undefined variable is
    left as written (as the kubelet does) and added to `missing`."""

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name in env:
            return env[name]
        if missing is not None:
            missing.append(name)
        return m.group(0)

    return _VAR.sub(sub, text)


def parse_flags(args):
    """`--name=value` args as {name: value}; raises on any other form."""
    flags = {}
    for a in args:
        m = re.fullmatch(r"--([A-Za-z0-9_]+)=(.*)", a, re.S)
        if not m:
            raise ValueError(f"argument {a!r} is not of the form --flag=value")
        if m.group(1) in flags:
            raise ValueError(f"flag --{m.group(1)} given twice")
        flags[m.group(1)] = m.group(2)
    return flags


def split_host_port(text):
    """Like common/base/host_port.cc ParseHostPort: host:port, [v6]:port."""
    colon = text.rfind(":")
    if colon < 0:
        raise ValueError(f"expected host:port, got {text!r}")
    host, port = text[:colon], text[colon + 1:]
    if len(host) >= 2 and host[0] == "[" and host[-1] == "]":
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{text!r}: a scheme or an IPv6 address without brackets")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad port in {text!r}")
    return host, int(port)


def split_worker_target(text):
    """Like router/config/worker_target.cc ParseWorkerTarget: host:port (static) or
    dns:///host:port / dns:host:port (every address of the name). Returns
    (dns, host, port); ValueError for what the router would reject."""
    rest, dns = text, text.startswith("dns:")
    if dns:
        rest = text[len("dns:"):]
        if rest.startswith("//"):
            if not rest.startswith("///"):
                raise ValueError(f"{text!r}: a DNS server authority is not supported")
            rest = rest[3:]
    elif "://" in text:
        raise ValueError(f"{text!r}: only host:port and dns:///host:port are supported")
    host, port = split_host_port(rest)
    if not host or port == 0:
        raise ValueError(f"{text!r} needs a host and a non-zero port")
    return dns, host, port


def labels_match(selector, labels):
    """A LabelSelector (matchLabels/matchExpressions) or a plain map."""
    if selector is None:
        return False
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
