#!/usr/bin/env bash
# Installs what a real node of the tests runs besides the kubelet (testcluster's
# real_node module): containerd, runc, the CNI plugins and iptables (kube-proxy's), from
# the distribution's packages (Debian: containerd runc containernetworking-plugins
# iptables). A no-op, without any
# package manager call, when all of them are present. Prints the CNI plugin directory last.
#
# No service is started: the packages' init scripts are kept from running
# (policy-rc.d), and the tests start containerd themselves, inside a node's own mount
# and network namespace, with their own configuration.
set -euo pipefail

cni_dirs="/usr/lib/cni /opt/cni/bin"
have_cni() {
  for d in $cni_dirs; do
    if [ -x "$d/bridge" ] && [ -x "$d/host-local" ] && [ -x "$d/loopback" ]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

if command -v containerd >/dev/null && command -v runc >/dev/null && command -v ctr >/dev/null &&
  command -v iptables-restore >/dev/null && have_cni >/dev/null; then
  have_cni
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "node-runtime: containerd, runc, iptables or the CNI plugins are missing, and installing them needs root" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "node-runtime: containerd, runc, iptables or the CNI plugins are missing, and apt-get is not available: install them with the system's package manager" >&2
  exit 1
fi

start=$(date +%s)
echo "node-runtime: installing containerd runc containernetworking-plugins iptables" >&2
DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -q --no-install-recommends \
  containerd runc containernetworking-plugins iptables >&2 ||
  {
    # A stale package index: refresh it once and retry.
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -q --no-install-recommends \
      containerd runc containernetworking-plugins iptables >&2
  }
echo "node-runtime: installed in $(($(date +%s) - start))s" >&2
have_cni || { echo "node-runtime: no CNI plugin directory ($cni_dirs) after the install" >&2; exit 1; }
