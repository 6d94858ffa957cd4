#!/usr/bin/env bash
# Builds the Kubernetes components the integration tests run against, from the Go
# modules pinned in testcluster/tools/{k8s,etcd,kwok}/go.mod, into a cache outside the work
# tree keyed by version (and by the go.sum that pins their dependencies). A component
# already in the cache is not rebuilt. Prints the directory holding the binaries last.
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
#   TAS_TOOLS_ONLY   space-separated subset of: k8s etcd kwok schedplugins
#                    (default: k8s etcd kwok; schedplugins — kube-scheduler with the
#                    scheduler-plugins NUMA plugin, for `make bench` — only on request)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"

K8S_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
SCHEDPLUGINS_VERSION=v0.33.5

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<'EOF'
error: the Go toolchain (go >= 1.25) is needed to build the test control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok) from
Go modules, and `go` is not on PATH. Install Go (Debian: apt-get install golang-go
is too old; use the official toolchain) and re-run `make cluster-tools`.
EOF
  exit 1
fi

# The cache key: the pinned version plus a short digest of go.sum, so a change to the
# pinned dependency set rebuilds even when the headline version is unchanged.
key() { # module version
  local sum
  sum=$(sha256sum "$here/$1/go.sum" | cut -c1-12)
  printf '%s/%s-%s-%s' "$cache_root" "$1" "$2" "$sum"
}

build() { # module version ldflags name=package...
  local mod=$1 version=$2 ldflags=$3
  shift 3
  local dir missing=()
  dir=$(key "$mod" "$version")
  for pair in "$@"; do
    [ -x "$dir/${pair%%=*}" ] || missing+=("$pair")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "cluster-tools: $mod $version cached in $dir" >&2
    return
  fi
  local tmp start
  tmp=$(mktemp -d "${cache_root}/.build-XXXXXX")
  start=$(date +%s)
  mkdir -p "$dir"
  # One binary at a time: each link step of a Kubernetes component needs ~2 GiB.
  for pair in "${missing[@]}"; do
    echo "cluster-tools: building ${pair%%=*} ($mod $version) into $dir" >&2
    (cd "$here/$mod" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
      go build -trimpath -ldflags "-s -w $ldflags" -o "$tmp/${pair%%=*}" "${pair#*=}")
    mv "$tmp/${pair%%=*}" "$dir/"
  done
  rmdir "$tmp"
  echo "cluster-tools: built $mod $version in $(($(date +%s) - start))s" >&2
}

mkdir -p "$cache_root"
only="${TAS_TOOLS_ONLY:-k8s etcd kwok}"

minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
k8s_ldflags="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=$minor"

for m in $only; do
  case $m in
    etcd) build etcd "$ETCD_VERSION" "" etcd=go.etcd.io/etcd/server/v3 ;;
    kwok) build kwok "$KWOK_VERSION" "" kwok=sigs.k8s.io/kwok/cmd/kwok ;;
    schedplugins) build schedplugins "$SCHEDPLUGINS_VERSION" \
      "-X k8s.io/component-base/version.gitVersion=v1.33.13-scheduler-plugins-$SCHEDPLUGINS_VERSION" \
      kube-scheduler-plugins=sigs.k8s.io/scheduler-plugins/cmd/scheduler ;;
    k8s) build k8s "$K8S_VERSION" "$k8s_ldflags" \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
      kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
      kubectl=k8s.io/kubernetes/cmd/kubectl ;;
    *) echo "unknown tool set: $m" >&2; exit 2 ;;
  esac
done

# One directory of symlinks the harness can put on its search path.
bin="$cache_root/bin-$K8S_VERSION"
mkdir -p "$bin"
ln -sf "$(key k8s "$K8S_VERSION")"/kube-apiserver "$bin/kube-apiserver"
ln -sf "$(key k8s "$K8S_VERSION")"/kube-controller-manager "$bin/kube-controller-manager"
ln -sf "$(key k8s "$K8S_VERSION")"/kube-scheduler "$bin/kube-scheduler"
ln -sf "$(key k8s "$K8S_VERSION")"/kubectl "$bin/kubectl"
ln -sf "$(key etcd "$ETCD_VERSION")"/etcd "$bin/etcd"
ln -sf "$(key kwok "$KWOK_VERSION")"/kwok "$bin/kwok"
sp="$(key schedplugins "$SCHEDPLUGINS_VERSION")/kube-scheduler-plugins"
if [ -x "$sp" ]; then
  ln -sf "$sp" "$bin/kube-scheduler-plugins"
fi
echo "$bin"
