#!/usr/bin/env bash
# Builds the referee (the kubelet's admission code as a tool, see README.md) into
# the same cache as e2e/tools/build.sh, keyed by the k8s.io/kubernetes version and
# a digest of the module files and the tool's Go sources, so it is rebuilt only when
# one of those changes.
#
# One referee per supported kubelet minor. The Go sources are shared; go.mod/go.sum
# pin the default (the oldest supported minor), versions/<minor>.mod/.sum the others
# (written by versions/pin.sh, used with `go build -modfile`).
#
#   build.sh                   the default referee; prints its path last
#   build.sh --version v1.36   that minor's referee (v1.36 or its exact version, or
#                              the default's); prints its path last
#   build.sh --all             every minor's, oldest first; prints one line
#                              `<k8s version>=<path>` per minor
#
# Environment:
#   TAS_TOOLS_CACHE  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"

usage() {
  echo "usage: $0 [--version vX.Y[.Z] | --all]" >&2
  exit 2
}
mode=default
want=
case "${1:-}" in
  "") ;;
  --all) mode=all ;;
  --version) want=${2:-}; test -n "$want" || usage; mode=one ;;
  *) usage ;;
esac

if ! command -v go >/dev/null 2>&1; then
  echo "error: the Go toolchain (go >= 1.26) is needed to build the referee, and \`go\` is not on PATH" >&2
  exit 1
fi

# The k8s.io/kubernetes version a module file requires.
k8s_version_of() {
  awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$1"
}

# Builds the referee of one module file (relative to $here; its .sum beside it) unless
# cached; prints `<k8s version>=<path>`.
build_one() {
  local modfile=$1 sumfile k8s_version digest dir bin tmp start minor tags
  sumfile=${modfile%.mod}.sum
  k8s_version=$(k8s_version_of "$here/$modfile")
  if [ -z "$k8s_version" ]; then
    echo "error: no k8s.io/kubernetes requirement in $here/$modfile" >&2
    return 1
  fi
  # The digest covers what goes into the binary: the module files and every
  # non-test Go source, by path and content.
  digest=$(cd "$here" && {
    sha256sum "$modfile" "$sumfile"
    find . -name '*.go' ! -name '*_test.go' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-12)
  dir="$cache_root/referee-$k8s_version-$digest"
  bin="$dir/referee"
  if [ -x "$bin" ]; then
    echo "referee: $k8s_version cached in $dir" >&2
  else
    mkdir -p "$cache_root"
    tmp=$(mktemp -d "$cache_root/.build-XXXXXX")
    start=$(date +%s)
    minor=${k8s_version#v1.}
    minor=${minor%%.*}
    # Build tags k8s_ge_1_35 ... k8s_ge_1_<minor> select the files written for the
    # kubelet's Go API of that minor (internal/node/kubelet_v1*.go).
    tags=$(seq 35 "$minor" | sed 's/^/k8s_ge_1_/' | paste -sd, -)
    echo "referee: building ($k8s_version) into $dir" >&2
    if ! (cd "$here" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
      go build -modfile="$modfile" -tags "$tags" -trimpath -ldflags "-s -w \
-X k8s.io/component-base/version.gitVersion=$k8s_version \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean" \
      -o "$tmp/referee" .); then
      rm -rf "$tmp"
      return 1
    fi
    mkdir -p "$dir"
    mv "$tmp/referee" "$bin"
    rm -rf "$tmp"
    echo "referee: $k8s_version built in $(($(date +%s) - start))s" >&2
  fi
  echo "$k8s_version=$bin"
}

# Every module file, oldest minor first: the default, then versions/ in version order.
modfiles() {
  echo go.mod
  (cd "$here" && find versions -name 'v1.*.mod' | sort -t. -k2,2n)
}

case "$mode" in
  default)
    line=$(build_one go.mod)
    echo "${line#*=}"
    ;;
  one)
    for m in $(modfiles); do
      v=$(k8s_version_of "$here/$m")
      if [ "$want" = "$v" ] || [ "$want" = "${v%.*}" ]; then
        line=$(build_one "$m")
        echo "${line#*=}"
        exit 0
      fi
    done
    echo "error: no referee module file for kubelet $want (known: $(for m in $(modfiles); do k8s_version_of "$here/$m"; done | paste -sd' ' -))" >&2
    exit 1
    ;;
  all)
    for m in $(modfiles); do build_one "$m"; done
    ;;
esac
