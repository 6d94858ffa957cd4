#!/usr/bin/env bash
# Builds the Kubernetes components the integration tests run against, from the Go
# modules pinned in testcluster/tools/{k8s,etcd,kwok,schedplugins}/go.mod (and the
# ecosystem tools the chart and monitoring tests run: helm/, promtool/ — promtool and
# the Prometheus server, one module), into a cache
# outside the work tree keyed by version (and by the go.sum that pins their
# dependencies). A component already in the cache is not rebuilt. Prints the directory
# holding the binaries last.
#
# It builds with the installed Go only (GOTOOLCHAIN=local: no toolchain download), which
# must be at least the highest `go` directive of the modules it builds; that is checked
# first.
#
# Two control planes: the newest supported Kubernetes minor (K8S_VERSION, module
# k8s-newest/), which every test runs against by default, and the oldest
# (K8S_OLDEST_VERSION, module k8s/), which the full-stack test also runs against. The
# real node's kubelet is the oldest (the skew clusters upgrading node by node have).
#
#   build.sh           build what is missing, print the binaries' directory (newest)
#   build.sh --oldest  the same, printing the oldest control plane's directory
#   build.sh --clean   remove the cached binaries of the versions pinned here (every
#                      module, whatever go.sum they were built from) and their bin-*
#                      directories; other versions in the cache are left alone
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
#   TAS_TOOLS_ONLY   space-separated subset of: k8s k8s-oldest etcd kwok schedplugins
#                    helm promtool prometheus kubelet (default: k8s etcd kwok helm
#                    promtool prometheus;
#                    k8s-oldest — the oldest control plane; schedplugins —
#                    kube-scheduler with the scheduler-plugins NUMA plugin, for `make
#                    bench` — and kubelet — the kubelet, kube-proxy and device plugin of the real-node
#                    tests, from kubelet/go.mod: the k8s set plus the go.sum entries only
#                    the kubelet needs, so the default set's cache key does not move; with
#                    them the tests' DRA driver (dradriver/go.mod, the kubelet's
#                    k8s.io/dynamic-resource-allocation) and a containerd that injects CDI
#                    devices (containerd/go.mod; Debian's containerd 1.6 has no CDI) —
#                    only on request)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"

K8S_VERSION=v1.37.2
K8S_OLDEST_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
SCHEDPLUGINS_VERSION=v0.33.5
# The chart's tests (charts/tas) and the monitoring bundle's (config/prometheus). The
# Prometheus module's v0.3XX.Y is Prometheus 3.XX.Y.
HELM_VERSION=v4.3.1
PROMTOOL_VERSION=v0.316.0
# The real node's runtime for DRA: containerd 2 reads the CDI devices the kubelet passes
# for prepared resource claims (Debian's containerd 1.6, the real nodes' default, ignores
# them).
CONTAINERD_VERSION=v2.4.2

print_oldest=
if [ "${1:-}" = "--clean" ]; then
  for pinned in "k8s-newest-$K8S_VERSION" "k8s-$K8S_OLDEST_VERSION" "kubelet-$K8S_OLDEST_VERSION" \
    "dradriver-$K8S_OLDEST_VERSION" "containerd-$CONTAINERD_VERSION" \
    "etcd-$ETCD_VERSION" "kwok-$KWOK_VERSION" \
    "schedplugins-$SCHEDPLUGINS_VERSION" "helm-$HELM_VERSION" "promtool-$PROMTOOL_VERSION" \
    "bin-$K8S_VERSION" "bin-$K8S_OLDEST_VERSION"; do
    # <module>-<version>-<go.sum digest>, one per go.sum the version was built from.
    for dir in "$cache_root/$pinned" "$cache_root/$pinned"-*; do
      [ -d "$dir" ] || continue
      echo "cluster-tools: removing $dir" >&2
      rm -rf "$dir"
    done
  done
  exit 0
elif [ "${1:-}" = "--oldest" ]; then
  print_oldest=1
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--oldest | --clean]" >&2
  exit 2
fi

only="${TAS_TOOLS_ONLY:-k8s etcd kwok helm promtool prometheus}"

# The Go the selected modules need: the highest `go` directive of their go.mod files.
required=
# The module directory of a tool set.
module_of() {
  case $1 in
    k8s) echo k8s-newest ;;
    k8s-oldest) echo k8s ;;
    prometheus) echo promtool ;;
    *) echo "$1" ;;
  esac
}
for m in $only; do
  if [ ! -f "$here/$(module_of "$m")/go.mod" ]; then
    echo "unknown tool set: $m (known: k8s k8s-oldest etcd kwok schedplugins helm promtool prometheus kubelet)" >&2
    exit 2
  fi
  mods=$(module_of "$m")
  # The kubelet set builds the DRA driver and containerd too, from modules of their own.
  [ "$m" = kubelet ] && mods="$mods dradriver containerd"
  for mod in $mods; do
    v=$(sed -n 's/^go \([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$here/$mod/go.mod")
    required=$(printf '%s\n%s\n' "$required" "$v" | sed '/^$/d' | sort -V | tail -n 1)
  done
done

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<EOF
error: the Go toolchain (go >= $required) is needed to build the test control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok) from
Go modules, and \`go\` is not on PATH. Install Go $required or newer (distribution
packages are often older; use the official toolchain) and re-run \`make cluster-tools\`.
EOF
  exit 1
fi
# "go1.26.8" -> "1.26.8", "go1.27rc1" -> "1.27"; a development build ("devel ...")
# gives "" and is not checked.
have=$(GOTOOLCHAIN=local go env GOVERSION)
have=${have#go}
have=${have%%[!0-9.]*}
if [ -n "$have" ] && [ -n "$required" ] &&
  [ "$(printf '%s\n%s\n' "$required" "$have" | sort -V | head -n 1)" != "$required" ]; then
  cat >&2 <<EOF
error: go $have is installed, but the modules in $here need go >= $required
(the highest \`go\` directive of their go.mod files). The build uses the installed
toolchain only (GOTOOLCHAIN=local), so install Go $required or newer and re-run
\`make cluster-tools\`.
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

build() { # module version ldflags name=package... (env BUILD_TAGS: go build -tags; BUILD_DIR: cache directory instead of key's)
  local mod=$1 version=$2 ldflags=$3
  shift 3
  local dir missing=()
  dir=${BUILD_DIR:-$(key "$mod" "$version")}
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
      go build -trimpath ${BUILD_TAGS:+-tags "$BUILD_TAGS"} -ldflags "-s -w $ldflags" \
      -o "$tmp/${pair%%=*}" "${pair#*=}")
    mv "$tmp/${pair%%=*}" "$dir/"
  done
  rmdir "$tmp"
  echo "cluster-tools: built $mod $version in $(($(date +%s) - start))s" >&2
}

devplugin_dir() {
  printf '%s-devplugin-%s' "$(key kubelet "$K8S_OLDEST_VERSION")" \
    "$(sha256sum "$here/kubelet/devplugin/main.go" | cut -c1-12)"
}

# The DRA driver (dradriver/), keyed by its go.sum and its source.
dradriver_dir() {
  printf '%s-%s' "$(key dradriver "$K8S_OLDEST_VERSION")" \
    "$(sha256sum "$here/dradriver/main.go" | cut -c1-12)"
}

mkdir -p "$cache_root"

k8s_ldflags() { # version
  local minor=${1#v1.}
  minor=${minor%%.*}
  printf '%s' "-X k8s.io/component-base/version.gitVersion=$1 \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$1 \
-X k8s.io/client-go/pkg/version.gitMajor=1 \
-X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

for m in $only; do
  case $m in
    etcd) build etcd "$ETCD_VERSION" "" etcd=go.etcd.io/etcd/server/v3 ;;
    kwok) build kwok "$KWOK_VERSION" "" kwok=sigs.k8s.io/kwok/cmd/kwok ;;
    schedplugins) build schedplugins "$SCHEDPLUGINS_VERSION" \
      "-X k8s.io/component-base/version.gitVersion=v1.33.13-scheduler-plugins-$SCHEDPLUGINS_VERSION" \
      kube-scheduler-plugins=sigs.k8s.io/scheduler-plugins/cmd/scheduler ;;
    helm) build helm "$HELM_VERSION" "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
      helm=helm.sh/helm/v4/cmd/helm ;;
    # Without the service-discovery plugins (cloud SDKs): the rule and metrics checks
    # need none of them, and they are most of the build.
    promtool) BUILD_TAGS=remove_all_sd build promtool "$PROMTOOL_VERSION" \
      "-X github.com/prometheus/common/version.Version=3.${PROMTOOL_VERSION#v0.3}" \
      promtool=github.com/prometheus/prometheus/cmd/promtool ;;
    # The server the dashboard's queries are evaluated by (e2e/tests/dashboard.rs), from
    # the same module and version. Without the `builtinassets` tag the web UI is not
    # compiled in (it would be read from ./web/ui at run time); the HTTP API the test
    # queries needs none of it.
    prometheus) BUILD_TAGS=remove_all_sd build promtool "$PROMTOOL_VERSION" \
      "-X github.com/prometheus/common/version.Version=3.${PROMTOOL_VERSION#v0.3}" \
      prometheus=github.com/prometheus/prometheus/cmd/prometheus ;;
    k8s) build k8s-newest "$K8S_VERSION" "$(k8s_ldflags "$K8S_VERSION")" \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
      kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
      kubectl=k8s.io/kubernetes/cmd/kubectl ;;
    k8s-oldest) build k8s "$K8S_OLDEST_VERSION" "$(k8s_ldflags "$K8S_OLDEST_VERSION")" \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
      kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
      kubectl=k8s.io/kubernetes/cmd/kubectl ;;
    kubelet) build kubelet "$K8S_OLDEST_VERSION" "$(k8s_ldflags "$K8S_OLDEST_VERSION")" \
      kubelet=k8s.io/kubernetes/cmd/kubelet \
      kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
      # The tests' device plugin (kubelet/devplugin), keyed by its source as well: an
      # edit rebuilds it (seconds), never the kubelet.
      BUILD_DIR="$(devplugin_dir)" build kubelet "$K8S_OLDEST_VERSION" "" tas-devplugin=./devplugin
      # The DRA driver and the containerd whose CRI injects CDI devices: a real node
      # started with a DRA driver runs on it. Named tas-* so that nothing takes them
      # for the host's containerd and ctr.
      BUILD_DIR="$(dradriver_dir)" build dradriver "$K8S_OLDEST_VERSION" "" tas-dradriver=.
      build containerd "$CONTAINERD_VERSION" \
        "-X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION#v}" \
        tas-containerd=github.com/containerd/containerd/v2/cmd/containerd \
        tas-containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
        tas-ctr=github.com/containerd/containerd/v2/cmd/ctr ;;
    *) echo "unknown tool set: $m" >&2; exit 2 ;;
  esac
done

# One directory of symlinks per control plane the harness can put on its search path:
# bin-<newest> and, when the oldest was built, bin-<oldest>. Both hold the same etcd,
# kwok, helm, promtool, prometheus and real-node binaries.
link_bin() { # bin-dir module version
  local bin=$1
  mkdir -p "$bin"
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    ln -sf "$(key "$2" "$3")/$b" "$bin/$b"
  done
  ln -sf "$(key etcd "$ETCD_VERSION")"/etcd "$bin/etcd"
  ln -sf "$(key kwok "$KWOK_VERSION")"/kwok "$bin/kwok"
  local sp t
  sp="$(key schedplugins "$SCHEDPLUGINS_VERSION")/kube-scheduler-plugins"
  if [ -x "$sp" ]; then
    ln -sf "$sp" "$bin/kube-scheduler-plugins"
  fi
  for t in "helm $HELM_VERSION helm" "promtool $PROMTOOL_VERSION promtool" \
    "promtool $PROMTOOL_VERSION prometheus" \
    "kubelet $K8S_OLDEST_VERSION kubelet" "kubelet $K8S_OLDEST_VERSION kube-proxy"; do
    set -- $t
    if [ -x "$(key "$1" "$2")/$3" ]; then
      ln -sf "$(key "$1" "$2")/$3" "$bin/$3"
    fi
  done
  if [ -x "$(devplugin_dir)/tas-devplugin" ]; then
    ln -sf "$(devplugin_dir)/tas-devplugin" "$bin/tas-devplugin"
  fi
  if [ -x "$(dradriver_dir)/tas-dradriver" ]; then
    ln -sf "$(dradriver_dir)/tas-dradriver" "$bin/tas-dradriver"
  fi
  for t in tas-containerd tas-containerd-shim-runc-v2 tas-ctr; do
    if [ -x "$(key containerd "$CONTAINERD_VERSION")/$t" ]; then
      ln -sf "$(key containerd "$CONTAINERD_VERSION")/$t" "$bin/$t"
    fi
  done
}
bin="$cache_root/bin-$K8S_VERSION"
link_bin "$bin" k8s-newest "$K8S_VERSION"
oldest="$cache_root/bin-$K8S_OLDEST_VERSION"
if [ -x "$(key k8s "$K8S_OLDEST_VERSION")/kube-apiserver" ]; then
  link_bin "$oldest" k8s "$K8S_OLDEST_VERSION"
fi
if [ -n "$print_oldest" ]; then
  echo "$oldest"
else
  echo "$bin"
fi
