//! The node agent of every benchmark node: publishes each node's NodeResourceTopology
//! from its kubelet model ([`Kubelets`]), as the TAS updater does from a real kubelet.
//!
//! A bind the runner's watch sees is admitted into the node's model at once
//! ([`NodeAgent::on_bound`]) and marks the node for publishing after a debounce (the
//! updater's event mode, default 200 ms); a publisher task writes due nodes with
//! server-side apply, a bounded number at a time. Every object carries the
//! Topology Manager attributes and the fingerprint of the admitted pods, so the
//! NUMA-aware schedulers' reserve caches can resync as they would in a real cluster.
//! Without this, both would run on their pessimistic reservations (or their staleness
//! fallbacks) for the whole run.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tas_api::fingerprint::{Fingerprint, Method};
use tas_api::nrt::attributes::{
    NODE_TOPOLOGY_PODS_FINGERPRINT, NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD, TOPOLOGY_MANAGER_POLICY,
    TOPOLOGY_MANAGER_SCOPE,
};
use tas_api::nrt::v1alpha2::{AttributeInfo, CostInfo, NodeResourceTopology, ResourceInfo, Zone};
use tas_api::nrt::zone::ZONE_TYPE_NODE;
use tas_api::nrt::{NrtQuantity, zone_name};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::kubelet::Kubelets;
use tas_nodesim::request::{MEMORY, PodRequest};
use tas_nodesim::{Admission, NodeState};

/// Field manager of the NRT writes.
pub const FIELD_MANAGER: &str = "tas-bench-agent";
/// NUMA distances: local and remote.
const LOCAL_DISTANCE: i64 = 10;
const REMOTE_DISTANCE: i64 = 21;
/// Writes in flight at most.
const MAX_IN_FLIGHT: usize = 32;
/// How often the publisher looks for due nodes.
const TICK: Duration = Duration::from_millis(20);

/// The NRT object of `node` as its agent would publish it from `state`.
pub fn nrt(node: &str, state: &NodeState) -> NodeResourceTopology {
    let machine = state.machine();
    let settings = state.settings();
    let free_cpus = state.cpu().free();
    let zones = machine
        .zones
        .iter()
        .map(|zone| {
            let cpus = zone.cpus.len() as i64;
            let allocatable = zone.cpus.difference(&machine.reserved_cpus).count() as i64;
            let available = zone.cpus.intersection(free_cpus).count() as i64;
            let memory = zone.memory as i64;
            let memory_free = state.memory().free(zone.id, MEMORY) as i64;
            let q = NrtQuantity::from_value;
            let mut extra: Vec<ResourceInfo> = Vec::new();
            for (name, bytes) in &zone.hugepages {
                let total = *bytes as i64;
                extra.push(ResourceInfo {
                    name: name.clone(),
                    capacity: q(total),
                    allocatable: q(total),
                    available: q(state.memory().free(zone.id, name) as i64),
                });
            }
            for (name, ids) in &zone.devices {
                let free = state.devices().free(name);
                let total = ids.len() as i64;
                let available = ids.iter().filter(|id| free.contains(*id)).count() as i64;
                extra.push(ResourceInfo {
                    name: name.clone(),
                    capacity: q(total),
                    allocatable: q(total),
                    available: q(available),
                });
            }
            Zone {
                name: zone_name(zone.id),
                type_: ZONE_TYPE_NODE.to_string(),
                parent: None,
                costs: machine
                    .zones
                    .iter()
                    .map(|other| CostInfo {
                        name: zone_name(other.id),
                        value: if other.id == zone.id {
                            LOCAL_DISTANCE
                        } else {
                            REMOTE_DISTANCE
                        },
                    })
                    .collect(),
                attributes: Vec::new(),
                resources: vec![
                    ResourceInfo {
                        name: "cpu".into(),
                        capacity: q(cpus),
                        allocatable: q(allocatable),
                        available: q(available),
                    },
                    ResourceInfo {
                        name: MEMORY.into(),
                        capacity: q(memory),
                        allocatable: q(memory),
                        available: q(memory_free),
                    },
                ]
                .into_iter()
                .chain(extra)
                .collect(),
            }
        })
        .collect();
    let mut fingerprint = Fingerprint::new();
    for pod in state.admitted() {
        fingerprint.add(&pod.key.namespace, &pod.key.name);
    }
    let mut object = NodeResourceTopology::new(node);
    object.attributes = vec![
        AttributeInfo::new(
            TOPOLOGY_MANAGER_POLICY,
            settings.topology_manager_policy.as_str(),
        ),
        AttributeInfo::new(
            TOPOLOGY_MANAGER_SCOPE,
            settings.topology_manager_scope.as_str(),
        ),
        AttributeInfo::new(NODE_TOPOLOGY_PODS_FINGERPRINT, fingerprint.sum()),
        AttributeInfo::new(
            NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD,
            Method::All.as_attribute(),
        ),
    ];
    object.zones = zones;
    object
}

/// Writes `object` (create or update).
async fn apply(api: &Api<NodeResourceTopology>, object: &NodeResourceTopology) -> kube::Result<()> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(object))
        .await
        .map(drop)
}

/// Publishes the nodes of `kubelets` now (those in `only`, when given), `MAX_IN_FLIGHT`
/// at a time: the initial objects, and the reset to full availability between runs
/// (where only the nodes the last run changed need it: the others already say so).
pub async fn publish_all(
    client: &Client,
    kubelets: &Kubelets,
    only: Option<&BTreeSet<String>>,
) -> kube::Result<()> {
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let objects: Vec<NodeResourceTopology> = kubelets
        .names()
        .filter(|n| only.is_none_or(|only| only.contains(*n)))
        .filter_map(|n| kubelets.node(n).map(|state| nrt(n, state)))
        .collect();
    let mut writes = JoinSet::new();
    for object in objects {
        if writes.len() >= MAX_IN_FLIGHT
            && let Some(done) = writes.join_next().await
        {
            done.unwrap_or(Ok(()))?;
        }
        let api = api.clone();
        writes.spawn(async move { apply(&api, &object).await });
    }
    while let Some(done) = writes.join_next().await {
        done.unwrap_or(Ok(()))?;
    }
    Ok(())
}

/// What the publisher did during a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishStats {
    /// NRT writes that succeeded.
    pub writes: usize,
    /// NRT writes that failed.
    pub errors: usize,
}

/// The running node agents of one run.
pub struct NodeAgent {
    kubelets: Arc<Mutex<Kubelets>>,
    due: Arc<Mutex<HashMap<String, Instant>>>,
    debounce: Duration,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<PublishStats>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl NodeAgent {
    /// Starts publishing changes of `kubelets`, each node `debounce` after its first
    /// unpublished change.
    pub fn start(client: &Client, kubelets: Kubelets, debounce: Duration) -> Self {
        let kubelets = Arc::new(Mutex::new(kubelets));
        let due = Arc::new(Mutex::new(HashMap::new()));
        let (stop, stopped) = watch::channel(false);
        let api: Api<NodeResourceTopology> = Api::all(client.clone());
        let task = tokio::spawn(publish_loop(api, kubelets.clone(), due.clone(), stopped));
        Self {
            kubelets,
            due,
            debounce,
            stop,
            task,
        }
    }

    /// Admits `pod`, just seen bound to `node`, and schedules the node's publish. `None`
    /// when the pod cannot be read or the node is unknown.
    pub fn on_bound(&self, node: &str, pod: &Pod) -> Option<Admission> {
        let request = PodRequest::from_pod(pod).ok()?;
        let admission = lock(&self.kubelets).admit(node, &request)?;
        if admission == Admission::Admitted {
            let at = Instant::now() + self.debounce;
            lock(&self.due).entry(node.to_string()).or_insert(at);
        }
        Some(admission)
    }

    /// Stops publishing, waits for the writes in flight, and returns the models and
    /// what was published.
    pub async fn stop(self) -> (Kubelets, PublishStats) {
        let _ = self.stop.send(true);
        let stats = self.task.await.unwrap_or_default();
        let kubelets = lock(&self.kubelets).clone();
        (kubelets, stats)
    }
}

async fn publish_loop(
    api: Api<NodeResourceTopology>,
    kubelets: Arc<Mutex<Kubelets>>,
    due: Arc<Mutex<HashMap<String, Instant>>>,
    mut stopped: watch::Receiver<bool>,
) -> PublishStats {
    let mut stats = PublishStats::default();
    let mut writes = JoinSet::new();
    let count = |stats: &mut PublishStats, done: Result<kube::Result<()>, _>| match done {
        Ok(Ok(())) => stats.writes += 1,
        _ => stats.errors += 1,
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            _ = stopped.changed() => break,
        }
        while let Some(done) = writes.try_join_next() {
            count(&mut stats, done);
        }
        let now = Instant::now();
        let room = MAX_IN_FLIGHT.saturating_sub(writes.len());
        let ready: Vec<String> = {
            let mut due = lock(&due);
            let ready: Vec<String> = due
                .iter()
                .filter(|(_, at)| **at <= now)
                .map(|(node, _)| node.clone())
                .take(room)
                .collect();
            for node in &ready {
                due.remove(node);
            }
            ready
        };
        let objects: Vec<NodeResourceTopology> = {
            let kubelets = lock(&kubelets);
            ready
                .iter()
                .filter_map(|n| kubelets.node(n).map(|state| nrt(n, state)))
                .collect()
        };
        for object in objects {
            let api = api.clone();
            writes.spawn(async move { apply(&api, &object).await });
        }
    }
    while let Some(done) = writes.join_next().await {
        count(&mut stats, done);
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ClusterShape, guaranteed_pod};

    #[test]
    fn published_object_reflects_admitted_pods() {
        let shape = ClusterShape {
            nodes: 1,
            zones: 2,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        };
        let names = shape.node_names();
        let mut kubelets = Kubelets::new(&names, &shape.machine(), ClusterShape::kubelet());
        let mut pod = guaranteed_pod("p", "s", "r", "3", "2Gi");
        pod.metadata.namespace = Some("ns".into());
        let request = PodRequest::from_pod(&pod).unwrap();
        assert_eq!(
            kubelets.admit(&names[0], &request),
            Some(Admission::Admitted)
        );

        let object = nrt(&names[0], kubelets.node(&names[0]).unwrap());
        let zone0 = &object.zones[0];
        assert_eq!(zone0.name, "node-0");
        let cpu = zone0.resource("cpu").unwrap();
        assert_eq!((cpu.capacity.as_str(), cpu.available.as_str()), ("4", "1"));
        let memory = zone0.resource("memory").unwrap();
        assert_eq!(memory.available.value().unwrap(), 6 << 30);
        assert_eq!(
            object.zones[1].resource("cpu").unwrap().available.as_str(),
            "4"
        );
        assert_eq!(object.zones[1].cost_to(0), Some(REMOTE_DISTANCE));
        assert_eq!(
            object.attribute(TOPOLOGY_MANAGER_POLICY),
            Some("single-numa-node")
        );
        assert_eq!(object.attribute(TOPOLOGY_MANAGER_SCOPE), Some("container"));
        let expected = tas_api::fingerprint::compute([("ns", "p")]);
        assert_eq!(object.pods_fingerprint(), Some(expected.as_str()));
    }
}
