#!/usr/bin/env bash
# Writes the referee's module files for another kubelet version: versions/<minor>.mod
# and .sum (e.g. versions/v1.36.mod for v1.36.3), used by build.sh with `go build
# -modfile`. The Go sources stay shared; only the module requirements differ.
#
# The requirements start from the default module file (../go.mod); k8s.io/kubernetes and
# the k8s.io staging modules it requires move to the version, and the staging replaces are
# those of k8s.io/kubernetes' own go.mod (`./staging/src/k8s.io/X` there, `k8s.io/X
# v0.<minor>.<patch>` here, as a module that imports it must say), then `go mod tidy`
# settles the rest (on a copy of the sources without the files other minors' build
# tags select). Run again to move a minor to a newer patch.
#
# Usage: versions/pin.sh v1.36.3
set -euo pipefail

version=${1:?usage: $0 vX.Y.Z}
case "$version" in v1.[0-9]*.[0-9]*) ;; *) echo "error: $version is not vX.Y.Z" >&2; exit 1 ;; esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$(cd "$here/.." && pwd)"
minor=${version%.*}
staging=v0.${version#v1.}
out="$here/$minor.mod"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

k8s_mod=$(cd "$module" && go mod download -json "k8s.io/kubernetes@$version" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
test -s "$k8s_mod" || { echo "error: no go.mod of k8s.io/kubernetes@$version" >&2; exit 1; }
go_directive=$(awk '$1 == "go" { print $2; exit }' "$k8s_mod")
godebug=$(awk '$1 == "godebug" && $2 ~ /^default=/ { print $2; exit }' "$k8s_mod")

# The default module file without its replaces, moved to the version.
awk '/^replace \($/ { skip = 1; next } skip && /^\)$/ { skip = 0; next } !skip' "$module/go.mod" |
  sed -e "s|^go .*|go $go_directive|" \
    -e "s|^godebug default=.*|godebug ${godebug:-default=go${go_directive%.*}}|" \
    -e "s|^\([[:space:]]*k8s\.io/kubernetes\) v[^ ]*|\1 $version|" \
    -e "s|^\([[:space:]]*k8s\.io/[a-z-]*\) v0\.[0-9]*\.[0-9]*\( // indirect\)\{0,1\}$|\1 $staging\2|" >"$out"
{
  echo
  echo "replace ("
  awk '/=> \.\/staging\/src\// { printf "\t%s => %s %s\n", $1, $1, v }' v="$staging" "$k8s_mod"
  echo ")"
} >>"$out"
rm -f "${out%.mod}.sum"
# `go mod tidy` reads every Go file whatever its build tags, and the files written
# for other minors' kubelet API (internal/node/kubelet_v1*.go) import packages this
# version lacks; it runs on a copy without the files the version's tags leave out.
minor_n=${minor#v1.}
tags=$(seq 35 "$minor_n" | sed 's/^/k8s_ge_1_/' | paste -sd, -)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$module" && find . -name '*.go' ! -path './versions/*' -print0 | xargs -0 cp --parents -t "$tmp")
cp "$out" "$tmp/go.mod"
(cd "$tmp" && go list -e -tags "$tags" -f '{{$d := .Dir}}{{range .IgnoredGoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}' ./... |
  xargs -r rm -f)
(cd "$tmp" && go mod tidy)
cp "$tmp/go.mod" "$out"
cp "$tmp/go.sum" "${out%.mod}.sum"
echo "$out"
