//! A scheduler (in-process, its HTTP server on every address) with kwok nodes and
//! hand-written NodeResourceTopology objects, and a selectorless Service whose endpoint
//! is this host's own address, so the API server's service proxy reaches the scheduler
//! the way it reaches a scheduler pod in a real cluster.

use std::net::{IpAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_testcluster::{
    FakeNode, TestCluster, apply_crds_from_dir, crd_dir, create_fake_node, free_ports, unique_name,
    unique_namespace, wait_for,
};

pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const GROUP: &str = "kubectl-tas-test.tas.dev/group";
/// The test Service's name and port name.
pub const SERVICE: &str = "tas-sched";
pub const PORT_NAME: &str = "http";

pub struct Env {
    pub cluster: &'static TestCluster,
    pub client: Client,
    pub ns: String,
    pub group: String,
    pub scheduler: String,
    /// The scheduler's HTTP port on this host.
    pub http_port: u16,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

pub async fn env(prefix: &str) -> Env {
    let cluster = TestCluster::shared().expect("cluster");
    let client = cluster.client().await.expect("client");
    apply_crds_from_dir(&client, &crd_dir())
        .await
        .expect("CRDs");
    let ns = unique_namespace(&client, prefix).await.expect("namespace");
    Env {
        cluster,
        client,
        ns,
        group: unique_name(prefix),
        scheduler: unique_name("tas"),
        http_port: free_ports(1).expect("port")[0],
        task: None,
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
        let config = json!({"schedulerName": self.scheduler,
            "cache": {"resyncPeriod": "1s", "maxStaleness": "10m"}});
        let settings = tas_scheduler::config::Settings::from_config(
            &serde_json::from_value(config).expect("config"),
        )
        .expect("valid config");
        let client = self.client.clone();
        // Plain HTTP (as `--insecure-http`): the service proxy reaches it with scheme http.
        let addr = tas_runtime::http::Endpoint::insecure(
            format!("0.0.0.0:{}", self.http_port).parse().expect("addr"),
        );
        self.task = Some(tokio::spawn(async move {
            let r =
                tas_scheduler::run::run(client, settings, addr, "test".into(), "default".into())
                    .await;
            if let Err(e) = r {
                panic!("scheduler stopped: {e}");
            }
        }));
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
        let name = unique_name(&self.group);
        let node = FakeNode {
            cpu: cpu.to_string(),
            ..FakeNode::new(name.clone())
        }
        .label(GROUP, self.group.clone());
        create_fake_node(&self.client, &node).await.expect("node");
        tas_testcluster::wait_node_schedulable(&self.client, &name, TIMEOUT)
            .await
            .expect("node schedulable");
        name
    }

    /// Writes the node's NRT (`single-numa-node`, `container` scope): `zones[i]` =
    /// (allocatable cpus, available cpus), 16Gi of memory per zone, and the pod
    /// fingerprint of no pod at all.
    pub async fn nrt(&self, node: &str, zones: &[(u32, u32)]) {
        let attrs = vec![
            json!({"name": "topologyManagerPolicy", "value": "single-numa-node"}),
            json!({"name": "topologyManagerScope", "value": "container"}),
            json!({"name": "nodeTopologyPodsFingerprint", "value": tas_api::fingerprint::compute([])}),
            json!({"name": "nodeTopologyPodsFingerprintMethod", "value": "all"}),
        ];
        let zones: Vec<Value> = zones
            .iter()
            .enumerate()
            .map(|(i, (alloc, avail))| {
                json!({"name": format!("node-{i}"), "type": "Node", "resources": [
                    {"name": "cpu", "capacity": alloc.to_string(), "allocatable": alloc.to_string(), "available": avail.to_string()},
                    {"name": "memory", "capacity": "16Gi", "allocatable": "16Gi", "available": "16Gi"}
                ]})
            })
            .collect();
        let obj: NodeResourceTopology = serde_json::from_value(json!({
            "apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": node}, "attributes": attrs, "zones": zones
        }))
        .expect("nrt");
        Api::<NodeResourceTopology>::all(self.client.clone())
            .patch(
                node,
                &PatchParams::apply("test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .expect("NRT written");
    }

    /// A Guaranteed pod of `cpu` whole CPUs and 1Gi on this env's nodes, for
    /// `scheduler`.
    pub async fn pod(&self, cpu: u32, scheduler: &str) -> String {
        let name = unique_name("g");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {GROUP: self.group},
                "containers": [{"name": "app", "image": "app", "resources": {
                    "requests": {"cpu": cpu.to_string(), "memory": "1Gi"},
                    "limits": {"cpu": cpu.to_string(), "memory": "1Gi"}}}]
            }
        }))
        .expect("pod");
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
        name
    }

    pub async fn wait_bound(&self, pod: &str) -> String {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        wait_for(format!("{pod} bound"), TIMEOUT, || async {
            Ok::<_, kube::Error>(api.get(pod).await?.spec.and_then(|s| s.node_name))
        })
        .await
        .expect("bound")
    }

    /// Runs the `kubectl-tas` binary against the test cluster; its stdout.
    pub fn kubectl_tas(&self, args: &[&str]) -> String {
        let kubeconfig = self.cluster.kubeconfig_path();
        let out = Command::new(env!("CARGO_BIN_EXE_kubectl-tas"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["-n", &self.ns, "--scheduler-namespace", &self.ns])
            .args([
                "--scheduler-service",
                SERVICE,
                "--scheduler-port",
                PORT_NAME,
                // The in-process scheduler serves plain HTTP (as --insecure-http).
                "--scheduler-scheme",
                "http",
            ])
            .env_remove("KUBECONFIG")
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
}
