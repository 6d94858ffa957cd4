#!/usr/bin/env bash
# Builds the three images (tas-operator, tas-scheduler, tas-updater) from binaries cargo
# built, as image archives, without a container engine or a registry: what the
# Dockerfile builds on distroless `cc`, assembled here from Debian packages.
#
#   build.sh --bin-dir DIR --out DIR [--repo REPO] [--version TAG] [--oci-layout DIR]
#            [--updater-bin PATH]
#       writes DIR/tas-<name>.tar (docker-archive: `docker load`, `podman load`,
#       `ctr images import`, `kind load image-archive`, `crane push`,
#       `skopeo copy docker-archive:`) and DIR/digests, and prints the out directory
#       last. REPO and TAG default to those config/manager/kustomization.yaml names.
#   build.sh --tool
#       builds (or finds cached) imagebuild, the Go program that writes the archives
#       (imagebuild/: go-containerregistry), and prints its path last.
#
# Two layers per image. The base, the same for all three: the shared libraries the
# binaries link (per `ldd`) and the dynamic loader, from the packages that own them on
# this machine (`dpkg -S`); the CA bundle (ca-certificates), zoneinfo (tzdata),
# os-release (base-files), each package's copyright and its control data in
# /var/lib/dpkg/status.d/ (as distroless records them, for scanners); /etc/passwd and
# /etc/group with root, nobody and nonroot (65532); /tmp, /root, /home/nonroot. No shell,
# no package manager. The packages are the candidates of the machine's apt sources
# (`apt-get download`), the release the binaries were linked on, so their glibc is at
# least the one the binaries need. Then the binary, at /usr/local/bin/tas-<name>.
#
# Reproducible: every file's mtime is SOURCE_DATE_EPOCH (default: the commit time of
# HEAD, 0 outside a git checkout), members sorted, owners and modes fixed; the same
# binaries and packages give the same digests.
#
# Environment:
#   TAS_IMAGEBUILD_BIN  the imagebuild binary to use (default: build or find it, --tool)
#   TAS_TOOLS_CACHE     where --tool caches it (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools)
#   TAS_DEBS_CACHE      where the .deb files are kept (default: ${XDG_CACHE_HOME:-$HOME/.cache}/tas/debs)
#   SOURCE_DATE_EPOCH   the images' time, Unix seconds
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tas"
tools_cache="${TAS_TOOLS_CACHE:-$cache/tools}"
debs_cache="${TAS_DEBS_CACHE:-$cache/debs}"
IMAGES="operator scheduler updater"
# What the Dockerfile's runtime stage sets or inherits from distroless `cc:nonroot`.
USER_ID=65532
PATH_ENV=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

die() {
  echo "images: $*" >&2
  exit 1
}

# imagebuild, built once per version of its sources, go-containerregistry and Go.
tool() {
  local src="$here/imagebuild" have required ggcr digest dir
  command -v go >/dev/null 2>&1 || die "Go is needed to build imagebuild ($src), and \`go\` is not on PATH"
  required=$(sed -n 's/^go \([0-9][0-9.]*\)[[:space:]]*$/\1/p' "$src/go.mod")
  have=$(GOTOOLCHAIN=local go env GOVERSION)
  if [ "$(printf '%s\n%s\n' "$required" "${have#go}" | sort -V | head -n 1)" != "$required" ]; then
    die "$have is installed; imagebuild/go.mod needs go >= $required (GOTOOLCHAIN=local: no download)"
  fi
  ggcr=$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/google/go-containerregistry") { print $(i + 1); exit } }' "$src/go.mod")
  digest=$( (cd "$src" && cat go.mod go.sum ./*.go && echo "$have") | sha256sum | cut -c1-12)
  dir="$tools_cache/imagebuild-$ggcr-$digest"
  if [ -x "$dir/imagebuild" ]; then
    echo "images: imagebuild cached in $dir" >&2
  else
    local tmp start
    mkdir -p "$tools_cache"
    tmp=$(mktemp -d "$tools_cache/.build-XXXXXX")
    start=$(date +%s)
    echo "images: building imagebuild (go-containerregistry $ggcr) into $dir" >&2
    (cd "$src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod \
      go build -trimpath -ldflags "-s -w" -o "$tmp/imagebuild" .) || { rm -rf "$tmp"; exit 1; }
    mkdir -p "$dir"
    mv "$tmp/imagebuild" "$dir/"
    rmdir "$tmp"
    echo "images: built imagebuild in $(($(date +%s) - start))s" >&2
  fi
  echo "$dir/imagebuild"
}

if [ "${1:-}" = "--tool" ] && [ $# -eq 1 ]; then
  tool
  exit 0
fi

bin_dir='' out='' repo='' version='' oci='' updater_bin=''
while [ $# -gt 0 ]; do
  case $1 in
    --bin-dir) bin_dir=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --repo) repo=${2:?}; shift 2 ;;
    --version) version=${2:?}; shift 2 ;;
    --oci-layout) oci=${2:?}; shift 2 ;;
    --updater-bin) updater_bin=${2:?}; shift 2 ;;
    *) die "usage: $0 --bin-dir DIR --out DIR [--repo REPO] [--version TAG] [--oci-layout DIR] [--updater-bin PATH] | --tool" ;;
  esac
done
[ -n "$bin_dir" ] && [ -n "$out" ] || die "--bin-dir and --out are required"
# The binary of image $1: from --bin-dir, but the node agent's from --updater-bin when
# given (`make image-archives` builds it with the size-optimised node-agent profile).
bin_of() {
  if [ "$1" = updater ] && [ -n "$updater_bin" ]; then echo "$updater_bin"; else echo "$bin_dir/tas-$1"; fi
}
for c in $IMAGES; do
  [ -x "$(bin_of "$c")" ] || die "$(bin_of "$c") is missing: cargo build -p tas-$c (with the profile of $bin_dir, or --profile node-agent for --updater-bin)"
done
for cmd in apt-get dpkg dpkg-deb ldd; do
  command -v "$cmd" >/dev/null 2>&1 ||
    die "$cmd is needed: the base is assembled from the Debian packages of this machine's apt sources (without Debian, use \`make images\`)"
done

# Names and tag: config/manager's, unless given.
kustomization="$root/config/manager/kustomization.yaml"
if [ -z "$repo" ]; then
  repo=$(sed -n 's#^- name: \(.*\)/tas-operator$#\1#p' "$kustomization")
fi
if [ -z "$version" ]; then
  version=$(awk '/^- name: .*\/tas-operator$/ { getline; if ($1 == "newTag:") print $2 }' "$kustomization")
fi
[ -n "$repo" ] && [ -n "$version" ] || die "no tas-operator image with a newTag in $kustomization"
# The labels the Dockerfile sets: source and licence from the workspace's Cargo.toml.
source_url=$(sed -n 's/^repository = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
license=$(sed -n 's/^license = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
arch=$(dpkg --print-architecture)
case $arch in
  amd64 | arm64 | s390x | ppc64el | riscv64) platform=linux/${arch/ppc64el/ppc64le} ;;
  *) die "no OCI platform known for the Debian architecture $arch" ;;
esac

imagebuild=${TAS_IMAGEBUILD_BIN:-}
if [ -z "$imagebuild" ]; then
  imagebuild=$(tool | tail -n 1)
fi
[ -x "$imagebuild" ] || die "imagebuild not found at $imagebuild"

work=$(mktemp -d "${TMPDIR:-/tmp}/tas-images-XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
mkdir -p "$rootfs" "$work/pkg" "$debs_cache"
start=$(date +%s%N)

# The files the binaries load: every library `ldd` resolves, and the loader (none for a
# static binary).
ldd=$(for c in $IMAGES; do ldd "$(bin_of "$c")" 2>&1 || true; done)
if grep 'not found' <<<"$ldd" >&2; then
  die "a library the binaries link is not on this machine (ldd)"
fi
needed=$(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd" | sort -u)

# The package that owns a path, trying the path either side of the /usr merge.
owner() {
  local p
  for p in "$1" "${1#/usr}" "/usr$1"; do
    dpkg -S "$p" 2>/dev/null | sed -n '1s/^\([^:]*\(:[a-z0-9]*\)\?\): .*/\1/p' | grep . && return
  done
  die "no installed package owns $1 (dpkg -S)"
}
packages=$({
  for p in $needed; do owner "$p"; done
  echo "ca-certificates tzdata base-files" | tr ' ' '\n'
} | sort -u)

# The packages' .debs: the candidates of the apt sources, kept in the cache by file name
# and checked against the sources' SHA256; one apt query for all (it is most of a warm
# run's time), one download for the missing ones. Prints the .deb paths.
fetch() { # package...
  local uris file sum missing='' tmp
  uris=$(apt-get download --print-uris "$@" 2>/dev/null) && [ "$(grep -c . <<<"$uris")" -eq $# ] ||
    die "apt has no candidate for one of: $* (apt-get update?)"
  while read -r _ file _ sum; do
    if [ ! -f "$debs_cache/$file" ] || [ "$(sha256sum <"$debs_cache/$file" | cut -d' ' -f1)" != "${sum#SHA256:}" ]; then
      missing="$missing $file"
    fi
  done <<<"$uris"
  if [ -n "$missing" ]; then
    tmp=$(mktemp -d "$debs_cache/.download-XXXXXX")
    echo "images: downloading$missing" >&2
    (cd "$tmp" && apt-get download -qq "$@" 2>&1 | grep -v 'unsandboxed as root' >&2) || true
    while read -r _ file _ sum; do
      if [ -f "$tmp/$file" ] && [ "$(sha256sum <"$tmp/$file" | cut -d' ' -f1)" = "${sum#SHA256:}" ]; then
        mv "$tmp/$file" "$debs_cache/$file"
      fi
    done <<<"$uris"
    rm -rf "$tmp"
  fi
  while read -r _ file _ sum; do
    [ -f "$debs_cache/$file" ] || die "downloading $file failed (apt-get download)"
    echo "$debs_cache/$file"
  done <<<"$uris"
}

# Copies a path of an extracted package into the rootfs, following symlinks inside it.
take() { # pkgdir path
  local dir=$1 p=${2#/} link
  [ -e "$dir/$p" ] || [ -L "$dir/$p" ] || return 1
  mkdir -p "$rootfs/$(dirname "$p")"
  cp -al "$dir/$p" "$rootfs/$p"
  if [ -L "$dir/$p" ]; then
    link=$(readlink "$dir/$p")
    case $link in
      /*) take "$dir" "$link" ;;
      *) take "$dir" "$(dirname "$p")/$link" ;;
    esac
  fi
}

# Extracts a package and records it: control data, copyright. A package whose doc
# directory links to another's (libgcc-s1 -> gcc-12-base) brings that one in, for its
# copyright.
unpacked=
unpack() { # .deb
  local name doc
  name=$(dpkg-deb -f "$1" Package)
  unpacked="$unpacked $name"
  dpkg-deb -x "$1" "$work/pkg/$name"
  mkdir -p "$rootfs/var/lib/dpkg/status.d" "$rootfs/usr/share/doc"
  dpkg-deb -f "$1" >"$rootfs/var/lib/dpkg/status.d/$name"
  doc="$work/pkg/$name/usr/share/doc/$name"
  if [ -L "$doc" ]; then
    cp -a "$doc" "$rootfs/usr/share/doc/"
    pending="$pending $(basename "$(readlink "$doc")")"
  elif [ -f "$doc/copyright" ]; then
    take "$work/pkg/$name" "usr/share/doc/$name/copyright"
  fi
}
pending=$packages
while [ -n "$pending" ]; do
  batch=
  for pkg in $pending; do
    case " $unpacked $batch " in *" ${pkg%%:*} "*) ;; *) batch="$batch $pkg" ;; esac
  done
  pending=
  [ -n "$batch" ] || break
  # shellcheck disable=SC2086 # one word a package
  if ! debs=$(fetch $batch); then
    # A fresh machine may have no package lists yet, or lists older than the mirror:
    # refresh them once (root only) and ask again.
    [ "$(id -u)" = 0 ] || die "apt-get update (as root) may help"
    echo "images: refreshing the package lists (apt-get update)" >&2
    apt-get update -qq >&2 || die "apt-get update failed"
    # shellcheck disable=SC2086
    debs=$(fetch $batch)
  fi
  for deb in $debs; do
    unpack "$deb"
  done
done

for p in $needed; do
  found=
  for pkg in $packages; do
    for q in "$p" "${p#/usr}" "/usr$p"; do
      take "$work/pkg/${pkg%%:*}" "$q" && found=1 && break 2
    done
  done
  [ -n "$found" ] || die "$p is in none of the packages: $packages"
done

# CA bundle as update-ca-certificates writes it: every certificate, in name order, each
# ending in a newline (awk adds a missing one).
mkdir -p "$rootfs${CA_BUNDLE%/*}"
(cd "$work/pkg/ca-certificates/usr/share/ca-certificates" &&
  find . -name '*.crt' -print0 | LC_ALL=C sort -z | xargs -0 awk 1) >"$rootfs$CA_BUNDLE"
take "$work/pkg/tzdata" usr/share/zoneinfo
ln -s /usr/share/zoneinfo/Etc/UTC "$rootfs/etc/localtime"
take "$work/pkg/base-files" etc/os-release

mkdir -p "$rootfs/tmp" "$rootfs/root" "$rootfs/home/nonroot"
cat >"$rootfs/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:$USER_ID:$USER_ID:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<EOF
root:x:0:
nobody:x:65534:
nonroot:x:$USER_ID:
EOF
cat >"$rootfs/etc/nsswitch.conf" <<EOF
passwd: files
group: files
hosts: files dns
EOF
echo "images: base from$unpacked ($(du -sh "$rootfs" | cut -f1))" >&2

# The three at once (two cores: gzip of the binaries is most of the time), unless they
# go into one OCI layout, whose index each adds itself to.
mkdir -p "$out"
pids=
for c in $IMAGES; do
  "$imagebuild" --tag "$repo/tas-$c:$version" --platform "$platform" --created "$epoch" \
    --entrypoint "/usr/local/bin/tas-$c" --user "$USER_ID:$USER_ID" --workdir /home/nonroot \
    --env "PATH=$PATH_ENV" --env "SSL_CERT_FILE=$CA_BUNDLE" \
    --label "org.opencontainers.image.source=$source_url" \
    --label "org.opencontainers.image.licenses=$license" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.title=tas-$c" \
    --layer "$rootfs" --layer "$(bin_of "$c")=/usr/local/bin/tas-$c" \
    --chmod /tmp=1777 --chmod /root=0700 --chmod /home/nonroot=0700 \
    --chown "/home/nonroot=$USER_ID:$USER_ID" \
    ${oci:+--oci-layout "$oci"} --out "$out/tas-$c.tar" >"$work/digest-$c" &
  if [ -n "$oci" ]; then
    wait $! || die "imagebuild failed for tas-$c"
  else
    pids="$pids $!"
  fi
done
for pid in $pids; do
  wait "$pid" || die "imagebuild failed"
done
for c in $IMAGES; do cat "$work/digest-$c"; done >"$out/digests"
cat "$out/digests" >&2
echo "images: $(du -ch "$out"/tas-*.tar | tail -n 1 | cut -f1) in $out, $((($(date +%s%N) - start) / 1000000)) ms" >&2
echo "$out"
