//! The files a real node runs from, as pure functions of its options and paths:
//! containerd's configuration, the CNI network, the KubeletConfiguration and the
//! kubelet's kubeconfig. Nothing here touches the host.

use std::path::Path;

use super::{CpuManagerPolicy, RealNodeOptions};

/// The reference the sandbox image is imported under (`testcluster/tools/build-pause.sh`
/// tags it so) and containerd's `sandbox_image`.
pub const PAUSE_IMAGE: &str = "tas.local/pause:1";

/// containerd 1.6's configuration (version 2): state under `dir`, the CRI plugin with
/// the settings this machine type needs (see the module docs of [`super`]).
pub fn containerd_toml(dir: &Path, cni_bin_dir: &Path) -> String {
    let cni = cni_bin_dir.display();
    containerd_config(
        dir,
        &Cri {
            version: 2,
            runtime: "io.containerd.grpc.v1.cri",
            images: String::new(),
            runtime_settings: format!("sandbox_image = \"{PAUSE_IMAGE}\"\n  "),
            runtime_extra: "",
            containerd_settings: "snapshotter = \"overlayfs\"\n    ",
            runc_settings: String::new(),
            cni_bin: format!("bin_dir = \"{cni}\""),
        },
    )
}

/// containerd 2's configuration (version 3) for a node that runs a DRA driver: the
/// settings of [`containerd_toml`], the shim at `shim` (the tools' build, next to that
/// containerd), and CDI specs read from `<dir>/cdi` only, where the node's DRA driver
/// writes them.
pub fn containerd_cdi_toml(dir: &Path, cni_bin_dir: &Path, shim: &Path) -> String {
    let d = dir.display();
    let cni = cni_bin_dir.display();
    let images = "io.containerd.cri.v1.images";
    containerd_config(
        dir,
        &Cri {
            version: 3,
            runtime: "io.containerd.cri.v1.runtime",
            images: format!(
                r#"[plugins."{images}"]
  snapshotter = "overlayfs"
  [plugins."{images}".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

"#
            ),
            runtime_settings: String::new(),
            runtime_extra: &format!(
                r#"
  # CDI is always on in containerd 2; only the node's own spec directory is read.
  cdi_spec_dirs = ["{d}/cdi"]"#
            ),
            containerd_settings: "",
            runc_settings: format!("runtime_path = \"{}\"\n      ", shim.display()),
            cni_bin: format!("bin_dirs = [\"{cni}\"]"),
        },
    )
}

/// Where containerd's configuration versions differ: the CRI runtime plugin's name, and
/// the settings each version keeps in which table (lines ready to splice, indentation
/// included).
struct Cri<'a> {
    version: u8,
    /// The plugin whose tables hold the runtime, its runc shim and the CNI settings.
    runtime: &'a str,
    /// Tables of their own before the runtime's (version 3's images plugin).
    images: String,
    /// The runtime plugin's settings before `restrict_oom_score_adj`, and after it.
    runtime_settings: String,
    runtime_extra: &'a str,
    /// Before `default_runtime_name` in the runtime's `containerd` table.
    containerd_settings: &'a str,
    /// Before `[...runc.options]` in the runc table.
    runc_settings: String,
    /// The CNI binaries' directory setting.
    cni_bin: String,
}

/// containerd's configuration of `cri`'s version: state under `dir`, and the settings
/// both versions need (see the module docs of [`super`]).
fn containerd_config(dir: &Path, cri: &Cri<'_>) -> String {
    let d = dir.display();
    let Cri {
        version,
        runtime: p,
        images,
        runtime_settings,
        runtime_extra,
        containerd_settings,
        runc_settings,
        cni_bin,
    } = cri;
    format!(
        r#"version = {version}
root = "{d}/containerd/root"
state = "{d}/containerd/state"

[grpc]
  address = "{d}/containerd.sock"

{images}[plugins."{p}"]
  {runtime_settings}# Root here lacks CAP_SYS_RESOURCE: without this, runc fails every sandbox while
  # raising its oom_score_adj.
  restrict_oom_score_adj = true{runtime_extra}
  [plugins."{p}".containerd]
    {containerd_settings}default_runtime_name = "runc"
    [plugins."{p}".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      {runc_settings}[plugins."{p}".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."{p}".cni]
    {cni_bin}
    conf_dir = "{d}/net.d"
"#
    )
}

/// One bridge network inside the node's network namespace, the pods' default route
/// through it, no masquerading (no iptables rule of the plugin's anywhere).
pub fn cni_conflist(pod_cidr: &str) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "tas-real-node",
        "plugins": [{
            "type": "bridge",
            "bridge": "cni0",
            "isGateway": true,
            // The default route through the bridge, so pods reach Service addresses.
            "isDefaultGateway": true,
            "ipMasq": false,
            "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]]}
        }]
    })
    .to_string()
}

/// The KubeletConfiguration: cgroupfs, no swap check, kernel defaults left alone, the
/// CPU and Topology Manager policies asked for, no eviction on this shared disk.
pub fn kubelet_yaml(options: &RealNodeOptions, dir: &Path) -> String {
    let cpu = match options.cpu_manager {
        CpuManagerPolicy::None => "cpuManagerPolicy: none\n".to_owned(),
        // 100m reserved: the static policy reserves whole CPUs (ceil: CPU 0, the first
        // of NUMA node 0) and leaves CPU 1 for exclusive use, while the node's
        // allocatable CPU stays 1900m, so Burstable pods (TAS's own) fit beside a
        // Guaranteed 1-CPU pod. `reservedSystemCPUs: "0"` would cut allocatable to 1000m.
        CpuManagerPolicy::Static => {
            "cpuManagerPolicy: static\nkubeReserved:\n  cpu: 100m\n".to_owned()
        }
    };
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://{d}/containerd.sock
cgroupDriver: cgroupfs
failSwapOn: false
protectKernelDefaults: false
{cpu}topologyManagerPolicy: {topology}
address: {ip}
port: 10250
readOnlyPort: 0
healthzPort: 0
resolvConf: ""
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "0%"
  imagefs.available: "0%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#,
        d = dir.display(),
        topology = options.topology_policy,
        ip = options.node_ip,
    )
}

/// kube-proxy's configuration: iptables rules in the node's network namespace only, and
/// no conntrack sysctl (those are the host's): every conntrack setting 0, "leave it".
pub fn kube_proxy_yaml(options: &RealNodeOptions, dir: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {d}/kubeconfig
hostnameOverride: {name}
mode: iptables
clusterCIDR: {cidr}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        d = dir.display(),
        name = options.name,
        cidr = options.pod_cidr,
    )
}

/// The kubelet's kubeconfig: the API server through the forwarder on the node's own
/// loopback, the cluster's CA, the admin token.
pub fn kubeconfig(server: &str, ca: &Path, token: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: kubelet
  user:
    token: {token}
contexts:
- name: test
  context:
    cluster: test
    user: kubelet
current-context: test
"#,
        ca = ca.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_static_policy_reserves_a_fraction_of_a_cpu() {
        let y = kubelet_yaml(&RealNodeOptions::new("n1"), Path::new("/d"));
        assert!(y.contains("cpuManagerPolicy: static\nkubeReserved:\n  cpu: 100m\n"));
        assert!(y.contains("topologyManagerPolicy: single-numa-node"));
        assert!(y.contains("containerRuntimeEndpoint: unix:///d/containerd.sock"));
        let v: serde_json::Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(v["cgroupDriver"], "cgroupfs");
    }

    #[test]
    fn kube_proxy_leaves_the_host_conntrack_alone() {
        let y = kube_proxy_yaml(&RealNodeOptions::new("n1"), Path::new("/d"));
        let v: serde_json::Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(v["conntrack"]["maxPerCore"], 0);
        assert_eq!(v["conntrack"]["min"], 0);
        assert_eq!(v["hostnameOverride"], "n1");
        assert_eq!(v["clientConnection"]["kubeconfig"], "/d/kubeconfig");
    }

    #[test]
    fn containerd_restricts_oom_score_adj() {
        let t = containerd_toml(Path::new("/d"), Path::new("/cni"));
        assert!(t.contains("restrict_oom_score_adj = true"));
        assert!(t.contains("SystemdCgroup = false"));
        assert!(t.contains(&format!("sandbox_image = \"{PAUSE_IMAGE}\"")));
    }

    #[test]
    fn the_cdi_containerd_reads_the_nodes_own_cdi_dir() {
        let t = containerd_cdi_toml(Path::new("/d"), Path::new("/cni"), Path::new("/t/shim"));
        for line in [
            "version = 3",
            "cdi_spec_dirs = [\"/d/cdi\"]",
            "restrict_oom_score_adj = true",
            "runtime_path = \"/t/shim\"",
            "SystemdCgroup = false",
            &format!("sandbox = \"{PAUSE_IMAGE}\""),
        ] {
            assert!(t.contains(line), "{line} in:\n{t}");
        }
    }

    #[test]
    fn cni_has_no_masquerade() {
        let v: serde_json::Value = serde_json::from_str(&cni_conflist("10.1.0.0/24")).unwrap();
        assert_eq!(v["plugins"][0]["ipMasq"], false);
    }
}
