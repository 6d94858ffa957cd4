//! A scheduler (in-process, its HTTP server on every address) with kwok nodes and
//! hand-written NodeResourceTopology objects, and a selectorless Service whose endpoint
//! is this host's own address, so the API server's service proxy reaches the scheduler
//! the way it reaches a scheduler pod in a real cluster.

use std::net::{IpAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_testcluster::free_ports;
use tas_testcluster::scope::{Scope, nrt_object};

pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const GROUP: &str = "kubectl-tas-test.tas.dev/group";
/// The test Service's name and port name.
pub const SERVICE: &str = "tas-sched";
pub const PORT_NAME: &str = "http";

/// One test's namespace, node group and scheduler (name, HTTP port and in-process
/// task). The [`Scope`]'s fields (`cluster`, `client`, `ns`, `group`, `scheduler`)
/// read through `env.client` and so on.
pub struct Env {
    scope: Scope,
    /// The scheduler's HTTP port on this host.
    pub http_port: u16,
}

impl std::ops::Deref for Env {
    type Target = Scope;
    fn deref(&self) -> &Scope {
        &self.scope
    }
}

pub async fn env(prefix: &str) -> Env {
    Env {
        scope: Scope::new(prefix).await.expect("test scope"),
        http_port: free_ports(1).expect("port")[0],
    }
}

/// This host's address other processes can connect to: not loopback, which the API
/// server refuses to proxy to.
pub fn host_address() -> IpAddr {
    let routed = UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("10.255.255.254:9").map(|()| s))
        .and_then(|s| s.local_addr())
        .map(|a| a.ip())
        .ok()
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    if let Some(ip) = routed {
        return ip;
    }
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .expect("`ip` lists the host's addresses (no default route to pick one)");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next()?.parse().ok())
        .expect("a global IPv4 address on this host")
}

impl Env {
    /// Starts the scheduler, its HTTP server on every address at `http_port`.
    pub fn start_scheduler(&mut self) {
        // Foreign pods not counted: the scheduler cannot lean on the kubelet's choice of
        // the lowest zone, so a pod that fits every zone is held on every zone (what the
        // reservation pictures of these tests show).
        let config = json!({"schedulerName": self.scheduler,
            "cache": {"resyncPeriod": "1s", "maxStaleness": "10m", "foreignPods": "None"}});
        let settings = tas_scheduler::config::Settings::from_config(
            &serde_json::from_value(config).expect("config"),
        )
        .expect("valid config");
        let client = self.client.clone();
        // HTTPS with the reviews every TAS binary makes (as without `--insecure-http`):
        // the service proxy reaches it with scheme https, and `/debug/reservations`
        // answers only a token allowed to read it.
        let addr = tas_runtime::http::Endpoint {
            address: format!("0.0.0.0:{}", self.http_port).parse().expect("addr"),
            security: tas_runtime::http::Security::Secure {
                cert: tas_runtime::http::CertSource::SelfSigned {
                    names: vec!["localhost".into()],
                },
                authorizer: tas_runtime::http::Authorizer::new(self.client.clone()),
            },
        };
        self.scope.spawn(async move {
            let r =
                tas_scheduler::run::run(client, settings, addr, "test".into(), "default".into())
                    .await;
            if let Err(e) = r {
                panic!("scheduler stopped: {e}");
            }
        });
    }

    /// A selectorless Service in front of the scheduler's port, with its endpoint (as
    /// Endpoints and as an EndpointSlice) at this host's address. The API server only
    /// proxies to an endpoint address that is the IP of the Pod its `targetRef` names,
    /// so a Pod nobody runs stands for the scheduler pod, its status carrying that IP.
    pub async fn scheduler_service(&self) {
        let ip = host_address().to_string();
        let port = i32::from(self.http_port);
        let pp = PostParams::default();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        let stand_in: Pod = serde_json::from_value(json!({
            "metadata": {"name": SERVICE},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "scheduler", "image": "scheduler"}]}
        }))
        .expect("pod");
        let stand_in = pods.create(&pp, &stand_in).await.expect("stand-in pod");
        let status = json!({"status": {"podIP": ip, "podIPs": [{"ip": ip}]}});
        pods.patch_status(SERVICE, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("stand-in pod IP");
        let target = json!({"kind": "Pod", "namespace": self.ns, "name": SERVICE,
            "uid": stand_in.metadata.uid});
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": SERVICE},
            "spec": {"ports": [{"name": PORT_NAME, "port": 80, "targetPort": port, "protocol": "TCP"}]}
        }))
        .expect("service");
        Api::<Service>::namespaced(self.client.clone(), &self.ns)
            .create(&pp, &service)
            .await
            .expect("service created");
        let endpoints: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": SERVICE},
            "subsets": [{"addresses": [{"ip": ip, "targetRef": target}], "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]}]
        }))
        .expect("endpoints");
        Api::<Endpoints>::namespaced(self.client.clone(), &self.ns)
            .create(&pp, &endpoints)
            .await
            .expect("endpoints created");
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": format!("{SERVICE}-test"), "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}, "targetRef": target}],
            "ports": [{"name": PORT_NAME, "port": port, "protocol": "TCP"}]
        }))
        .expect("endpoint slice");
        Api::<EndpointSlice>::namespaced(self.client.clone(), &self.ns)
            .create(&pp, &slice)
            .await
            .expect("endpoint slice created");
    }

    /// A kwok node of this env's group with `cpu` allocatable.
    pub async fn node(&self, cpu: u32) -> String {
        self.scope.node(GROUP, cpu, TIMEOUT).await.expect("node")
    }

    /// Writes the node's NRT (`single-numa-node`, `container` scope): `zones[i]` =
    /// (allocatable cpus, available cpus), 16Gi of memory per zone, and the pod
    /// fingerprint of no pod at all.
    pub async fn nrt(&self, node: &str, zones: &[(u32, u32)]) {
        let fingerprint = tas_api::fingerprint::compute([]);
        let obj = nrt_object(node, "single-numa-node", zones, "16Gi", Some(&fingerprint));
        let _: NodeResourceTopology = serde_json::from_value(obj.clone()).expect("nrt");
        self.scope.apply_nrt(&obj).await.expect("NRT written");
    }

    /// A Guaranteed pod of `cpu` whole CPUs and 1Gi on this env's nodes, for
    /// `scheduler`.
    pub async fn pod(&self, cpu: u32, scheduler: &str) -> String {
        self.scope
            .create_guaranteed_pod(GROUP, scheduler, cpu, "1Gi")
            .await
            .expect("pod created")
    }

    pub async fn wait_bound(&self, pod: &str) -> String {
        self.scope.wait_bound(pod, TIMEOUT).await.expect("bound")
    }

    /// Runs the `kubectl-tas` binary against the test cluster; its stdout.
    pub fn kubectl_tas(&self, args: &[&str]) -> String {
        // The debug endpoint is shown only a token given for it, never the kubeconfig's.
        let token = tempfile::NamedTempFile::new().expect("a token file");
        std::fs::write(
            token.path(),
            self.cluster.admin_token().expect("the admin token"),
        )
        .expect("writing the token file");
        let file = token.path().to_string_lossy().into_owned();
        self.kubectl_tas_plain(&[&["--scheduler-token-file", &file], args].concat())
    }

    /// `kubectl tas ARGS` with the admin kubeconfig, expected to fail: its stderr.
    pub fn kubectl_tas_fails(&self, args: &[&str]) -> String {
        let out = self
            .kubectl_tas_command(args)
            .output()
            .expect("kubectl-tas runs");
        assert!(
            !out.status.success(),
            "kubectl-tas {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// `kubectl tas ARGS` with the admin kubeconfig (which holds a bearer token) and no
    /// `--scheduler-token-file`.
    pub fn kubectl_tas_plain(&self, args: &[&str]) -> String {
        let out = self
            .kubectl_tas_command(args)
            .output()
            .expect("kubectl-tas runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "kubectl-tas {args:?} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// The `kubectl-tas` command with the admin kubeconfig, this env's namespace and
    /// scheduler Service.
    pub fn kubectl_tas_command(&self, args: &[&str]) -> Command {
        let kubeconfig = self.cluster.kubeconfig_path();
        let mut command = Command::new(env!("CARGO_BIN_EXE_kubectl-tas"));
        command
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["-n", &self.ns, "--scheduler-namespace", &self.ns])
            .args([
                "--scheduler-service",
                SERVICE,
                "--scheduler-port",
                PORT_NAME,
                "--scheduler-scheme",
                "https",
            ])
            .env_remove("KUBECONFIG");
        command
    }
}
