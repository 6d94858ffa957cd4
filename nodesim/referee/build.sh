#!/usr/bin/env bash
# Builds the referee (the kubelet's admission code as a tool, see README.md) into
# the same cache as e2e/tools/build.sh, keyed by the k8s.io/kubernetes version and
# a digest of go.mod, go.sum and the tool's Go sources, so it is rebuilt only when
# one of those changes. Prints the binary's path last.
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go >= 1.25) is needed to build the referee, and \`go\` is not on PATH" >&2
  exit 1
fi

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
if [ -z "$k8s_version" ]; then
  echo "error: no k8s.io/kubernetes requirement in $here/go.mod" >&2
  exit 1
fi

# The digest covers what goes into the binary: the module files and every
# non-test Go source, by path and content.
digest=$(cd "$here" && {
  sha256sum go.mod go.sum
  find . -name '*.go' ! -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
} | sha256sum | cut -c1-12)
dir="$cache_root/referee-$k8s_version-$digest"
bin="$dir/referee"

if [ -x "$bin" ]; then
  echo "referee: $k8s_version cached in $dir" >&2
else
  mkdir -p "$cache_root"
  tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
  minor=${k8s_version#v1.}
  minor=${minor%%.*}
  echo "referee: building ($k8s_version) into $dir" >&2
  (cd "$here" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    go build -trimpath -ldflags "-s -w \
-X k8s.io/component-base/version.gitVersion=$k8s_version \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean" \
      -o "$tmp/referee" .)
  mkdir -p "$dir"
  mv "$tmp/referee" "$bin"
  echo "referee: built in $(($(date +%s) - start))s" >&2
fi
echo "$bin"
