//! What the watches, the scheduling loop and the bind tasks share.

use crate::affinity::NamespaceLabels;
use crate::cache::TopologyCache;
use crate::config::Settings;
use crate::decisions::DecisionLog;
use crate::dra::SelectorCache;
use crate::dra_state::DraStore;
use crate::events::EventSender;
use crate::filter::volume_catalog::VolumeCatalog;
use crate::metrics::Metrics;
use crate::preempt::{Budgets, Nominations};
use crate::queue::SchedulingQueue;
use crate::state::ClusterState;
use crate::telemetry::Telemetry;
use k8s_openapi::api::core::v1::Pod;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokio::sync::Notify;

/// Which initial lists have completed (readiness waits for all).
#[derive(Default)]
pub struct Synced {
    /// Nodes listed.
    pub nodes: AtomicBool,
    /// Bound pods listed.
    pub bound_pods: AtomicBool,
    /// Pending pods listed.
    pub pending_pods: AtomicBool,
    /// NRT objects listed.
    pub topologies: AtomicBool,
    /// Namespaces listed.
    pub namespaces: AtomicBool,
    /// PodDisruptionBudgets listed.
    pub budgets: AtomicBool,
    /// PersistentVolumeClaims listed.
    pub claims: AtomicBool,
    /// PersistentVolumes listed.
    pub volumes: AtomicBool,
    /// StorageClasses listed.
    pub storage_classes: AtomicBool,
    /// ResourceSlices listed (or not served).
    pub resource_slices: AtomicBool,
    /// DeviceClasses listed (or not served).
    pub device_classes: AtomicBool,
    /// ResourceClaims listed (or not served).
    pub resource_claims: AtomicBool,
}

impl Synced {
    /// Every watch has delivered its initial list.
    pub fn all(&self) -> bool {
        [
            &self.nodes,
            &self.bound_pods,
            &self.pending_pods,
            &self.topologies,
            &self.namespaces,
            &self.budgets,
            &self.claims,
            &self.volumes,
            &self.storage_classes,
            &self.resource_slices,
            &self.device_classes,
            &self.resource_claims,
        ]
        .iter()
        .all(|b| b.load(Ordering::Acquire))
    }
}

/// Shared scheduler state. Locks are held briefly and never across an `.await`. They are
/// `parking_lot` locks, which do not poison: a panic while one is held leaves the state
/// as the panicking code left it, and every later update still applies (a poisoned std
/// lock would make each `if let Ok(..)` site skip its update silently).
pub struct Shared {
    /// Validated settings.
    pub settings: Settings,
    /// Nodes and bound pods.
    pub state: RwLock<ClusterState>,
    /// Per-node topology views with reservations.
    pub cache: TopologyCache,
    /// Pods to schedule.
    pub queue: Mutex<SchedulingQueue>,
    /// The latest object of each pending pod of ours, by uid.
    pub pending: RwLock<HashMap<String, Arc<Pod>>>,
    /// Pods assumed on a node whose binding is in flight or not yet observed.
    pub in_flight: Mutex<HashSet<String>>,
    /// Every namespace's labels (inter-pod affinity namespace selectors).
    pub namespaces: RwLock<NamespaceLabels>,
    /// PodDisruptionBudgets (preemption prefers plans that violate none).
    pub budgets: RwLock<Budgets>,
    /// Pods nominated to a node after preemption. Never locked while `state` is held.
    pub nominations: Mutex<Nominations>,
    /// When the cache last took each node's view from an NRT object (accepted at once
    /// on a clean node, or by a resync): preemption waits for it.
    pub nrt_updated: Mutex<HashMap<String, Instant>>,
    /// Wakes the scheduling loop.
    pub wake: Notify,
    /// Metrics.
    pub metrics: Metrics,
    /// Initial lists done.
    pub synced: Synced,
    /// Events and pod conditions.
    pub events: EventSender,
    /// Spans and OTLP metrics (off without an endpoint).
    pub telemetry: Telemetry,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, for the volume
    /// filters.
    pub volumes: RwLock<VolumeCatalog>,
    /// ResourceSlices, DeviceClasses, ResourceClaims and the devices in use, for the
    /// allocation of pods' resource claims.
    pub dra: RwLock<DraStore>,
    /// DRA device selectors, compiled once per expression.
    pub selectors: Arc<SelectorCache>,
    /// The recent scheduling attempts, for `GET /debug/decisions`.
    pub decisions: DecisionLog,
}

impl Shared {
    /// New shared state.
    pub fn new(
        settings: Settings,
        cache: TopologyCache,
        metrics: Metrics,
        events: EventSender,
        telemetry: Telemetry,
    ) -> Arc<Self> {
        let queue = SchedulingQueue::new(settings.backoff_initial, settings.backoff_max);
        let decisions = DecisionLog::new(settings.decision_history);
        Arc::new(Self {
            settings,
            state: RwLock::new(ClusterState::default()),
            cache,
            queue: Mutex::new(queue),
            pending: RwLock::new(HashMap::new()),
            in_flight: Mutex::new(HashSet::new()),
            namespaces: RwLock::new(NamespaceLabels::new()),
            budgets: RwLock::new(Budgets::default()),
            nominations: Mutex::new(Nominations::default()),
            nrt_updated: Mutex::new(HashMap::new()),
            wake: Notify::new(),
            metrics,
            synced: Synced::default(),
            events,
            telemetry,
            volumes: RwLock::new(VolumeCatalog::default()),
            dra: RwLock::new(DraStore::default()),
            selectors: Arc::new(SelectorCache::new()),
            decisions,
        })
    }

    /// Something changed that could help unschedulable pods.
    pub fn cluster_event(&self) {
        let moved = self.queue.lock().on_cluster_event(Instant::now());
        if moved > 0 {
            self.wake.notify_one();
        }
    }

    /// `node`'s topology view changed (an NRT accepted, or deleted): wakes only the
    /// backing-off pods that pass the node-level filters on `node` (cordon, name,
    /// taints, selector and affinity, ports, resources against allocatable), which no
    /// topology change can alter. Returns how many were woken.
    pub fn topology_event(&self, node: &str) -> usize {
        let state = self.state.read();
        // A topology without its Node helps nobody until the Node arrives (an event of
        // its own).
        let Some(info) = state.node(node) else {
            return 0;
        };
        let moved = self.queue.lock().on_node_event(Instant::now(), |pod| {
            crate::filter::filter_node(pod, info).is_ok()
        });
        drop(state);
        self.metrics.topology_wakeups.inc_by(moved as u64);
        if moved > 0 {
            self.wake.notify_one();
        }
        moved
    }

    /// The cache has just taken `node`'s view from its latest NRT object.
    pub fn topology_accepted(&self, node: &str) {
        self.nrt_updated
            .lock()
            .insert(node.to_owned(), Instant::now());
    }

    /// Whether a pod is assumed and binding.
    pub fn is_in_flight(&self, uid: &str) -> bool {
        self.in_flight.lock().contains(uid)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use k8s_openapi::api::core::v1::Node;
    use serde_json::json;

    use crate::filter::PodFilterInput;
    use crate::queue::QueuedPod;
    use crate::test_support::{pod, shared};

    #[test]
    fn a_topology_event_wakes_only_pods_that_could_fit_its_node() {
        let shared = shared();
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"pool": "main"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        }))
        .expect("node");
        shared.state.write().upsert_node(&node);
        let pods = [
            pod("fits", &[], json!({})),
            pod(
                "too-big",
                &[],
                json!({"containers": [{"name": "app",
                "resources": {"requests": {"cpu": "8"}}}]}),
            ),
            pod("elsewhere", &[], json!({"nodeSelector": {"pool": "other"}})),
        ];
        // Backed off long enough for an event to move them.
        let failed = Instant::now() - Duration::from_secs(60);
        {
            let mut q = shared.queue.lock();
            for (i, p) in pods.iter().enumerate() {
                let uid = format!("uid-{}", p.metadata.name.as_deref().unwrap_or_default());
                q.add(QueuedPod {
                    uid: uid.clone(),
                    key: uid.clone(),
                    priority: 0,
                    created: i64::try_from(i).expect("small"),
                });
                let parsed = Arc::new(PodFilterInput::new(p).expect("parses"));
                q.pop(failed);
                q.unschedulable_with(&uid, failed, Some(parsed));
            }
        }
        assert_eq!(shared.topology_event("n1"), 1);
        assert_eq!(shared.topology_event("unknown-node"), 0);
        assert_eq!(shared.metrics.topology_wakeups.get(), 1);
        let woken = shared.queue.lock().pop(Instant::now());
        assert_eq!(woken.map(|p| p.uid).as_deref(), Some("uid-fits"));
    }
}
