#!/usr/bin/env bash
# Builds the OpenTelemetry Collector the tests export to (otelcol/: the core OTLP
# receiver and the contrib file exporter, pinned in otelcol/go.mod) into the same cache
# as build.sh, keyed by the collector version and a digest of go.mod, go.sum and main.go,
# so it is rebuilt only when one of those changes. Prints the binary's path last.
#
# Versions: the contrib file exporter v0.162.0 is the newest whose dependencies the Go
# module proxy serves, so the core collector modules are the matching v0.162.0 (v1.68.0
# for the stable ones). To re-pin: `go get` the new versions in otelcol/, then
# `go mod tidy -e` (the exporter's tests import a module that is not served; tidy
# without -e refuses).
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/otelcol"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"

required=$(sed -n 's/^go \([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$here/go.mod")
if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go >= $required) is needed to build the OpenTelemetry Collector, and \`go\` is not on PATH" >&2
  exit 1
fi
have=$(GOTOOLCHAIN=local go env GOVERSION)
have=${have#go}
have=${have%%[!0-9.]*}
if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$required" "$have" | sort -V | head -n 1)" != "$required" ]; then
  echo "error: go $have is installed; the collector (otelcol/go.mod) needs go >= $required (GOTOOLCHAIN=local: no download)" >&2
  exit 1
fi

version=$(awk '$1 == "go.opentelemetry.io/collector/otelcol" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
if [ -z "$version" ]; then
  echo "error: no go.opentelemetry.io/collector/otelcol requirement in $here/go.mod" >&2
  exit 1
fi

digest=$(cd "$here" && sha256sum go.mod go.sum main.go | sha256sum | cut -c1-12)
dir="$cache_root/otelcol-$version-$digest"
bin="$dir/otelcol"

if [ -x "$bin" ]; then
  echo "otelcol: $version cached in $dir" >&2
else
  mkdir -p "$cache_root"
  tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
  echo "otelcol: building ($version) into $dir" >&2
  (cd "$here" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$tmp/otelcol" .)
  mkdir -p "$dir"
  mv "$tmp/otelcol" "$bin"
  echo "otelcol: built in $(($(date +%s) - start))s" >&2
fi
echo "$bin"
