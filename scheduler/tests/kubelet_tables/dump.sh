#!/usr/bin/env bash
# Dumps the kubelet Topology Manager's own policy merge test tables as JSON, for the
# scheduler's `kubelet_tables` test, once per supported kubelet minor. The test files
# next to this script (zz_tas_dump_*_test.go) are added to the package
# k8s.io/kubernetes/pkg/kubelet/cm/topologymanager at build time with
# `go test -overlay`, inside the Go module of the referee (nodesim/referee), whose
# module files pin k8s.io/kubernetes and its staging replaces per minor: go.mod (the
# default, oldest minor) and versions/<minor>.mod. The build tags k8s_ge_1_35 ...
# k8s_ge_1_<minor> select the overlay files written for that minor's Go API. Nothing is
# written to the module cache or to this repository: the module files are used through
# copies (-modfile). The JSON is cached outside the work tree, keyed by the Kubernetes
# version and a digest of go.sum and the test files.
#
#   dump.sh          the default minor's tables; prints the JSON file's path last
#   dump.sh --all    every minor's, oldest first: one line `<k8s version>=<path>` each
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$(cd "$here/../../../nodesim/referee" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"
case "${1:-}" in
  "" | --all) ;;
  *) echo "usage: $0 [--all]" >&2; exit 2 ;;
esac

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<'MSG'
error: the Go toolchain (go >= 1.26) is needed to replay the kubelet's Topology Manager
policy test tables (they are compiled from k8s.io/kubernetes with `go test`), and `go`
is not on PATH. Install the official Go toolchain, or set TAS_KUBELET_TABLES to the
JSON files this script produced elsewhere.
MSG
  exit 1
fi

# Dumps the tables of one module file of the referee (relative to it); prints
# `<k8s version>=<path>`.
dump_one() {
  local modfile=$1 version minor tags digest out tmp pkg src rel overlay f
  version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$module/$modfile")
  test -n "$version" || { echo "kubelet-tables: no k8s.io/kubernetes in $module/$modfile" >&2; return 1; }
  minor=${version#v1.}
  minor=${minor%%.*}
  tags=$(seq 35 "$minor" | sed 's/^/k8s_ge_1_/' | paste -sd, -)
  digest=$(cat "$module/${modfile%.mod}.sum" "$here"/zz_tas_dump_*_test.go | sha256sum | cut -c1-12)
  out="$cache_root/kubelet-tables/merge-$version-$digest.json"
  if [ -s "$out" ]; then
    echo "kubelet-tables: $version cached in $out" >&2
    echo "$version=$out"
    return 0
  fi
  mkdir -p "$cache_root/kubelet-tables"
  tmp=$(mktemp -d "$cache_root/kubelet-tables/.build-XXXXXX")
  cp "$module/$modfile" "$tmp/go.mod"
  cp "$module/${modfile%.mod}.sum" "$tmp/go.sum"
  pkg=k8s.io/kubernetes/pkg/kubelet/cm/topologymanager
  # `go test -overlay` refuses to add files beneath GOMODCACHE, so the (read-only)
  # module is reached through a symlink outside it, made the module's source by a
  # replace in the copied go.mod. The module cache itself is only read.
  src=$(cd "$module" && go list -modfile="$tmp/go.mod" -m -f '{{.Dir}}' k8s.io/kubernetes)
  test -d "$src" || (cd "$module" && go mod download -modfile="$tmp/go.mod" k8s.io/kubernetes)
  src=$(cd "$module" && go list -modfile="$tmp/go.mod" -m -f '{{.Dir}}' k8s.io/kubernetes)
  ln -s "$src" "$tmp/kubernetes"
  (cd "$module" && go mod edit -modfile="$tmp/go.mod" -replace "k8s.io/kubernetes=$tmp/kubernetes")
  rel=${pkg#k8s.io/kubernetes/}
  overlay=
  for f in "$here"/zz_tas_dump_*_test.go; do
    overlay="$overlay${overlay:+,}\"$tmp/kubernetes/$rel/$(basename "$f")\":\"$f\""
  done
  printf '{"Replace":{%s}}\n' "$overlay" >"$tmp/overlay.json"
  echo "kubelet-tables: dumping the $pkg merge tables of $version" >&2
  if ! (cd "$module" && TAS_KUBELET_TABLES_OUT="$tmp/tables.json" \
    go test -trimpath -modfile="$tmp/go.mod" -overlay="$tmp/overlay.json" -tags "$tags" -count=1 \
      -run '^TestTASDumpMergeCases$' "$pkg" >&2); then
    rm -rf "$tmp"
    return 1
  fi
  mv "$tmp/tables.json" "$out"
  rm -rf "$tmp"
  echo "$version=$out"
}

export GOTOOLCHAIN=local GOFLAGS=-mod=mod
if [ "${1:-}" = --all ]; then
  dump_one go.mod
  for m in $(cd "$module" && find versions -name 'v1.*.mod' | sort -t. -k2,2n); do
    dump_one "$m"
  done
else
  line=$(dump_one go.mod)
  echo "${line#*=}"
fi
