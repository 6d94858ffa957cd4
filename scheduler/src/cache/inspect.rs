//! [`TopologyCache::inspect`]: a read-only picture of every node the cache knows, for
//! the scheduler's `/debug/reservations` endpoint and `kubectl tas`. The entries are
//! copied under the read lock and judged after it is released: hashing every node's
//! pods for the fingerprint must not hold back the watches and the scheduling cycle,
//! which write the cache.

use std::time::{Instant, SystemTime};

use tas_api::fingerprint::{CheckError, check};

use super::TopologyCache;
use super::node::NodeEntry;
use super::resync::stopped_writer_since;
use crate::numa::{NumaSet, Resources};

/// One node as the cache holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInspection {
    /// Node name.
    pub node: String,
    /// Whether the node has an NRT object.
    pub has_topology: bool,
    /// Why the latest NRT object cannot be used, if it cannot.
    pub topology_error: Option<String>,
    /// Whether the view carries reservations (NRT updates are held back).
    pub dirty: bool,
    /// Seconds since the oldest reservation of a dirty node.
    pub dirty_seconds: Option<f64>,
    /// The latest NRT's pod fingerprint, if it carries one.
    pub nrt_fingerprint: Option<String>,
    /// The fingerprint of the pods the cache believes on the node, by the NRT's method.
    pub scheduler_fingerprint: Option<String>,
    /// Whether the two fingerprints agree; `None` when the NRT has no usable one.
    pub fingerprint_match: Option<bool>,
    /// Pods believed bound to the node.
    pub pods: usize,
    /// The reservations the view carries (or records, without an NRT).
    pub reservations: Vec<ReservationInspection>,
    /// What filters read: per NUMA id, each resource's free amount in the view
    /// (reservations subtracted; zero and below kept). Empty without a usable view.
    pub zones: Vec<(u32, Vec<(String, i64)>)>,
    /// Seconds since the latest NRT's writer last wrote it, when that writer stopped
    /// (its `tas.dev/heartbeat` is `missed_heartbeats` periods old).
    pub writer_stopped_seconds: Option<f64>,
}

/// One reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationInspection {
    /// Pod UID.
    pub uid: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Reserved on observation of a pod not placed through the cache.
    pub foreign: bool,
    /// Seconds since it was made.
    pub age_seconds: f64,
    /// Held back on each zone it is held on (CPU in millicores, memory in bytes,
    /// devices in units).
    pub amounts: Resources,
    /// The zones it is held on, when narrowed; `None`: every zone.
    pub zones: Option<NumaSet>,
}

impl TopologyCache {
    /// Every node the cache knows, sorted by name.
    pub fn inspect(&self, now: Instant) -> Vec<NodeInspection> {
        let entries: Vec<(String, NodeEntry)> = {
            let state = self.read();
            state
                .nodes
                .iter()
                .map(|(name, entry)| (name.clone(), entry.clone()))
                .collect()
        };
        let wall = SystemTime::now();
        let mut out: Vec<NodeInspection> = entries
            .iter()
            .map(|(name, entry)| {
                let mut inspection = self.inspect_node(name, entry, now);
                inspection.writer_stopped_seconds =
                    stopped_writer_since(entry, now, wall, &self.config)
                        .map(|w| w.age.as_secs_f64());
                inspection
            })
            .collect();
        out.sort_by(|a, b| a.node.cmp(&b.node));
        out
    }

    fn inspect_node(&self, node: &str, entry: &NodeEntry, now: Instant) -> NodeInspection {
        let latest = entry.latest();
        let nrt_fingerprint = latest.and_then(|n| n.pods_fingerprint()).map(str::to_owned);
        let method = latest.and_then(|n| n.pods_fingerprint_method().ok());
        let scheduler_fingerprint =
            method.map(|m| entry.fingerprint(m, self.config.informer_mode).sum());
        let fingerprint_match = match (&nrt_fingerprint, &scheduler_fingerprint) {
            (Some(expected), Some(computed)) => match check(expected, computed) {
                Ok(()) => Some(true),
                Err(CheckError::Mismatch { .. }) => Some(false),
                Err(_) => None,
            },
            _ => None,
        };
        let mut reservations: Vec<ReservationInspection> = entry
            .reservations()
            .map(|(uid, r)| ReservationInspection {
                uid: uid.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                foreign: r.foreign,
                age_seconds: now.saturating_duration_since(r.reserved_at).as_secs_f64(),
                amounts: r.amounts.clone(),
                zones: r.zones,
            })
            .collect();
        reservations.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        NodeInspection {
            node: node.to_owned(),
            has_topology: latest.is_some(),
            topology_error: match entry.view() {
                Some(Err(e)) => Some(e.to_string()),
                _ => None,
            },
            dirty: entry.is_dirty(),
            dirty_seconds: entry
                .dirty_since()
                .map(|since| now.saturating_duration_since(since).as_secs_f64()),
            nrt_fingerprint,
            scheduler_fingerprint,
            fingerprint_match,
            pods: entry.pods.len(),
            reservations,
            zones: match entry.view() {
                Some(Ok(topology)) => topology
                    .numa_ids()
                    .iter()
                    .map(|&id| {
                        let free = topology
                            .resource_names()
                            .filter_map(|r| Some((r.to_owned(), topology.available(id, r)?)))
                            .collect();
                        (id, free)
                    })
                    .collect(),
                _ => Vec::new(),
            },
            writer_stopped_seconds: None,
        }
    }
}
