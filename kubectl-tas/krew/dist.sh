#!/usr/bin/env bash
# Release archive of kubectl-tas for this machine's platform, its sha256 and the krew
# manifest (`make plugin-dist`):
#
#   OUT/kubectl-tas_<version>_<os>_<arch>.tar.gz   kubectl-tas, LICENSE, README.md
#   OUT/kubectl-tas_<version>_<os>_<arch>.tar.gz.sha256
#   OUT/tas.yaml                                   krew Plugin, from krew/tas.yaml
#
# <version> and the release URI come from the workspace's Cargo.toml (version,
# repository): <repository>/releases/download/v<version>/<archive>. Only the host's
# platform is built; another comes from running this on that platform (or with
# --binary naming a binary cross-built for it, with --os and --arch), and a manifest
# listing several platforms merges their `platforms` entries.
#
# Usage: dist.sh [--binary PATH] [--out DIR] [--os OS] [--arch ARCH]
#   --binary  package this kubectl-tas instead of building one (cargo build --release)
#   --out     where to write (default: $CARGO_TARGET_DIR or target, /plugin-dist)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
binary=
out=
os=$(uname -s | tr '[:upper:]' '[:lower:]')
case "$(uname -m)" in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --os) os=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    *) echo "dist.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done

# The workspace's [workspace.package] fields.
field() {
  sed -n '/^\[workspace.package\]/,/^\[/p' "$root/Cargo.toml" |
    sed -n "s/^$1 = \"\\(.*\\)\"/\\1/p" | head -n 1
}
version=$(field version)
repository=$(field repository)
if [ -z "$version" ] || [ -z "$repository" ]; then
  echo "dist.sh: Cargo.toml's [workspace.package] lacks version or repository" >&2
  exit 1
fi
target_dir=${CARGO_TARGET_DIR:-$root/target}
out=${out:-$target_dir/plugin-dist}

if [ -z "$binary" ]; then
  (cd "$root" && ${CARGO:-cargo} build --release --locked -p kubectl-tas)
  binary=$target_dir/release/kubectl-tas
fi
if [ ! -x "$binary" ]; then
  echo "dist.sh: $binary is not an executable kubectl-tas" >&2
  exit 1
fi

name=kubectl-tas_${version}_${os}_${arch}
archive=$name.tar.gz
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$binary" "$stage/kubectl-tas"
install -m 0644 "$root/LICENSE" "$stage/LICENSE"
install -m 0644 "$root/kubectl-tas/README.md" "$stage/README.md"
# Same content, same bytes: sorted names, fixed owner and time, no gzip timestamp.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
  -C "$stage" -cf - kubectl-tas LICENSE README.md | gzip -n >"$out/$archive"
sha=$(sha256sum "$out/$archive" | cut -d' ' -f1)
echo "$sha  $archive" >"$out/$archive.sha256"

uri="$repository/releases/download/v$version/$archive"
sed -e "s|@VERSION@|$version|g" -e "s|@REPOSITORY@|$repository|g" \
  -e "s|@OS@|$os|g" -e "s|@ARCH@|$arch|g" -e "s|@URI@|$uri|g" -e "s|@SHA256@|$sha|g" \
  -e '/^# /d' "$here/tas.yaml" >"$out/tas.yaml"

echo "$out/$archive"
echo "$out/$archive.sha256"
echo "$out/tas.yaml"
