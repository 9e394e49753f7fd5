#!/usr/bin/env bash
# Build the Kubernetes test cluster's components, at the versions in versions.env,
# through the Go module proxy, into a cache outside the clone keyed by those versions
# and the Go version: $PODIUM_K8S_CACHE (default ~/.cache/podium-k8s)/KEY/{bin,crds}.
# A complete cache is reused as is. Prints the cache directory on its last line.
#
#   bash scripts/k8s-testbed/build.sh      # fresh: see docs/kubernetes.md; cached: < 1 s
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck disable=SC1091
. "$HERE/versions.env"
command -v go >/dev/null || { echo "build.sh: go is not installed" >&2; exit 1; }
GOV=$(go env GOVERSION)
KEY="k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-kueue-$KUEUE_VERSION-jobset-$JOBSET_VERSION-$GOV"
ROOT=${PODIUM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podium-k8s}
CACHE=$ROOT/$KEY
if [ -f "$CACHE/complete" ]; then echo "$CACHE"; exit 0; fi
# One build at a time (parallel test workers, or .ci/run's own build in the background):
# the others wait here, then find the cache complete.
mkdir -p "$ROOT"
exec 9>"$ROOT/.build.lock"
flock 9
if [ -f "$CACHE/complete" ]; then echo "$CACHE"; exit 0; fi
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$CACHE.partial
rm -rf "$out"; mkdir -p "$out"/{bin,crds/kueue,crds/jobset,webhooks,kwok-stages}
step() { echo "build.sh: $(date +%T) $*" >&2; }

# A module that requires $1@$2 and builds the main packages $4... into bin/, with the
# replace lines in $3 (one per line, may be empty) and ldflags in $LDFLAGS.
build_in_module() {
    local module=$1 version=$2 replaces=$3; shift 3
    local dir; dir=$(mktemp -d "$work/mod.XXXX")
    {
        echo "module podium.local/k8s-testbed"
        echo "go 1.25"
        echo "require $module $version"
        [ -z "$replaces" ] || printf 'replace (\n%s\n)\n' "$replaces"
    } > "$dir/go.mod"
    { echo "//go:build tools"; echo "package tools"; echo "import ("
      for p in "$@"; do echo "    _ \"$p\""; done; echo ")"; } > "$dir/tools.go"
    (cd "$dir" && go mod tidy >&2 && go build -trimpath -ldflags "-s -w ${LDFLAGS:-}" -o "$out/bin/" "$@")
}

# Kubernetes: its go.mod points every staging module at ./staging/src; a consumer
# requires them at the matching v0 release instead.
step "kubernetes $K8S_VERSION (staging $K8S_STAGING)"
mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
replaces=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\1#p' "$mod" \
    | sort -u | sed "s#.*#    & => & $K8S_STAGING#")
[ -n "$replaces" ] || { echo "build.sh: no staging modules in $mod" >&2; exit 1; }
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
LDFLAGS="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
build_in_module k8s.io/kubernetes "$K8S_VERSION" "$replaces" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler

# etcd: the server module's own replace lines point at its repository; here its
# sibling modules come from the proxy at the same version.
step "etcd $ETCD_VERSION"
etcd_replaces=""
for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do
    etcd_replaces+="    go.etcd.io/etcd/$m => go.etcd.io/etcd/$m $ETCD_VERSION"$'\n'
done
LDFLAGS="" build_in_module go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "${etcd_replaces%$'\n'}" \
    go.etcd.io/etcd/server/v3
mv "$out/bin/server" "$out/bin/etcd"  # go names it after the path before /v3

step "kwok $KWOK_VERSION, kueue $KUEUE_VERSION, jobset $JOBSET_VERSION"
LDFLAGS="" build_in_module sigs.k8s.io/kwok "$KWOK_VERSION" "" sigs.k8s.io/kwok/cmd/kwok
LDFLAGS="" build_in_module sigs.k8s.io/kueue "$KUEUE_VERSION" "" sigs.k8s.io/kueue/cmd/kueue
LDFLAGS="" build_in_module sigs.k8s.io/jobset "$JOBSET_VERSION" "" sigs.k8s.io/jobset
[ -x "$out/bin/jobset" ] || { echo "build.sh: jobset did not build" >&2; exit 1; }

# The CRDs and webhook configurations, and kwok's stages, from the same module versions.
module_dir() { go mod download -json "$1" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p'; }
for pair in "kueue sigs.k8s.io/kueue@$KUEUE_VERSION" "jobset sigs.k8s.io/jobset@$JOBSET_VERSION"; do
    set -- $pair
    dir=$(module_dir "$2")
    cp "$dir"/config/components/crd/bases/*.yaml "$out/crds/$1/"
    cp "$dir/config/components/webhook/manifests.yaml" "$out/webhooks/$1.yaml"
done
dir=$(module_dir "sigs.k8s.io/kwok@$KWOK_VERSION")/kustomize/stage
for f in "$dir"/node/fast/*.yaml "$dir"/node/heartbeat-with-lease/*.yaml "$dir"/pod/general/*.yaml; do
    case $f in */kustomization.yaml) ;; *) cp "$f" "$out/kwok-stages/" ;; esac
done
chmod -R u+w "$out"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kueue jobset; do
    [ -x "$out/bin/$b" ] || { echo "build.sh: $b missing from $out/bin" >&2; exit 1; }
done
cp "$HERE/versions.env" "$out/versions.env"
date -u +%FT%TZ > "$out/complete"
rm -rf "$CACHE"; mv "$out" "$CACHE"
step "done"
echo "$CACHE"
