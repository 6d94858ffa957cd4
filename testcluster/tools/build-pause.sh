#!/usr/bin/env bash
# Builds the sandbox ("pause") image of the real-node tests: pause/pause.c compiled
# static with gcc, as the only file of a docker-archive image (images/imagebuild), that
# the tests import into a node's containerd and name as its sandbox_image. Cached by the
# digest of the source, of this script and of imagebuild; prints the archive's path last.
#
# Environment:
#   TAS_IMAGEBUILD_BIN  the imagebuild binary (default: images/build.sh --tool builds or finds it)
#   TAS_TOOLS_CACHE     cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${TAS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools}"
# The reference the tests import it under and containerd's sandbox_image names.
TAG=tas.local/pause:1

command -v gcc >/dev/null || { echo "pause: gcc is needed to build the sandbox image" >&2; exit 1; }
imagebuild="${TAS_IMAGEBUILD_BIN:-$("$here/../../images/build.sh" --tool | tail -n 1)}"
[ -x "$imagebuild" ] || { echo "pause: imagebuild not found ($imagebuild)" >&2; exit 1; }

sum=$(cat "$here/pause/pause.c" "${BASH_SOURCE[0]}" "$imagebuild" | sha256sum | cut -c1-12)
dir="$cache_root/pause-$sum"
if [ -f "$dir/pause.tar" ]; then
  echo "pause: cached in $dir" >&2
  echo "$dir/pause.tar"
  exit 0
fi
mkdir -p "$cache_root"
tmp=$(mktemp -d "$cache_root/.pause-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
gcc -static -Os -s -o "$tmp/pause" "$here/pause/pause.c"
mkdir -p "$tmp/out"
SOURCE_DATE_EPOCH=0 "$imagebuild" --tag "$TAG" --entrypoint /pause --user 65535:65535 \
  --layer "$tmp/pause=/pause" --out "$tmp/out/pause.tar" >&2
mkdir -p "$dir"
mv "$tmp/out/pause.tar" "$dir/pause.tar"
echo "pause: built $TAG into $dir" >&2
echo "$dir/pause.tar"
