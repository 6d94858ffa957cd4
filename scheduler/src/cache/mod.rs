//! The reserve ("overreserve") cache: per-node NUMA views that account for the pods
//! this scheduler placed before the node agent reports them.
//!
//! Data flows in from four sources and out to the filters:
//!
//! - NRT watch → [`TopologyCache::update_nrt`] / [`TopologyCache::delete_nrt`]. A clean
//!   node's view follows every update. On a dirty node the object is accepted at once
//!   when its fingerprint shows which unconfirmed pods it reflects ([`confirm`]: the
//!   confirmed pods plus a subset of the reserved and recently deleted ones, found by
//!   bind-order prefixes, then a bounded subset search), keeping the reservations of
//!   the others; otherwise it is only recorded as the latest and the node keeps its
//!   pessimistic view until a resync.
//! - Reserve / unreserve of the scheduling cycle → [`TopologyCache::reserve`]
//!   subtracts the pod's NUMA footprint ([`numa_footprint`]), whole, from each zone
//!   the kubelet could give the pod (the kubelet picks the zone, not us; see *Which
//!   zones* below) and makes the node dirty; [`TopologyCache::unreserve`] adds exactly
//!   that back to exactly those zones.
//! - Pod watch → [`TopologyCache::pod_bound`] / [`TopologyCache::pod_deleted`] keep the
//!   set of pods believed on each node (for the fingerprint). A pod we reserved moves
//!   from assumed to bound and keeps its reservation until a resync. A pod nobody
//!   reserved (another scheduler's, or ours from before a restart) is handled by the
//!   foreign-pods policy: when relevant it is reserved on observation, so the node
//!   becomes dirty *and* its footprint is accounted instead of the node being unusable.
//!   After a relist of bound pods, [`TopologyCache::retain_pods`] forgets every pod the
//!   relist did not return (and whose binding is not in flight), as if deleted.
//! - Resync timer → [`TopologyCache::resync`] compares each dirty node's latest NRT
//!   with the pods believed on it and replaces the view when they agree, or when the
//!   node has been dirty too long (bounded staleness); see [`resync`] for
//!   the exact rules and which reservations survive.
//!
//! Filters and scores read [`TopologyCache::snapshot`]: an `Arc` clone under a
//! read lock, never a deep copy. Writers mutate views copy-on-write, so a snapshot
//! stays valid and unchanged while a cycle uses it.
//!
//! A node is *dirty* while its view carries reservations: then, and only then, NRT
//! updates without fingerprint evidence are held back. Releasing its last reservation makes it clean again (and
//! accepts the latest NRT at once). Reservations on a node without an NRT object are
//! recorded and subtracted from its first one. A corrupt NRT object yields an error
//! view for that node only; the next good object replaces it at once.
//!
//! ## Which zones a reservation holds
//!
//! A reservation records its zone set, and every way out of it (unreserve, a rebuild
//! that drops or re-applies it) uses that same set. The set is
//! [`crate::numa::landing_zones`] computed against an *upper bound* `U` of what the
//! node has free, never against the view `V`: `U` is the NRT the view was built from
//! (`V` plus every reservation on its zones) plus, on every zone, the footprint of each
//! pod that may have released what that NRT still counts (departed pods; terminating,
//! finished, or able to finish on their own). The view is pessimistic, so the truth `T`
//! may have more free than `V` on a zone; zones computed against `V` would miss a zone
//! the kubelet can use, and a later pod decided on it would be refused there (the
//! property test `landing_props` shows it). `T <= U` on every zone, so the kubelet's
//! zone is always in the set. When `U` grows (a pod departs, terminates or finishes),
//! [`node::NodeEntry::widen`] grows every narrowed set, never shrinks one.
//!
//! Why a set smaller than every zone keeps decisions safe across pods: binds to one
//! node are sent one after another in decision order (`writer::bind_order`), so the
//! kubelet admits A before B when A was decided first. B decided after A sees
//! `V - A@Z_A`. If the kubelet puts B on a zone `z` in `Z_A`, B fitted `V_z - A`, so A
//! and B both fit `z` whichever of them the kubelet put there; if `z` is not in
//! `Z_A`, A cannot be on `z` and B fitted `V_z <= T_z`. Under `single-numa-node`
//! the set is cut at the lowest zone `V` holds A on (the kubelet takes the lowest zone
//! holding the pod, and `V <= T`), unless foreign pods are not reserved (`V` may then
//! miss some). Every zone is held instead
//! for policies `none` and `best-effort`, pods that are not Guaranteed, foreign pods,
//! nominated pods (`snapshot`, preemption), unreadable requests, and nodes that
//! forgot deleted pods they cannot bound yet.
//!
//! Unlike the reference, no node stays dirty forever: one dirty for `max_staleness`
//! is forced clean from its latest NRT (logged and counted), keeping only the
//! reservations that object cannot reflect yet, and those of bound pods its
//! fingerprint proves it does not count yet. The exception is an NRT whose writer
//! stopped (its `tas.dev/heartbeat` is `missed_heartbeats` periods old): it is never
//! trusted past what it saw, so the pods bound after its last write stay reserved
//! until a fresh object arrives ([`resync`], [`TopologyCache::stopped_writers`]).

mod commute;
mod config;
pub mod confirm;
mod exclude;
mod inspect;
mod metrics;
mod node;
mod pod;
pub mod resync;
mod stopped;
mod store;
mod views;

#[cfg(test)]
mod tests;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::ForeignPodsDetection;

pub use config::{CacheConfig, ConfigError};
pub use confirm::{MAX_PREFIX_TRIES, SUBSET_MAX_PODS, Search};
pub use inspect::{NodeInspection, ReservationInspection};
pub use metrics::CacheMetrics;
pub use node::{NodeView, NrtUpdate};
pub use pod::{PodPhase, PodRef, holds_exclusive_resources, numa_footprint};
pub use resync::{NodeResync, ResyncOutcome, ResyncReport};
pub use stopped::{StoppedWriter, stopped_writers_note};
pub use views::Views;

use crate::numa::{NodeTopology, NumaSet, PodRequest, Resources};
use node::{NodeEntry, Reservation};
use pod::ObservedPod;
use store::State;

/// `spec.schedulerName` when unset.
const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// What [`TopologyCache::pod_bound`] did with a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodBound {
    /// Not bound, or without UID or name: nothing recorded.
    Ignored,
    /// Already known on this node: only its phase was updated.
    Updated,
    /// One of our reservations is now bound; the reservation stays until a resync.
    Confirmed,
    /// Nobody reserved it and the foreign-pods policy finds it relevant: reserved on
    /// observation, the node is dirty.
    Foreign,
    /// Nobody reserved it and it changes nothing (finished, or not relevant under the
    /// policy): recorded for the fingerprint only.
    Recorded,
}

/// A node's cache state, for status pages and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// Whether the node has an NRT object.
    pub has_topology: bool,
    /// When the oldest reservation the view carries was made (staleness is measured
    /// from it); `None` when clean.
    pub dirty_since: Option<Instant>,
    /// Reservations carried (or recorded, without an NRT object).
    pub reservations: usize,
    /// Of which reserved on observation of a pod not placed through the cache.
    pub foreign_reservations: usize,
    /// Pods believed bound to the node.
    pub pods: usize,
}

/// The reserve cache; see the module documentation. Shared by reference (or `Arc`)
/// between the watches, the scheduling cycle, the filters and the resync timer.
#[derive(Debug)]
pub struct TopologyCache {
    config: CacheConfig,
    metrics: CacheMetrics,
    state: RwLock<State>,
}

impl TopologyCache {
    /// An empty cache.
    pub fn new(config: CacheConfig, metrics: CacheMetrics) -> Self {
        Self {
            config,
            metrics,
            state: RwLock::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// The metrics.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    /// Records an NRT object (from the initial list or the watch).
    pub fn update_nrt(&self, nrt: impl Into<Arc<NodeResourceTopology>>) -> NrtUpdate {
        self.update_nrt_at(nrt, Instant::now())
    }

    /// [`Self::update_nrt`], received at `now`.
    pub fn update_nrt_at(
        &self,
        nrt: impl Into<Arc<NodeResourceTopology>>,
        now: Instant,
    ) -> NrtUpdate {
        let nrt = nrt.into();
        let Some(node) = nrt.metadata.name.clone().filter(|n| !n.is_empty()) else {
            tracing::warn!("NodeResourceTopology without a name ignored");
            return NrtUpdate::Ignored;
        };
        let mut state = self.write();
        let (update, dropped) = state.edit(&node, &self.metrics, |entry| {
            let update = entry.set_nrt(nrt, now);
            if update != NrtUpdate::Held {
                return (update, Vec::new());
            }
            // Held on a dirty node: accept it at once if its fingerprint shows which
            // unconfirmed pods it reflects; the resync timer stays the fallback.
            match confirm::judge(&node, entry, &self.config) {
                confirm::Verdict::Match(evidence) => {
                    self.metrics.evidence(Some(evidence.search));
                    (NrtUpdate::Confirmed, evidence.apply(entry))
                }
                confirm::Verdict::Mismatch => {
                    self.metrics.evidence(None);
                    (update, Vec::new())
                }
                confirm::Verdict::Unusable => (update, Vec::new()),
            }
        });
        for uid in &dropped {
            state.forget_if_gone(&node, uid);
        }
        tracing::trace!(node, ?update, "NodeResourceTopology observed");
        update
    }

    /// Forgets a node's NRT object: the node has no NUMA view until a new one arrives.
    /// Returns whether there was one.
    pub fn delete_nrt(&self, node: &str) -> bool {
        let mut state = self.write();
        if !state.nodes.contains_key(node) {
            return false;
        }
        state.edit(node, &self.metrics, |entry| {
            let had = entry.latest().is_some();
            entry.remove_nrt();
            had
        })
    }

    /// The node's view for a filter or score; `None` when it has no NRT object.
    pub fn snapshot(&self, node: &str) -> Option<NodeView> {
        self.read().nodes.get(node)?.view()
    }

    /// The node's view as [`Self::snapshot`] gives it, unless the latest NRT object
    /// is owned by a Node object other than `node_uid` (the node was deleted and
    /// created again under its name, and the garbage collector has not deleted the
    /// earlier node's NRT yet): then `None`, as for a node that has not published.
    pub fn snapshot_for(&self, node: &str, node_uid: &str) -> Option<NodeView> {
        self.views().view_for(node, node_uid)
    }

    /// The node's cache state; `None` when the cache knows nothing about it.
    pub fn status(&self, node: &str) -> Option<NodeStatus> {
        let state = self.read();
        let entry = state.nodes.get(node)?;
        Some(NodeStatus {
            has_topology: entry.latest().is_some(),
            dirty_since: entry.dirty_since(),
            reservations: entry.reservations().count(),
            foreign_reservations: entry.reservations().filter(|(_, r)| r.foreign).count(),
            pods: entry.pods.len(),
        })
    }

    /// Names of the dirty nodes.
    pub fn dirty_nodes(&self) -> Vec<String> {
        let state = self.read();
        state
            .nodes
            .iter()
            .filter(|(_, e)| e.is_dirty())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Reserves `pod`'s NUMA footprint on the zones of `node` the kubelet could give it
    /// (every zone unless the node's policy narrows them; see the module documentation)
    /// and makes it dirty.
    /// Reserving a pod again replaces its earlier reservation, wherever it was.
    pub fn reserve(&self, node: &str, pod: &PodRef, request: &PodRequest, now: Instant) {
        let mut state = self.write();
        if let Some(other) = state.pod_nodes.get(&pod.uid).filter(|n| *n != node) {
            let other = other.clone();
            state.detach(&other, &pod.uid, &self.metrics, None);
        }
        let mut reservation = Reservation {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            amounts: numa_footprint(request),
            zones: None,
            request: Some(Arc::new(request.clone())),
            foreign: false,
            init_holdings: Vec::new(),
            reserved_at: now,
        };
        state.edit(node, &self.metrics, |entry| {
            self.check_identity(node, entry, &pod.namespace, &pod.name, now);
            let trusted = self.config.foreign_pods != ForeignPodsDetection::None;
            reservation.zones = entry.landing(request, trusted);
            reservation.init_holdings = entry.predict_init_holdings(request, None);
            entry.reserve(&pod.uid, reservation);
        });
        state.pod_nodes.insert(pod.uid.clone(), node.to_owned());
    }

    /// What the view of `node` holds back for pod `uid` (reserved when placed, or on
    /// observation), if the node's view carries such a reservation: releasing it (the
    /// pod is deleted) adds exactly that back to each zone it was held on (every zone,
    /// or [`Self::reserved_zones`]).
    pub fn reserved_amounts(&self, node: &str, uid: &str) -> Option<Resources> {
        let state = self.read();
        let r = state.nodes.get(node)?.reservation(uid)?;
        Some(r.amounts.clone())
    }

    /// The zones the reservation of pod `uid` on `node` holds it back on, when it is
    /// narrowed to some of them; `None` when every zone (or no such reservation).
    pub fn reserved_zones(&self, node: &str, uid: &str) -> Option<NumaSet> {
        let state = self.read();
        state.nodes.get(node)?.reservation(uid)?.zones
    }

    /// The view of `node` (at most what is free) and an upper bound of what is free
    /// ([`node::NodeEntry::settled_upper_bound`]): the kubelet's free amounts lie
    /// between the two. When the NUMA fit of a pod gives the same zones on both, the
    /// kubelet gives it those zones whatever the pods in flight took (what the DRA
    /// alignment needs, [`crate::cycle::dra::settled`]). `None` without a usable view.
    pub fn zone_bounds(&self, node: &str) -> Option<(Arc<NodeTopology>, NodeTopology)> {
        let state = self.read();
        let entry = state.nodes.get(node)?;
        let Some(Ok(view)) = entry.view() else {
            return None;
        };
        Some((view, entry.settled_upper_bound()?))
    }

    /// Adds back exactly what [`Self::reserve`] subtracted for pod `uid` on `node`.
    /// Returns whether there was such a reservation.
    pub fn unreserve(&self, node: &str, uid: &str) -> bool {
        let mut state = self.write();
        if !state.nodes.contains_key(node) {
            return false;
        }
        let released = state.edit(node, &self.metrics, |entry| entry.unreserve(uid).is_some());
        state.forget_if_gone(node, uid);
        released
    }

    /// Records a pod seen with `spec.nodeName` set (every add and update event of such
    /// a pod; only the first one per node does more than update the phase).
    pub fn pod_bound(&self, pod: &Pod, now: Instant) -> PodBound {
        let spec = pod.spec.as_ref();
        let Some(node) = spec
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
        else {
            return PodBound::Ignored;
        };
        let Some(id) = PodRef::from_pod(pod) else {
            return PodBound::Ignored;
        };
        let phase = PodPhase::of(pod);
        let releasing = pod::releasing(pod);
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let refused = pod::kubelet_refused(pod);
        let mut state = self.write();
        match state.pod_nodes.get(&id.uid) {
            Some(known) if known == node => {
                let observed = state
                    .nodes
                    .get(node)
                    .is_some_and(|e| e.pods.contains_key(&id.uid));
                if observed {
                    state.edit(node, &self.metrics, |e| {
                        let was_failed =
                            e.pods.get(&id.uid).map(|p| p.phase) == Some(PodPhase::Failed);
                        if refused && !was_failed {
                            e.note_refusal(PodRequest::from_pod(pod).ok().as_ref());
                        }
                        e.observe_pod(&id.uid, phase, releasing, terminating)
                    });
                    return PodBound::Updated;
                }
            }
            // Pods never move: a record on another node is a leftover.
            Some(other) => {
                let other = other.clone();
                state.detach(&other, &id.uid, &self.metrics, None);
            }
            None => {}
        }

        let request = PodRequest::from_pod(pod);
        if let Err(error) = &request {
            tracing::debug!(node, pod = %id.name, %error, "pod requests unreadable, assumed NUMA-relevant");
        }
        let exclusive = request.as_ref().map_or(true, holds_exclusive_resources);
        let scheduler = spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(DEFAULT_SCHEDULER_NAME);
        let ours = scheduler == self.config.scheduler_name;
        let outcome = state.edit(node, &self.metrics, |entry| {
            if refused {
                entry.note_refusal(request.as_ref().ok());
            }
            if entry.reservation(&id.uid).is_none() {
                // Reserved pods were checked when they were reserved.
                self.check_identity(node, entry, &id.namespace, &id.name, now);
            }
            let footprint = request.as_ref().ok().map(numa_footprint);
            // Predicted when the pod was placed through the cache; otherwise now, on
            // the view before the pod (plus its own footprint once the kubelet has
            // started on it: the node's object may already count it).
            let mut pending_holdings = None;
            let init_holdings = match (entry.reservation(&id.uid), &request) {
                (Some(r), _) if !r.foreign => r.init_holdings.clone(),
                (_, Ok(request)) if !entry.has_view() => {
                    pending_holdings = Some(Arc::new(request.clone()));
                    Vec::new()
                }
                (_, Ok(request)) => {
                    let own = started(pod).then_some(footprint.as_ref()).flatten();
                    entry.predict_init_holdings(request, own)
                }
                (_, Err(_)) => Vec::new(),
            };
            entry.insert_pod(
                &id.uid,
                ObservedPod {
                    namespace: id.namespace.clone(),
                    name: id.name.clone(),
                    exclusive,
                    phase,
                    bound_at: now,
                    footprint,
                    releasing,
                    terminating,
                    init_holdings,
                    pending_holdings,
                },
            );
            if let Some(reservation) = entry.reservation(&id.uid) {
                return if reservation.foreign {
                    PodBound::Updated
                } else {
                    PodBound::Confirmed
                };
            }
            if phase.is_terminal() || !self.foreign_pod_matters(ours, exclusive) {
                return PodBound::Recorded;
            }
            let amounts = request.as_ref().map(numa_footprint).unwrap_or_default();
            entry.reserve(
                &id.uid,
                Reservation {
                    namespace: id.namespace.clone(),
                    name: id.name.clone(),
                    amounts,
                    zones: None,
                    request: None,
                    foreign: true,
                    init_holdings: Vec::new(),
                    reserved_at: now,
                },
            );
            PodBound::Foreign
        });
        if outcome == PodBound::Foreign {
            self.metrics.foreign_pod();
            tracing::debug!(node, pod = %id.name, namespace = %id.namespace, scheduler, "pod not placed through the cache reserved on observation");
        }
        state.pod_nodes.insert(id.uid, node.to_owned());
        outcome
    }

    /// Records a pod deletion: it leaves its node, and its reservation (if any) is
    /// released. Returns whether the cache knew the pod.
    pub fn pod_deleted(&self, pod: &Pod, now: Instant) -> bool {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return false;
        };
        let mut state = self.write();
        let Some(node) = state.pod_nodes.get(uid).cloned() else {
            return false;
        };
        let window = self.config.max_staleness;
        state.detach(&node, uid, &self.metrics, Some((now, window)))
    }

    /// A relist of bound pods ended: every pod the cache knows (bound, or reserved)
    /// for which `keep` says no is handled as deleted, releasing its reservation. The
    /// caller keeps what the relist returned and the pods whose binding is in flight.
    /// Returns how many pods were forgotten.
    pub fn retain_pods(&self, keep: impl Fn(&str) -> bool, now: Instant) -> usize {
        let mut state = self.write();
        let gone: Vec<(String, String)> = state
            .pod_nodes
            .iter()
            .filter(|(uid, _)| !keep(uid))
            .map(|(uid, node)| (uid.clone(), node.clone()))
            .collect();
        let window = self.config.max_staleness;
        for (uid, node) in &gone {
            state.detach(node, uid, &self.metrics, Some((now, window)));
        }
        if !gone.is_empty() {
            tracing::debug!(
                pods = gone.len(),
                "pods missing from a relist forgotten by the reserve cache"
            );
        }
        gone.len()
    }

    /// Resyncs every dirty node; see [`resync`].
    pub fn resync(&self, now: Instant) -> ResyncReport {
        self.resync_at(now, SystemTime::now())
    }

    /// [`Self::resync`] with `now` also given on the wall clock (NRT heartbeats are
    /// wall-clock times).
    pub fn resync_at(&self, now: Instant, wall: SystemTime) -> ResyncReport {
        let _span = tracing::debug_span!("nrt_cache_resync").entered();
        let mut report = ResyncReport::default();
        for node in self.dirty_nodes() {
            // One node per lock hold, so filters are never blocked for long.
            let mut state = self.write();
            let Some(entry) = state.nodes.get_mut(&node) else {
                continue;
            };
            let Some((resync, dropped)) =
                resync::resync_node(&node, entry, now, wall, &self.config)
            else {
                continue;
            };
            self.metrics.dirty_changed(true, entry.is_dirty());
            self.metrics.resynced(resync.outcome);
            state.stamp(&node);
            for uid in &dropped {
                state.forget_if_gone(&node, uid);
            }
            report.nodes.push(resync);
        }
        report
    }

    /// Whether a pod nobody reserved makes its node dirty. Our own pods can only be
    /// unreserved after a restart or a lost reserve, and this scheduler certainly
    /// places NUMA-relevant pods, so they are judged at least by exclusive resources.
    fn foreign_pod_matters(&self, ours: bool, exclusive: bool) -> bool {
        match self.config.foreign_pods {
            ForeignPodsDetection::All => true,
            ForeignPodsDetection::OnlyExclusiveResources => exclusive,
            ForeignPodsDetection::None => ours && exclusive,
        }
    }

    fn check_identity(
        &self,
        node: &str,
        entry: &NodeEntry,
        namespace: &str,
        name: &str,
        now: Instant,
    ) {
        if entry.pod_identity_reused(namespace, name, now, self.config.max_staleness) {
            self.metrics.identity_reused();
            tracing::info!(
                node,
                namespace,
                pod = name,
                "pod reuses the name of a pod just deleted from this node; the pod fingerprint cannot tell them apart",
            );
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read()
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write()
    }
}

/// Whether the kubelet has started on `pod` (it reports container statuses): an NRT
/// may already count what it was given.
fn started(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.container_statuses.as_ref().is_some_and(|c| !c.is_empty())
            || s.init_container_statuses
                .as_ref()
                .is_some_and(|c| !c.is_empty())
    })
}
