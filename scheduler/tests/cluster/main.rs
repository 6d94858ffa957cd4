//! The scheduler against a real API server with kwok nodes and hand-written
//! NodeResourceTopology objects. Every test runs its own scheduler (in-process, or the
//! binary for leader election) under a unique scheduler name, on its own labelled nodes,
//! so the tests share one control plane without seeing each other's pods.

mod dra_conflict;
mod events;
mod fault_proxy;
mod fence;
mod insane;
mod interpod;
mod leader;
mod node_groups;
mod pods;
mod preemption;
mod spread;
mod volumes;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_testcluster::TestCluster;
use tas_testcluster::scope::{Scope, nrt_object};
use tas_testcluster::wait_for;

pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const GROUP: &str = "sched-test.tas.dev/group";

/// One test's namespace, node group and scheduler (name and in-process task). The
/// [`Scope`]'s fields (`client`, `ns`, `group`, `scheduler`) read through `env.client`
/// and so on.
pub struct Env {
    scope: Scope,
    /// Where the in-process scheduler serves `/metrics` (HTTPS, authorised).
    pub metrics_addr: std::net::SocketAddr,
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
        metrics_addr: (
            std::net::Ipv4Addr::LOCALHOST,
            tas_testcluster::free_ports(1).expect("a free port")[0],
        )
            .into(),
    }
}

impl Env {
    /// Start an in-process scheduler with this env's scheduler name.
    pub fn start_scheduler(&mut self, extra: Value) {
        let client = self.client.clone();
        self.start_scheduler_with(client, extra);
    }

    /// [`Self::start_scheduler`], the scheduler reaching the API server through
    /// `client` (a [`fault_proxy::FaultProxy`]'s).
    pub fn start_scheduler_with(&mut self, client: kube::Client, extra: Value) {
        let mut config = json!({
            "schedulerName": self.scheduler,
            "cache": {"resyncPeriod": "1s"},
            // Leader election is always on: each test elects in its own namespace.
            "leaderElection": {"leaseNamespace": self.ns},
        });
        if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                c.insert(k.clone(), v.clone());
            }
        }
        let settings = tas_scheduler::config::Settings::from_config(
            &serde_json::from_value(config).expect("config"),
        )
        .expect("valid config");
        // Secured as in production: a self-signed certificate, /metrics authorised by
        // the API server.
        let http = tas_runtime::http::Endpoint {
            address: self.metrics_addr,
            security: tas_runtime::http::Security::Secure {
                cert: tas_runtime::http::CertSource::SelfSigned {
                    names: vec!["localhost".into()],
                },
                authorizer: tas_runtime::http::Authorizer::new(self.client.clone()),
            },
        };
        self.scope.spawn(async move {
            let r =
                tas_scheduler::run::run(client, settings, http, "test".into(), "default".into())
                    .await;
            if let Err(e) = r {
                panic!("scheduler stopped: {e}");
            }
        });
    }

    /// The in-process scheduler's `/metrics`, read with the admin's token.
    pub async fn metrics(&self) -> Result<String, String> {
        let cluster = TestCluster::shared().map_err(|e| e.to_string())?;
        let token = cluster.admin_token().map_err(|e| e.to_string())?;
        match tas_testcluster::https_get(self.metrics_addr, "/metrics", Some(&token)).await {
            Ok((200, body)) => Ok(body),
            Ok((code, body)) => Err(format!("/metrics answered {code}: {body}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A kwok node of this env's group with `cpu` allocatable.
    pub async fn node(&self, cpu: u32) -> String {
        self.scope.node(GROUP, cpu, TIMEOUT).await.expect("node")
    }

    /// Write the node's NRT: `zones[i]` = (allocatable cpus, available cpus).
    pub async fn nrt(
        &self,
        node: &str,
        policy: &str,
        zones: &[(u32, u32)],
        fingerprint: Option<&str>,
    ) {
        self.nrt_with_memory(node, policy, zones, "16Gi", fingerprint)
            .await;
    }

    /// As [`Env::nrt`], with `memory` allocatable and available in every zone.
    pub async fn nrt_with_memory(
        &self,
        node: &str,
        policy: &str,
        zones: &[(u32, u32)],
        memory: &str,
        fingerprint: Option<&str>,
    ) {
        let obj = nrt_object(node, policy, zones, memory, fingerprint);
        // The object is one the scheduler's NRT type reads.
        let _: NodeResourceTopology = serde_json::from_value(obj.clone()).expect("nrt");
        self.scope.apply_nrt(&obj).await.expect("NRT written");
    }

    /// A Guaranteed pod of `cpu` whole CPUs for this env's scheduler and nodes.
    pub async fn pod(&self, cpu: u32) -> String {
        self.pod_with_memory(cpu, "1Gi").await
    }

    /// A Guaranteed pod of `cpu` whole CPUs and `memory`. kwok runs it once bound (these
    /// tests have no kubelet model; the reserve cache counts Running pods).
    pub async fn pod_with_memory(&self, cpu: u32, memory: &str) -> String {
        self.scope
            .create_guaranteed_pod(GROUP, &self.scheduler, cpu, memory)
            .await
            .expect("pod created")
    }

    pub async fn wait_bound(&self, pod: &str) -> String {
        self.scope.wait_bound(pod, TIMEOUT).await.expect("bound")
    }

    pub async fn node_of(&self, pod: &str) -> Option<String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        api.get(pod).await.ok()?.spec?.node_name
    }

    /// Messages of the events about `pod` with `reason`.
    pub async fn events(&self, pod: &str, reason: &str) -> Vec<String> {
        tas_testcluster::events_about(&self.client, &self.ns, pod, reason)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| e.note)
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_numa_node_places_on_the_node_with_a_zone_that_fits() {
    let mut env = env("snn").await;
    let a = env.node(16).await;
    let b = env.node(16).await;
    env.nrt(&a, "single-numa-node", &[(8, 4), (8, 4)], None)
        .await;
    env.nrt(&b, "single-numa-node", &[(8, 2), (8, 6)], None)
        .await;
    env.start_scheduler(json!({}));
    let pod = env.pod(6).await;
    assert_eq!(
        env.wait_bound(&pod).await,
        b,
        "only b has a zone with 6 free CPUs"
    );
    env.wait_event(&pod, "Scheduled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_places_across_two_zones_when_no_zone_is_big_enough() {
    let mut env = env("restricted").await;
    let n = env.node(16).await;
    // Zones of 4 CPUs and 1Gi: 6 CPUs and 1.5Gi can never fit one zone, so {0,1} is the
    // minimum width of both and the kubelet's merged hint is preferred.
    env.nrt_with_memory(&n, "restricted", &[(4, 4), (4, 4)], "1Gi", None)
        .await;
    env.start_scheduler(json!({}));
    let pod = env.pod_with_memory(6, "1536Mi").await;
    assert_eq!(env.wait_bound(&pod).await, n);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_fits_nowhere_stays_pending_with_an_explanation() {
    let mut env = env("nofit").await;
    let n = env.node(16).await;
    env.nrt(&n, "single-numa-node", &[(8, 6), (8, 6)], None)
        .await;
    env.start_scheduler(json!({}));
    let pod = env.pod(8).await;
    let msg = env.failed_scheduling(&pod).await;
    assert!(msg.contains("nodes are available"), "{msg}");
    assert!(msg.contains("NUMA"), "names the NUMA reason: {msg}");
    assert!(
        msg.contains(&format!("(cpu: need 8, largest free zone 6) ({n})")),
        "names the node with the NUMA reason: {msg}"
    );
    assert!(
        msg.contains("didn't match Pod's node affinity/selector"),
        "{msg}"
    );
    assert_eq!(env.node_of(&pod).await, None);
    let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let pod = api.get(&pod).await.unwrap();
    assert!(
        tas_testcluster::is_marked_unschedulable(&pod),
        "{:?}",
        pod.status.and_then(|s| s.conditions)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_never_overcommits_a_zone_and_a_matching_fingerprint_flushes_the_cache() {
    let mut env = env("burst").await;
    let mut nodes = Vec::new();
    for _ in 0..5 {
        let n = env.node(16).await;
        env.nrt(&n, "single-numa-node", &[(4, 4), (4, 4)], None)
            .await;
        nodes.push(n);
    }
    env.start_scheduler(json!({"cache": {"resyncPeriod": "1s", "maxStaleness": "10m"}}));
    let mut pods = Vec::new();
    for _ in 0..50 {
        pods.push(env.pod(2).await);
    }
    // Nothing updates the NRTs: the reserve cache alone must keep every zone honest.
    // 5 nodes × 2 zones × 4 CPUs hold at most 20 two-CPU pods; pessimistic reservation
    // (every zone of the node) admits 2 per node until the NRT catches up.
    let bound = wait_for("the burst settles", TIMEOUT, || async {
        let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
        let list = api.list(&ListParams::default()).await?;
        let bound: Vec<(String, String)> = list
            .items
            .iter()
            .filter_map(|p| Some((p.name_any(), p.spec.as_ref()?.node_name.clone()?)))
            .collect();
        let failed = list
            .items
            .iter()
            .filter(|p| tas_testcluster::is_marked_unschedulable(p))
            .count();
        Ok::<_, kube::Error>((bound.len() + failed == 50).then_some(bound))
    })
    .await
    .unwrap();
    for n in &nodes {
        let on = bound.iter().filter(|(_, node)| node == n).count();
        assert!(
            on <= 4,
            "node {n} got {on} two-CPU pods for 8 CPUs in two 4-CPU zones"
        );
    }
    println!(
        "burst: {} of 50 pods bound on 5 nodes (pessimistic until the NRT catches up)",
        bound.len()
    );
    assert!(!bound.is_empty());

    // The node agent catches up: the NRT of the first node now lists its pods in the
    // fingerprint and the real availability. The cache flushes and more pods fit there.
    let n0 = &nodes[0];
    let on_n0: Vec<&str> = bound
        .iter()
        .filter(|(_, n)| n == n0)
        .map(|(p, _)| p.as_str())
        .collect();
    let fp = tas_api::fingerprint::compute(on_n0.iter().map(|p| (env.ns.as_str(), *p)));
    let used = 2 * on_n0.len() as u32;
    let zone0_used = used.min(4);
    env.nrt(
        n0,
        "single-numa-node",
        &[(4, 4 - zone0_used), (4, 4 - (used - zone0_used))],
        Some(&fp),
    )
    .await;
    if used < 8 {
        wait_for(
            "a pending pod lands on the flushed node",
            TIMEOUT,
            || async {
                let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
                let list = api.list(&ListParams::default()).await?;
                let count = list
                    .items
                    .iter()
                    .filter(|p| {
                        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(n0.as_str())
                    })
                    .count();
                Ok::<_, kube::Error>((count > on_n0.len()).then_some(()))
            },
        )
        .await
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_pod_with_exclusive_cpus_marks_its_node() {
    let mut env = env("foreign").await;
    let n = env.node(16).await;
    env.nrt(&n, "single-numa-node", &[(4, 4), (4, 4)], None)
        .await;
    env.start_scheduler(json!({"cache": {"resyncPeriod": "1s", "maxStaleness": "10m", "foreignPods": "OnlyExclusiveResources"}}));
    // Wait until the scheduler is up by scheduling a probe pod... then release it.
    // A pod bound directly (another scheduler) takes 4 exclusive CPUs somewhere on n.
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": "foreign"},
        "spec": {"nodeName": n, "containers": [{"name": "app", "image": "app", "resources": {
            "requests": {"cpu": "4", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "1Gi"}}}]}
    }))
    .unwrap();
    let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    api.create(&PostParams::default(), &foreign).await.unwrap();
    // The NRT has not caught up, so either zone may be the taken one: a 4-CPU pod of
    // ours must not be placed on n until it does.
    let pod = env.pod(4).await;
    let msg = env.failed_scheduling(&pod).await;
    assert!(msg.contains("NUMA"), "{msg}");
    assert_eq!(env.node_of(&pod).await, None);
    // The agent reports the foreign pod on zone 0: zone 1 is free, and our pod lands.
    let fp = tas_api::fingerprint::compute([(env.ns.as_str(), "foreign")]);
    env.nrt(&n, "single-numa-node", &[(4, 0), (4, 4)], Some(&fp))
        .await;
    assert_eq!(env.wait_bound(&pod).await, n);
}
