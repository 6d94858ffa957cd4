#!/usr/bin/env bash
# Dumps the kubelet Topology Manager's own policy merge test tables as JSON, for the
# scheduler's `kubelet_tables` test. The test file next to this script is added to the
# package k8s.io/kubernetes/pkg/kubelet/cm/topologymanager at build time with
# `go test -overlay`, inside the Go module testcluster/tools/k8s (which pins
# k8s.io/kubernetes and its staging replaces). Nothing is written to the module cache or
# to this repository: go.mod/go.sum are used through copies (-modfile). The JSON is cached
# outside the work tree, keyed by the Kubernetes version and a digest of go.sum and the
# test file. Prints the JSON file's path last.
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$(cd "$here/../../../testcluster/tools/k8s" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"
dump="$here/zz_tas_dump_merge_cases_test.go"

if ! command -v go >/dev/null 2>&1; then
  cat >&2 <<'MSG'
error: the Go toolchain (go >= 1.25) is needed to replay the kubelet's Topology Manager
policy test tables (they are compiled from k8s.io/kubernetes with `go test`), and `go`
is not on PATH. Install the official Go toolchain, or set TAS_KUBELET_TABLES to a JSON
file this script produced elsewhere.
MSG
  exit 1
fi

version=$(sed -n 's/^[[:space:]]*k8s\.io\/kubernetes \(v[^ ]*\).*/\1/p' "$module/go.mod" | head -n 1)
test -n "$version" || { echo "kubelet-tables: no k8s.io/kubernetes in $module/go.mod" >&2; exit 1; }
digest=$(cat "$module/go.sum" "$dump" | sha256sum | cut -c1-12)
out="$cache_root/kubelet-tables/merge-$version-$digest.json"
if [ -s "$out" ]; then
  echo "kubelet-tables: $version cached in $out" >&2
  echo "$out"
  exit 0
fi

mkdir -p "$cache_root/kubelet-tables"
tmp=$(mktemp -d "$cache_root/kubelet-tables/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cp "$module/go.mod" "$module/go.sum" "$tmp/"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
pkg=k8s.io/kubernetes/pkg/kubelet/cm/topologymanager
# `go test -overlay` refuses to add files beneath GOMODCACHE, so the (read-only) module
# is reached through a symlink outside it, made the module's source by a replace in the
# copied go.mod. The module cache itself is only read.
src=$(cd "$module" && go list -modfile="$tmp/go.mod" -m -f '{{.Dir}}' k8s.io/kubernetes)
test -d "$src" || (cd "$module" && go mod download -modfile="$tmp/go.mod" k8s.io/kubernetes)
src=$(cd "$module" && go list -modfile="$tmp/go.mod" -m -f '{{.Dir}}' k8s.io/kubernetes)
ln -s "$src" "$tmp/kubernetes"
(cd "$module" && go mod edit -modfile="$tmp/go.mod" -replace "k8s.io/kubernetes=$tmp/kubernetes")
rel=${pkg#k8s.io/kubernetes/}
printf '{"Replace":{"%s/%s/zz_tas_dump_merge_cases_test.go":"%s"}}\n' "$tmp/kubernetes" "$rel" "$dump" >"$tmp/overlay.json"
echo "kubelet-tables: dumping the $pkg merge tables of $version" >&2
(cd "$module" && TAS_KUBELET_TABLES_OUT="$tmp/tables.json" \
  go test -modfile="$tmp/go.mod" -overlay="$tmp/overlay.json" -count=1 \
    -run '^TestTASDumpMergeCases$' "$pkg" >&2)
mv "$tmp/tables.json" "$out"
echo "$out"
