//! Command lines and config files of the components: what each one needs to run as a
//! plain process on loopback, with all state inside the cluster's base directory.
//!
//! Layout of the base directory:
//!
//! ```text
//! etcd/                  etcd data
//! certs/apiserver.crt    kube-apiserver's self-signed serving cert (+ its CA): the
//!                        kubeconfig's certificate authority
//! sa.key, sa.pub         service-account signing key (PKCS#8) and its public key
//! tokens.csv             the admin bearer token (group system:masters)
//! kubeconfig             admin kubeconfig for tests and components
//! kube-scheduler.yaml    KubeSchedulerConfiguration
//! kwok-stages.yaml       kwok's Stage definitions (testcluster/kwok/stages.yaml)
//! logs/<component>.log   stdout + stderr of each component
//! audit-policy.yaml      kube-apiserver's audit policy (ClusterOptions::audit_bindings)
//! logs/audit.log         its audit log: one JSON event per line
//! pids                   pids of the components, for the watchdog
//! ```

use std::path::{Path, PathBuf};

/// The kwok stages checked in at `testcluster/kwok/stages.yaml`, written into every cluster.
pub const KWOK_STAGES: &str = include_str!("../kwok/stages.yaml");

/// Service IP range; kube-apiserver needs one even though nothing routes it.
const SERVICE_CIDR: &str = "10.0.0.0/24";
/// Range kwok draws fake pod IPs from; large enough for benchmark-sized runs.
const POD_CIDR: &str = "10.64.0.0/12";

/// Ports chosen for one cluster.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ports {
    pub etcd: u16,
    pub apiserver: u16,
    pub controller_manager: u16,
    pub scheduler: u16,
    pub kwok: u16,
}

impl Ports {
    pub const COUNT: usize = 5;

    pub fn from_slice(p: &[u16]) -> Self {
        Self {
            etcd: p[0],
            apiserver: p[1],
            controller_manager: p[2],
            scheduler: p[3],
            kwok: p[4],
        }
    }
}

/// Paths inside a cluster's base directory.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub base: PathBuf,
}

impl Layout {
    pub fn etcd_data(&self) -> PathBuf {
        self.base.join("etcd")
    }
    pub fn cert_dir(&self) -> PathBuf {
        self.base.join("certs")
    }
    /// Written by kube-apiserver at startup (no `--tls-cert-file` given).
    pub fn apiserver_cert(&self) -> PathBuf {
        self.cert_dir().join("apiserver.crt")
    }
    pub fn sa_private_key(&self) -> PathBuf {
        self.base.join("sa.key")
    }
    pub fn sa_public_key(&self) -> PathBuf {
        self.base.join("sa.pub")
    }
    pub fn tokens(&self) -> PathBuf {
        self.base.join("tokens.csv")
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.base.join("kubeconfig")
    }
    pub fn scheduler_config(&self) -> PathBuf {
        self.base.join("kube-scheduler.yaml")
    }
    pub fn kwok_stages(&self) -> PathBuf {
        self.base.join("kwok-stages.yaml")
    }
    pub fn logs(&self) -> PathBuf {
        self.base.join("logs")
    }
    pub fn audit_policy(&self) -> PathBuf {
        self.base.join("audit-policy.yaml")
    }
    pub fn audit_log(&self) -> PathBuf {
        self.logs().join("audit.log")
    }
}

fn flag(name: &str, value: impl AsRef<Path>) -> String {
    format!("--{name}={}", value.as_ref().display())
}

/// Replaces the value of `--<name>=` in `args` (appends it when absent).
pub(crate) fn set_flag(args: &mut Vec<String>, name: &str, value: &str) {
    let prefix = format!("--{name}=");
    args.retain(|a| !a.starts_with(&prefix));
    args.push(format!("{prefix}{value}"));
}

pub(crate) fn etcd_args(layout: &Layout, ports: Ports) -> Vec<String> {
    let client_url = format!("http://127.0.0.1:{}", ports.etcd);
    vec![
        flag("data-dir", layout.etcd_data()),
        flag("listen-client-urls", &client_url),
        flag("advertise-client-urls", &client_url),
        // No peers: let the kernel pick a port nobody connects to.
        flag("listen-peer-urls", "http://127.0.0.1:0"),
        // The data is thrown away after the run; fsync only costs time.
        "--unsafe-no-fsync".into(),
        flag("log-level", "warn"),
    ]
}

pub(crate) fn apiserver_args(layout: &Layout, ports: Ports) -> Vec<String> {
    vec![
        flag("etcd-servers", format!("http://127.0.0.1:{}", ports.etcd)),
        flag("bind-address", "127.0.0.1"),
        flag("advertise-address", "127.0.0.1"),
        flag("secure-port", ports.apiserver.to_string()),
        flag("cert-dir", layout.cert_dir()),
        flag("service-cluster-ip-range", SERVICE_CIDR),
        flag(
            "service-account-issuer",
            "https://kubernetes.default.svc.cluster.local",
        ),
        flag("service-account-key-file", layout.sa_public_key()),
        flag("service-account-signing-key-file", layout.sa_private_key()),
        flag("token-auth-file", layout.tokens()),
        flag("authorization-mode", "Node,RBAC"),
        flag("allow-privileged", "true"),
        // There is no kube-proxy or Service network: don't maintain the kubernetes
        // Service's endpoints (ClusterOptions::advertise_address turns them on).
        flag("endpoint-reconciler-type", "none"),
        flag("profiling", "false"),
        // Reach kubelets (logs, exec; real nodes, see crate::real_node) by the address
        // the node reports, never by looking its name up in DNS, which would leave the
        // machine.
        flag("kubelet-preferred-address-types", "InternalIP"),
    ]
}

/// The flags that make kube-apiserver write [`crate::audit::POLICY`]'s events to
/// `logs/audit.log`, synchronously (the log backend's blocking mode), never rotated.
pub(crate) fn audit_args(layout: &Layout) -> Vec<String> {
    vec![
        flag("audit-policy-file", layout.audit_policy()),
        flag("audit-log-path", layout.audit_log()),
        flag("audit-log-format", "json"),
        flag("audit-log-mode", "blocking"),
        flag("audit-log-maxsize", "0"),
    ]
}

pub(crate) fn controller_manager_args(layout: &Layout, ports: Ports) -> Vec<String> {
    vec![
        flag("kubeconfig", layout.kubeconfig()),
        flag("leader-elect", "false"),
        flag("bind-address", "127.0.0.1"),
        flag("secure-port", ports.controller_manager.to_string()),
        flag("root-ca-file", layout.apiserver_cert()),
        flag("service-account-private-key-file", layout.sa_private_key()),
        // All controllers act as the admin: no per-controller service accounts to wait for.
        flag("use-service-account-credentials", "false"),
        flag("profiling", "false"),
    ]
}

pub(crate) fn scheduler_args(layout: &Layout, ports: Ports) -> Vec<String> {
    vec![
        flag("config", layout.scheduler_config()),
        flag("bind-address", "127.0.0.1"),
        flag("secure-port", ports.scheduler.to_string()),
        flag("profiling", "false"),
    ]
}

/// kube-scheduler's configuration: the admin kubeconfig, no leader election, and the
/// client rate limits (upstream defaults 50/100; raise them for throughput runs).
pub(crate) fn scheduler_config(layout: &Layout, qps: f32, burst: u32) -> String {
    let doc = serde_json::json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": layout.kubeconfig(),
            "qps": qps,
            "burst": burst,
        },
        "leaderElection": { "leaderElect": false },
    });
    // JSON is YAML, and kube-scheduler reads either.
    doc.to_string()
}

pub(crate) fn kwok_args(layout: &Layout, ports: Ports) -> Vec<String> {
    vec![
        flag("kubeconfig", layout.kubeconfig()),
        flag("config", layout.kwok_stages()),
        flag("manage-all-nodes", "false"),
        flag(
            "manage-nodes-with-annotation-selector",
            "kwok.x-k8s.io/node=fake",
        ),
        flag("cidr", POD_CIDR),
        flag("node-ip", "127.0.0.1"),
        // kwok's HTTP server (healthz, metrics); its default would be no server.
        flag("server-address", format!("127.0.0.1:{}", ports.kwok)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_config_is_valid_yaml() {
        let layout = Layout {
            base: PathBuf::from("cluster dir"),
        };
        let doc: serde_json::Value =
            serde_norway::from_str(&scheduler_config(&layout, 200.0, 400)).unwrap();
        assert_eq!(
            doc["clientConnection"]["kubeconfig"],
            "cluster dir/kubeconfig"
        );
        assert_eq!(doc["clientConnection"]["burst"], 400);
        assert_eq!(doc["leaderElection"]["leaderElect"], false);
    }

    #[test]
    fn stages_parse_as_yaml_documents() {
        use serde::Deserialize;
        let names: Vec<String> = serde_norway::Deserializer::from_str(KWOK_STAGES)
            .map(|doc| {
                let v = serde_json::Value::deserialize(doc).unwrap();
                assert_eq!(v["kind"], "Stage");
                v["metadata"]["name"].as_str().unwrap().to_string()
            })
            .collect();
        for want in [
            "node-initialize",
            "node-heartbeat-with-lease",
            "pod-ready",
            "pod-complete",
            "pod-delete",
        ] {
            assert!(names.iter().any(|n| n == want), "missing stage {want}");
        }
    }
}
