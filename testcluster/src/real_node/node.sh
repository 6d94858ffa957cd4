# The first process of a real node: PID 1 of the node's own PID, mount and network
# namespaces (`unshare --pid --fork --kill-child --mount --net --mount-proc`), so that
# killing it ends containerd, the kubelet and every container shim at once, and every
# mount and address it makes disappears with it.
#
# $1: the node's directory (containerd.toml, kubeconfig, net.d/, kube-proxy.yaml and
# root/var/lib/kubelet/config.yaml written by the harness). Environment: NODE_IP,
# NODE_PREFIX, API_IP, PAUSE_IMAGE, CONTAINERD, CTR, KUBELET, NODE_NAME; KUBE_PROXY (the
# binary, when the node runs one); DEVPLUGIN, DEVICE_RESOURCE, DEVICE_NUMA, DEVICE_COUNT
# (when it runs the device plugin); DRADRIVER, DRA_DRIVER, DRA_GPUS (when it runs the DRA
# driver, which writes CDI specs to $1/cdi, where containerd reads them).
#
# The kubelet runs supervised: when the harness creates restart-kubelet, the kubelet is
# stopped (SIGTERM) and started again, as `systemctl restart kubelet` would;
# stop-kubelet stops it (`systemctl stop kubelet`). The DRA driver runs supervised the
# same way: its exit status goes to dradriver.exited; stop-dradriver stops it (SIGTERM:
# it deletes its ResourceSlices) as deleting its DaemonSet pod would.
set -eu
d=$1
log() { echo "node.sh: $*"; }

# Host paths the kubelet, containerd and CNI write whatever their configuration says
# (/var/lib/kubelet/{pki,device-plugins}, /var/log/containers, /run/containerd,
# /run/netns, /var/lib/cni): each gets a directory of the node's own, here only.
for p in /run /var/lib /var/log; do
  mkdir -p "$d/root$p"
  mount --bind "$d/root$p" "$p"
done

# The fake 2-NUMA sysfs view: node0 = cpu0, node1 = cpu1, half the memory each.
sys="$d/sys"
mkdir -p "$sys"
cp -rP /sys/devices/system/node "$sys/" 2>/dev/null || true
cp -rP /sys/devices/system/cpu "$sys/" 2>/dev/null || true
n="$sys/node"
if [ ! -d "$n/node1" ]; then
  cp -rP "$n/node0" "$n/node1" 2>/dev/null || true
  rm -f "$n/node1"/memory[0-9]*
fi
rm -f "$n/node0/cpu1" "$n/node1/cpu0"
ln -sfn ../../cpu/cpu0 "$n/node0/cpu0"
ln -sfn ../../cpu/cpu1 "$n/node1/cpu1"
echo 0 >"$n/node0/cpulist"
echo 1 >"$n/node1/cpulist"
echo 1 >"$n/node0/cpumap"
echo 2 >"$n/node1/cpumap"
echo "10 20" >"$n/node0/distance"
echo "20 10" >"$n/node1/distance"
for f in online possible has_cpu has_memory has_normal_memory; do echo 0-1 >"$n/$f"; done
total=$(awk '/MemTotal/ {print $4}' /sys/devices/system/node/node0/meminfo)
free=$(awk '/MemFree/ {print $4}' /sys/devices/system/node/node0/meminfo)
for i in 0 1; do
  printf 'Node %s MemTotal:       %s kB\nNode %s MemFree:        %s kB\nNode %s MemUsed:        %s kB\n' \
    "$i" $((total / 2)) "$i" $((free / 2)) "$i" $(((total - free) / 2)) >"$n/node$i/meminfo"
done
c="$sys/cpu"
rm -f "$c/cpu1/node0"
ln -sfn ../../node/node1 "$c/cpu1/node1"
mount --bind "$n" /sys/devices/system/node
mount --bind "$c" /sys/devices/system/cpu

# The node's address lives on a veth pair whose both ends stay in this namespace: the
# kubelet refuses a loopback node IP, and nothing outside needs to reach it.
ip link set lo up
ip link add eth0 type veth peer name eth0-peer
ip addr add "$NODE_IP/$NODE_PREFIX" dev eth0
ip link set eth0 up
ip link set eth0-peer up
ip route add default dev eth0
# The API server as pods see it (the endpoint of the `kubernetes` Service, which
# kube-proxy maps the Service's address to): the harness's forwarder listens on it.
ip addr add "$API_IP/32" dev lo

log "starting containerd"
"$CONTAINERD" --config "$d/containerd.toml" >"$d/containerd.log" 2>&1 &
i=0
until "$CTR" -a "$d/containerd.sock" version >/dev/null 2>&1; do
  i=$((i + 1))
  if [ $i -gt 200 ]; then log "containerd did not answer on $d/containerd.sock in 20 s"; exit 1; fi
  sleep 0.1
done
"$CTR" -a "$d/containerd.sock" -n k8s.io images import "$PAUSE_IMAGE" >/dev/null
log "containerd ready, sandbox image imported"

# The harness writes the kubeconfig once its forwarder listens in this namespace.
i=0
until [ -f "$d/kubeconfig" ]; do
  i=$((i + 1))
  if [ $i -gt 600 ]; then log "no kubeconfig from the harness in 30 s"; exit 1; fi
  sleep 0.05
done
# Where kubeadm puts them: the kubelet's root /var/lib/kubelet (this node's own), its
# configuration /var/lib/kubelet/config.yaml.
start_kubelet() {
  log "starting the kubelet"
  "$KUBELET" --config=/var/lib/kubelet/config.yaml --kubeconfig="$d/kubeconfig" \
    --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" --v=2 >>"$d/kubelet.log" 2>&1 &
  kubelet=$!
}
start_kubelet
if [ -n "${KUBE_PROXY:-}" ]; then
  log "starting kube-proxy"
  "$KUBE_PROXY" --config="$d/kube-proxy.yaml" >"$d/kube-proxy.log" 2>&1 &
fi
if [ -n "${DEVPLUGIN:-}" ]; then
  log "starting the device plugin ($DEVICE_COUNT x $DEVICE_RESOURCE on NUMA node $DEVICE_NUMA)"
  "$DEVPLUGIN" --resource="$DEVICE_RESOURCE" --numa-node="$DEVICE_NUMA" \
    --count="$DEVICE_COUNT" >"$d/devplugin.log" 2>&1 &
fi
dra=
if [ -n "${DRADRIVER:-}" ]; then
  log "starting the DRA driver $DRA_DRIVER ($DRA_GPUS GPU(s) per NUMA node)"
  # Its sockets where a DaemonSet driver's go: the kubelet's plugins_registry and
  # plugins/<driver> under /var/lib/kubelet (the driver's defaults).
  "$DRADRIVER" --driver="$DRA_DRIVER" --node="$NODE_NAME" --kubeconfig="$d/kubeconfig" \
    --gpus-per-numa-node="$DRA_GPUS" --cdi-dir="$d/cdi" --ready="$d/dradriver.ready" \
    >"$d/dradriver.log" 2>&1 &
  dra=$!
fi
touch "$d/started"
# A kubelet that exits on its own is not restarted (a real node's systemd would, into
# the same error): its exit status goes to kubelet.exited for the harness to report.
while sleep 0.1; do
  if [ -f "$d/restart-kubelet" ]; then
    log "restarting the kubelet"
    kill "$kubelet" 2>/dev/null || true
    wait "$kubelet" 2>/dev/null || true
    rm -f "$d/restart-kubelet" "$d/kubelet.exited"
    start_kubelet
  elif [ -f "$d/stop-kubelet" ]; then
    log "stopping the kubelet"
    [ -n "$kubelet" ] && kill "$kubelet" 2>/dev/null || true
    [ -n "$kubelet" ] && wait "$kubelet" 2>/dev/null || true
    kubelet=
    rm -f "$d/stop-kubelet"
  elif [ -f "$d/stop-dradriver" ] || { [ -n "$dra" ] && ! kill -0 "$dra" 2>/dev/null; }; then
    status=0
    if [ -n "$dra" ]; then
      if [ -f "$d/stop-dradriver" ]; then kill "$dra" 2>/dev/null || true; fi
      wait "$dra" || status=$?
    fi
    log "the DRA driver exited with status $status"
    echo "$status" >"$d/dradriver.exited"
    dra=
    rm -f "$d/stop-dradriver"
  elif [ -n "$kubelet" ] && ! kill -0 "$kubelet" 2>/dev/null; then
    status=0
    wait "$kubelet" || status=$?
    log "the kubelet exited with status $status"
    echo "$status" >"$d/kubelet.exited"
    kubelet=
  fi
done
