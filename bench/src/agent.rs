//! The node agent of every benchmark node: publishes each node's NodeResourceTopology
//! from what its kubelet — the referee ([`Kubelets`]) — holds, as the TAS updater does
//! from a real kubelet.
//!
//! A bind the runner's watch sees goes to its node's kubelet at once
//! ([`NodeAgent::on_bound`]); each admission marks the node for publishing after a
//! debounce (the updater's event mode, default 200 ms); a publisher task asks the due
//! nodes' kubelets what they hold and writes their objects with server-side apply, a
//! bounded number at a time. Every object carries the Topology Manager attributes and
//! the fingerprint of the admitted pods, so the NUMA-aware schedulers' reserve caches
//! can resync as they would in a real cluster. Without this, both would run on their
//! pessimistic reservations (or their staleness fallbacks) for the whole run.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

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
use tas_nodesim::machine::{KubeletSettings, Machine};
use tas_nodesim::referee::Referee;
use tas_nodesim::request::MEMORY;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::kubelet::{Admitted, Kubelets, NodeView};
use crate::rejections::{Published, PublishedNrt};

/// Field manager of the NRT writes.
pub const FIELD_MANAGER: &str = "tas-bench-agent";
/// NUMA distances: local and remote.
const LOCAL_DISTANCE: i64 = 10;
const REMOTE_DISTANCE: i64 = 21;
/// Writes in flight at most.
const MAX_IN_FLIGHT: usize = 32;
/// How often the publisher looks for due nodes.
const TICK: Duration = Duration::from_millis(20);
/// How long after a failed write the node's object is written again.
const RETRY: Duration = Duration::from_secs(1);

/// The NRT object of `node` (with `machine` and `settings`) as its agent would publish
/// it from `view`.
pub fn nrt(
    node: &str,
    machine: &Machine,
    settings: KubeletSettings,
    view: &NodeView,
) -> NodeResourceTopology {
    let zones = machine
        .zones
        .iter()
        .map(|zone| {
            let held = view
                .state
                .as_ref()
                .map(|state| (state, state.zones.iter().find(|z| z.id == zone.id)));
            let cpus = zone.cpus.len() as i64;
            let allocatable = zone.cpus.difference(&machine.reserved_cpus).count() as i64;
            let available = match held {
                Some((_, zone_state)) => zone_state.map_or(0, |z| z.free_cpus.len() as i64),
                None => allocatable,
            };
            let memory_free = |name: &str, total: u64| match held {
                Some((_, zone_state)) => zone_state
                    .and_then(|z| z.memory.get(name))
                    .map_or(0, |m| m.free as i64),
                None => total as i64,
            };
            let memory = zone.memory as i64;
            let q = NrtQuantity::from_value;
            let mut extra: Vec<ResourceInfo> = Vec::new();
            for (name, bytes) in &zone.hugepages {
                let total = *bytes as i64;
                extra.push(ResourceInfo {
                    name: name.clone(),
                    capacity: q(total),
                    allocatable: q(total),
                    available: q(memory_free(name, *bytes)),
                });
            }
            for (name, ids) in &zone.devices {
                let total = ids.len() as i64;
                let available = match held {
                    Some((state, _)) => state.devices.get(name).map_or(0, |devices| {
                        devices
                            .iter()
                            .filter(|d| d.free && d.numa_nodes.contains(&zone.id))
                            .count() as i64
                    }),
                    None => total,
                };
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
                        available: q(memory_free(MEMORY, zone.memory)),
                    },
                ]
                .into_iter()
                .chain(extra)
                .collect(),
            }
        })
        .collect();
    let mut fingerprint = Fingerprint::new();
    for (namespace, name) in &view.pods {
        fingerprint.add(namespace, name);
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

/// Publishes full availability for `names` (those in `only`, when given), all with
/// `machine` and `settings`, `MAX_IN_FLIGHT` at a time: the initial objects, and the
/// reset between runs (where only the nodes the last run changed need it: the others
/// already say so).
pub async fn publish_all(
    client: &Client,
    names: &[String],
    machine: &Machine,
    settings: KubeletSettings,
    only: Option<&BTreeSet<String>>,
) -> kube::Result<()> {
    let api: Api<NodeResourceTopology> = Api::all(client.clone());
    let free = NodeView::default();
    let objects: Vec<NodeResourceTopology> = names
        .iter()
        .filter(|n| only.is_none_or(|only| only.contains(*n)))
        .map(|n| nrt(n, machine, settings, &free))
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
    /// NRT writes that failed (or whose node's kubelet could not say what it holds).
    pub errors: usize,
}

/// The nodes of one run: names, hardware and kubelet settings.
#[derive(Debug, Clone, Copy)]
pub struct Nodes<'a> {
    /// Every node name.
    pub names: &'a [String],
    /// The hardware of each.
    pub machine: &'a Machine,
    /// The kubelet settings of each.
    pub settings: KubeletSettings,
}

/// The running node agents of one run.
pub struct NodeAgent {
    kubelets: Arc<Kubelets>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<PublishStats>,
    published: Arc<Mutex<Published>>,
}

impl NodeAgent {
    /// Starts the kubelets of `nodes` (in `referee`, under the names `<run>-<node>`)
    /// and publishing their changes, each node `debounce` after its first unpublished
    /// admission.
    pub fn start(
        client: &Client,
        referee: Arc<Referee>,
        run: &str,
        nodes: Nodes<'_>,
        debounce: Duration,
    ) -> Self {
        let (admitted, admissions) = mpsc::unbounded_channel();
        let kubelets = Arc::new(Kubelets::new(
            referee,
            run,
            nodes.names,
            nodes.machine,
            nodes.settings,
            Some(admitted),
        ));
        let (stop, stopped) = watch::channel(false);
        let published = Arc::new(Mutex::new(Published::new()));
        let publisher = Publisher {
            api: Api::all(client.clone()),
            kubelets: kubelets.clone(),
            machine: Arc::new(nodes.machine.clone()),
            settings: nodes.settings,
            debounce,
            published: published.clone(),
        };
        let task = tokio::spawn(publisher.run(admissions, stopped));
        Self {
            kubelets,
            stop,
            task,
            published,
        }
    }

    /// The nodes' kubelets.
    pub fn kubelets(&self) -> &Kubelets {
        &self.kubelets
    }

    /// Hands `pod`, just seen bound to `node`, to the node's kubelet; never waits.
    pub fn on_bound(&self, node: &str, pod: &Pod) {
        self.kubelets.submit(node, pod);
    }

    /// Stops publishing and waits for the writes in flight; returns the kubelets (for
    /// their verdicts, [`Kubelets::finish`]), what was published and every object
    /// written, per node (for the report of a rejection).
    pub async fn stop(self) -> (Arc<Kubelets>, PublishStats, Published) {
        let _ = self.stop.send(true);
        let stats = self.task.await.unwrap_or_default();
        let published = std::mem::take(&mut *lock(&self.published));
        (self.kubelets, stats, published)
    }
}

/// The publisher task's parts.
struct Publisher {
    api: Api<NodeResourceTopology>,
    kubelets: Arc<Kubelets>,
    machine: Arc<Machine>,
    settings: KubeletSettings,
    debounce: Duration,
    published: Arc<Mutex<Published>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Publisher {
    async fn run(
        self,
        mut admissions: mpsc::UnboundedReceiver<Admitted>,
        mut stopped: watch::Receiver<bool>,
    ) -> PublishStats {
        let mut stats = PublishStats::default();
        let mut due: HashMap<String, Instant> = HashMap::new();
        // One write per node at a time, as one updater per node writes: two writes of
        // one node in flight may land out of order, leaving the older object last, and
        // the node's object behind its kubelet until the node changes again (a filled
        // node never does).
        let mut writing: HashSet<String> = HashSet::new();
        let mut writes = JoinSet::new();
        // A failed write is tried again after `RETRY`, as the updater writes again on
        // its next pass, for the same reason.
        let count = |stats: &mut PublishStats,
                     due: &mut HashMap<String, Instant>,
                     writing: &mut HashSet<String>,
                     done: Result<(String, bool), _>| match done {
            Ok((node, true)) => {
                stats.writes += 1;
                writing.remove(&node);
            }
            Ok((node, false)) => {
                stats.errors += 1;
                writing.remove(&node);
                due.entry(node).or_insert(Instant::now() + RETRY);
            }
            Err(_) => stats.errors += 1,
        };
        loop {
            tokio::select! {
                () = tokio::time::sleep(TICK) => {}
                _ = stopped.changed() => break,
            }
            while let Some(done) = writes.try_join_next() {
                count(&mut stats, &mut due, &mut writing, done);
            }
            while let Ok((node, at)) = admissions.try_recv() {
                due.entry(node).or_insert(at + self.debounce);
            }
            let now = Instant::now();
            let room = MAX_IN_FLIGHT.saturating_sub(writes.len());
            let ready: Vec<String> = due
                .iter()
                .filter(|(node, at)| **at <= now && !writing.contains(*node))
                .map(|(node, _)| node.clone())
                .take(room)
                .collect();
            for node in ready {
                due.remove(&node);
                writing.insert(node.clone());
                let api = self.api.clone();
                let kubelets = self.kubelets.clone();
                let machine = self.machine.clone();
                let settings = self.settings;
                let published = self.published.clone();
                writes.spawn(async move {
                    match kubelets.view(&node).await {
                        Ok(view) => {
                            let object = nrt(&node, &machine, settings, &view);
                            let written = apply(&api, &object).await.is_ok();
                            if written {
                                let entry = PublishedNrt::of(&object, SystemTime::now());
                                lock(&published)
                                    .entry(node.clone())
                                    .or_default()
                                    .push(entry);
                            }
                            (node, written)
                        }
                        Err(error) => {
                            tracing::warn!(%node, %error, "bench agent: no view of the node");
                            (node, false)
                        }
                    }
                });
            }
        }
        let mut ignored = HashMap::new();
        while let Some(done) = writes.join_next().await {
            count(&mut stats, &mut ignored, &mut writing, done);
        }
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ClusterShape, guaranteed_pod};

    #[tokio::test]
    async fn published_object_reflects_admitted_pods() {
        let referee = Arc::new(Referee::start().unwrap_or_else(|e| panic!("{e}")));
        let shape = ClusterShape {
            nodes: 1,
            zones: 2,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods: 110,
            devices_per_zone: 1,
            hugepages_gib_per_zone: 1,
        };
        let names = shape.node_names();
        let machine = shape.machine();
        let kubelets = Kubelets::new(
            referee,
            "r",
            &names,
            &machine,
            ClusterShape::kubelet(),
            None,
        );
        let node = &names[0];
        let free = kubelets.view(node).await.unwrap();
        let before = nrt(node, &machine, ClusterShape::kubelet(), &free);
        let mut pod = guaranteed_pod("p", "s", "r", "3", "2Gi");
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.uid = Some("uid-p".into());
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(node.clone());
        }
        kubelets.submit(node, &pod);

        let view = kubelets.view(node).await.unwrap();
        let object = nrt(node, &machine, ClusterShape::kubelet(), &view);
        let zone0 = &object.zones[0];
        assert_eq!(zone0.name, "node-0");
        let cpu = zone0.resource("cpu").unwrap();
        assert_eq!((cpu.capacity.as_str(), cpu.available.as_str()), ("4", "1"));
        let memory = zone0.resource("memory").unwrap();
        assert_eq!(memory.available.value().unwrap(), 6 << 30);
        // What the pod did not take reads as the object before it: the referee's view of
        // a fresh node is the machine's.
        assert_eq!(object.zones[1], before.zones[1]);
        assert_eq!(
            zone0.resource(crate::workload::HUGEPAGES),
            before.zones[0].resource(crate::workload::HUGEPAGES)
        );
        assert_eq!(
            zone0.resource(crate::workload::DEVICE),
            before.zones[0].resource(crate::workload::DEVICE)
        );
        assert_eq!(object.zones[1].cost_to(0), Some(REMOTE_DISTANCE));
        assert_eq!(
            object.attribute(TOPOLOGY_MANAGER_POLICY),
            Some("single-numa-node")
        );
        assert_eq!(object.attribute(TOPOLOGY_MANAGER_SCOPE), Some("container"));
        let expected = tas_api::fingerprint::compute([("ns", "p")]);
        assert_eq!(object.pods_fingerprint(), Some(expected.as_str()));
        assert_eq!(
            before.pods_fingerprint(),
            Some(Fingerprint::new().sum().as_str())
        );
        kubelets.finish().await.unwrap();
    }
}
