#!/usr/bin/env bash
# Start a real Kubernetes control plane on this machine's loopback, from the components
# build.sh built (versions.env): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, Kueue and JobSet (their CRDs installed, their webhooks reached on
# loopback), and kwok with N fake nodes of G GPUs each and kwok's pod lifecycle
# stages. Certificates are made on the spot (DIR/pki); every daemon's pid lands in
# DIR/run/*.pid, and down.sh stops exactly those.
#
#   bash scripts/k8s-testbed/up.sh DIR [--port-base P] [--nodes N] [--gpus G]
#
# Leaves DIR/kubeconfig (cluster admin) and DIR/podium.yaml (backend: kubernetes, with
# the LocalQueue `default` in namespace `default` ready, pointing at ClusterQueue
# `podium`) and prints "ready".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DIR=${1:?usage: up.sh DIR [--port-base P] [--nodes N] [--gpus G] [--podium-config FILE]}
shift
P=19300 NODES=4 GPUS=8 PODIUM_CONFIG_FILE=
while [ $# -gt 0 ]; do
    case $1 in
        --port-base) P=$2; shift 2 ;;
        --nodes) NODES=$2; shift 2 ;;
        --gpus) GPUS=$2; shift 2 ;;
        --podium-config) PODIUM_CONFIG_FILE=$2; shift 2 ;;
        *) echo "up.sh: unknown option $1 (--port-base, --nodes, --gpus, --podium-config)" >&2; exit 2 ;;
    esac
done
PY=${PODIUM_PYTHON:-python3}
"$PY" -c 'import yaml' 2>/dev/null || { echo "up.sh: $PY has no PyYAML (set PODIUM_PYTHON)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "up.sh: openssl is not installed" >&2; exit 1; }
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
trap 'rc=$?; if [ $rc != 0 ]; then echo "up.sh: failed (rc=$rc); logs in $DIR/log" >&2; bash "$HERE/down.sh" "$DIR" >&2 || true; fi' EXIT
if ls "$DIR"/run/*.pid >/dev/null 2>&1; then bash "$HERE/down.sh" "$DIR"; fi
CACHE=$(bash "$HERE/build.sh" | tail -n1)
BIN=$CACHE/bin
rm -rf "$DIR/etcd" "$DIR/log" "$DIR/run" "$DIR/pki" "$DIR/etc"
mkdir -p "$DIR"/{log,run,pki,etc,webhook-certs}
chmod 700 "$DIR/pki"

ETCD=$P APISERVER=$((P + 2)) KCM=$((P + 3)) SCHED=$((P + 4))
KUEUE_HOOK=$((P + 5)) KUEUE_METRICS=$((P + 6)) KUEUE_HEALTH=$((P + 7))
JOBSET_HOOK=$((P + 8)) JOBSET_METRICS=$((P + 9)) JOBSET_HEALTH=$((P + 10)) KWOK=$((P + 11))
for port in $ETCD $((P + 1)) $APISERVER $KCM $SCHED $KUEUE_HOOK $JOBSET_HOOK $KWOK; do
    if ss -Hltn 2>/dev/null | awk '{print $4}' | grep -qE "[:.]$port\$"; then
        echo "up.sh: port $port in use (another cluster? use --port-base)" >&2; exit 1
    fi
done

# --- certificates -------------------------------------------------------------------
pki=$DIR/pki
ossl() { openssl "$@" 2>>"$DIR/log/openssl.log"; }
ossl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=podium-testbed-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt"
cert() {  # name subject [subjectAltName]
    ossl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr"
    local ext=$pki/$1.ext
    echo "basicConstraints=CA:FALSE" > "$ext"
    [ -z "${3:-}" ] || echo "subjectAltName=$3" >> "$ext"
    ossl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 7 -extfile "$ext" -out "$pki/$1.crt"
}
cert apiserver "/CN=kube-apiserver" \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
cert admin "/O=system:masters/CN=podium-testbed-admin"
cert webhook "/CN=127.0.0.1" "IP:127.0.0.1,DNS:localhost"
ossl genrsa -out "$pki/sa.key" 2048
ossl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
cp "$pki/webhook.crt" "$DIR/webhook-certs/tls.crt"
cp "$pki/webhook.key" "$DIR/webhook-certs/tls.key"

KUBECONFIG_FILE=$DIR/kubeconfig
cat > "$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: podium-testbed
  cluster: {server: "https://127.0.0.1:$APISERVER", certificate-authority: "$pki/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$pki/admin.crt", client-key: "$pki/admin.key"}
contexts:
- name: podium-testbed
  context: {cluster: podium-testbed, user: admin, namespace: default}
current-context: podium-testbed
EOF
chmod 600 "$KUBECONFIG_FILE"

start() {  # name command...: in the background, its pid in run/NAME.pid
    local name=$1; shift
    nohup "$@" > "$DIR/log/$name.log" 2>&1 &
    echo $! > "$DIR/run/$name.pid"
}

# --- the control plane ----------------------------------------------------------------
start etcd "$BIN/etcd" --name default --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD" --advertise-client-urls "http://127.0.0.1:$ETCD" \
    --listen-peer-urls "http://127.0.0.1:$((P + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((P + 1))" \
    --initial-cluster "default=http://127.0.0.1:$((P + 1))" --unsafe-no-fsync \
    --listen-metrics-urls "http://127.0.0.1:$((P + 12))"
start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --service-account-key-file "$pki/sa.pub" \
    --service-account-signing-key-file "$pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-cluster-ip-range 10.96.0.0/16 --authorization-mode RBAC --allow-privileged
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" wait-ready
start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG_FILE" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port "$KCM" \
    --controllers '*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle'
# kube-scheduler retries a pod it could not place after a backoff that doubles from
# podInitialBackoffSeconds to podMaxBackoffSeconds (1 s and 10 s by default). A test
# cluster's pods wait on nodes the tests free a moment before: at most 1 s here.
cat > "$DIR/etc/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$KUBECONFIG_FILE"}
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
EOF
start kube-scheduler "$BIN/kube-scheduler" --config "$DIR/etc/scheduler.yaml" \
    --bind-address 127.0.0.1 --secure-port "$SCHED"

# --- kwok: nodes with GPUs and pod lifecycles ------------------------------------------
# The nodes' GPUs: --gpus whole GPUs, or what a Podium cluster config's node.gpus makes
# the device plugin advertise (nvidia.com/gpu, and nvidia.com/mig-<profile> per slice).
MIG='{}'
if [ -n "$PODIUM_CONFIG_FILE" ]; then
    read -r GPUS MIG < <("$PY" - "$PODIUM_CONFIG_FILE" <<'PYEOF'
import json, sys
from pathlib import Path
from podium.config.cluster import load_config
from podium.node.k8s_config import node_resources
found = node_resources(load_config(Path(sys.argv[1])).node.gpus)
whole = found.pop("nvidia.com/gpu", 0)
print(whole, json.dumps(found, separators=(",", ":")))
PYEOF
)
fi
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" nodes "$NODES" "$GPUS" "$MIG"
for f in "$CACHE"/kwok-stages/*.yaml; do echo "---"; cat "$f"; done > "$DIR/etc/kwok-stages.yaml"
# Two stages of our own, for what a kubelet would do and kwok's stages leave out:
# - a pod being deleted (evicted) while it runs has its containers stopped (exit 137)
#   and ends Failed, so the Job controller can account for it and lift its finalizer
#   (kwok deletes only pods without finalizers);
# - a running pod annotated kwok.podium.dev/exit-code: N ends with that exit code
#   (Failed unless 0): an application error, for the tests (give the pod also
#   pod-complete.stage.kwok.x-k8s.io/weight: "0" so that kwok's own stage stays out).
cat >> "$DIR/etc/kwok-stages.yaml" <<'STAGES'
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: podium-pod-stop-on-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: 'Exists'}
    - {key: '.metadata.finalizers', operator: 'Exists'}
    - {key: '.status.phase', operator: 'In', values: ['Running', 'Pending']}
  delay: {durationMilliseconds: 300}
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 137
            finishedAt: {{ $now | Quote }}
            reason: Error
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Failed
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: podium-pod-exit-code}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: 'DoesNotExist'}
    - {key: '.status.phase', operator: 'In', values: ['Running']}
    - {key: '.metadata.annotations["kwok.podium.dev/exit-code"]', operator: 'Exists'}
  weight: 1
  delay: {durationMilliseconds: 1000}
  next:
    statusTemplate: |
      {{ $now := Now }}
      {{ $code := index .metadata.annotations "kwok.podium.dev/exit-code" }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: {{ $code }}
            finishedAt: {{ $now | Quote }}
            reason: {{ if eq $code "0" }}Completed{{ else }}Error{{ end }}
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
STAGES
start kwok "$BIN/kwok" --kubeconfig "$KUBECONFIG_FILE" --config "$DIR/etc/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --cidr 10.244.0.0/16 --node-ip 10.244.0.1 --server-address "127.0.0.1:$KWOK"

# --- Kueue and JobSet: CRDs, webhooks on loopback, controllers ------------------------
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" apply "$CACHE"/crds/kueue/*.yaml "$CACHE"/crds/jobset/*.yaml
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" wait-crds "$CACHE"/crds/kueue/*.yaml "$CACHE"/crds/jobset/*.yaml
cat > "$DIR/etc/namespaces.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: kueue-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: jobset-system}
EOF
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" apply "$DIR/etc/namespaces.yaml"
cat > "$DIR/etc/kueue.yaml" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$KUEUE_HEALTH"}
metrics: {bindAddress: "127.0.0.1:$KUEUE_METRICS"}
webhook: {port: $KUEUE_HOOK, host: 127.0.0.1, certDir: "$DIR/webhook-certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
integrations:
  frameworks: ["batch/job", "jobset.x-k8s.io/jobset"]
EOF
cat > "$DIR/etc/jobset.yaml" <<EOF
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
health: {healthProbeBindAddress: "127.0.0.1:$JOBSET_HEALTH"}
metrics: {bindAddress: "127.0.0.1:$JOBSET_METRICS"}
webhook: {port: $JOBSET_HOOK, host: 127.0.0.1, certDir: "$DIR/webhook-certs"}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
EOF
for c in kueue jobset; do
    port=$([ $c = kueue ] && echo $KUEUE_HOOK || echo $JOBSET_HOOK)
    "$PY" "$HERE/kube.py" - webhooks "$CACHE/webhooks/$c.yaml" "$DIR/etc/$c-webhooks.yaml" \
        "https://127.0.0.1:$port" "$pki/ca.crt"
done
# Kueue without its internal certificate management reads its metrics server's
# certificate from /etc/kueue/metrics/certs, a path it does not let one change: it runs
# in a mount namespace of its own where DIR's certificate is bound there (the one trace
# on the machine is that empty mount point).
mkdir -p /etc/kueue/metrics/certs
start kueue unshare --mount --propagation private -- sh -c \
    'mount --bind "$1" /etc/kueue/metrics/certs && shift && exec env NAMESPACE=kueue-system "$@"' \
    sh "$DIR/webhook-certs" "$BIN/kueue" --config "$DIR/etc/kueue.yaml" --kubeconfig "$KUBECONFIG_FILE" \
    --feature-gates VisibilityOnDemand=false  # an aggregated API server: not set up here
start jobset env NAMESPACE=jobset-system "$BIN/jobset" --config "$DIR/etc/jobset.yaml" \
    --kubeconfig "$KUBECONFIG_FILE"
"$PY" "$HERE/kube.py" - wait-http "http://127.0.0.1:$KUEUE_HEALTH/readyz" \
    "http://127.0.0.1:$JOBSET_HEALTH/readyz"
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" apply "$DIR/etc/kueue-webhooks.yaml" "$DIR/etc/jobset-webhooks.yaml"

MIG_GROUP=$("$PY" - "$MIG" "$NODES" <<'PYEOF'
import json, sys
slices, nodes = json.loads(sys.argv[1]), int(sys.argv[2])
if slices:  # a resource group of its own for the MIG slices
    print("  - coveredResources: [" + ", ".join(sorted(slices)) + "]")
    print("    flavors:")
    print("    - name: mig-slices")  # Kueue wants each resource group's flavors apart
    print("      resources:")
    for name, count in sorted(slices.items()):
        print(f"      - {{name: {name}, nominalQuota: {count * nodes}}}")
PYEOF
)
# --- a queue: one flavor, a ClusterQueue with every node's GPUs, a LocalQueue ---------
cat > "$DIR/etc/queues.yaml" <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: podium}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: $((NODES * 64))}
      - {name: memory, nominalQuota: $((NODES * 512))Gi}
      - {name: nvidia.com/gpu, nominalQuota: $((NODES * GPUS))}
$MIG_GROUP
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: default}
spec: {clusterQueue: podium}
EOF
if [ -n "$MIG_GROUP" ]; then
    printf -- '---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: mig-slices}\n' \
        >> "$DIR/etc/queues.yaml"
fi
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" apply "$DIR/etc/queues.yaml"
"$PY" "$HERE/kube.py" "$KUBECONFIG_FILE" wait-active \
    /apis/kueue.x-k8s.io/v1beta2/clusterqueues/podium \
    /apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/default
cat > "$DIR/podium.yaml" <<EOF
# A Podium cluster config for this test cluster (scripts/k8s-testbed/up.sh).
backend: kubernetes
kubernetes:
  kubeconfig: $KUBECONFIG_FILE
  namespace: default
  local_queue: default
EOF
echo "up.sh: ready: $NODES kwok nodes of $GPUS GPUs; KUBECONFIG=$KUBECONFIG_FILE"
