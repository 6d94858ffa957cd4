#!/usr/bin/env bash
# Builds the DRA referee (kube-scheduler's structured-parameters allocator as a tool,
# see README.md) into the same cache as the kubelet referee, keyed by the
# k8s.io/dynamic-resource-allocation version and a digest of go.mod, go.sum and the
# tool's non-test Go sources, so it is rebuilt only when one of those changes. Prints
# the binary's path last.
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"

required=$(sed -n 's/^go \([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$here/go.mod")
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go >= $required) is needed to build the DRA referee, and \`go\` is not on PATH" >&2
  exit 1
fi
have=$(GOTOOLCHAIN=local go env GOVERSION)
have=${have#go}
have=${have%%[!0-9.]*}
if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$required" "$have" | sort -V | head -n 1)" != "$required" ]; then
  echo "error: go $have is installed; the DRA referee (go.mod) needs go >= $required (GOTOOLCHAIN=local: no download)" >&2
  exit 1
fi

version=$(awk '$1 == "k8s.io/dynamic-resource-allocation" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
if [ -z "$version" ]; then
  echo "error: no k8s.io/dynamic-resource-allocation requirement in $here/go.mod" >&2
  exit 1
fi

# What goes into the binary: the module files and every non-test Go source, by path
# and content.
digest=$(cd "$here" && {
  sha256sum go.mod go.sum
  find . -name '*.go' ! -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-12)
dir="$cache_root/dra-referee-$version-$digest"
bin="$dir/dra-referee"

if [ -x "$bin" ]; then
  echo "dra-referee: $version cached in $dir" >&2
else
  mkdir -p "$cache_root"
  tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
  echo "dra-referee: building ($version) into $dir" >&2
  (cd "$here" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    go build -trimpath -ldflags "-s -w" -o "$tmp/dra-referee" .)
  mkdir -p "$dir"
  mv "$tmp/dra-referee" "$bin"
  echo "dra-referee: built in $(($(date +%s) - start))s" >&2
fi
echo "$bin"
