//! [`State`]: what the cache's lock guards. The node map, plus an index from pod UID
//! to the node where the pod is reserved or bound, so deletions and unreserves of pods
//! that never got a `nodeName` still find their node. Every change to a node goes
//! through [`State::edit`], which keeps the dirty-nodes gauge in step and stamps the
//! node with a new [`crate::generation`] (a resync, which edits entries in place,
//! stamps them with [`State::stamp`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::metrics::CacheMetrics;
use super::node::NodeEntry;
use crate::generation::NodeGenerations;

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) nodes: HashMap<String, NodeEntry>,
    /// Pod UID → the node where it is reserved or bound.
    pub(super) pod_nodes: HashMap<String, String>,
    /// The generation of each node's latest change.
    pub(super) generations: NodeGenerations,
    /// The generation of the latest removal of an entry (its generation is forgotten
    /// with it).
    pub(super) removed: u64,
}

impl State {
    /// Runs `f` on `node`'s entry (created when missing), keeping the dirty-nodes gauge
    /// right and dropping the entry when nothing is left in it.
    pub(super) fn edit<R>(
        &mut self,
        node: &str,
        metrics: &CacheMetrics,
        f: impl FnOnce(&mut NodeEntry) -> R,
    ) -> R {
        let entry = match self.nodes.get_mut(node) {
            Some(entry) => entry,
            None => self.nodes.entry(node.to_owned()).or_default(),
        };
        let was_dirty = entry.is_dirty();
        let result = f(entry);
        metrics.dirty_changed(was_dirty, entry.is_dirty());
        if entry.is_empty() {
            self.nodes.remove(node);
            self.generations.forget(node);
            self.removed = crate::generation::next();
        } else {
            self.generations.bump(node);
        }
        result
    }

    /// Stamps `node` as changed (its entry was edited in place).
    pub(super) fn stamp(&mut self, node: &str) {
        self.generations.bump(node);
    }

    /// Removes pod `uid` from `node`: its bound record (noting the deletion when
    /// `deleted` gives the time and the identity-reuse window) and its reservation.
    pub(super) fn detach(
        &mut self,
        node: &str,
        uid: &str,
        metrics: &CacheMetrics,
        deleted: Option<(Instant, Duration)>,
    ) -> bool {
        self.pod_nodes.remove(uid);
        if !self.nodes.contains_key(node) {
            return false;
        }
        self.edit(node, metrics, |entry| {
            let observed = entry.remove_pod(uid);
            if let (Some(pod), Some((now, window))) = (&observed, deleted) {
                entry.note_deleted(&pod.namespace, &pod.name, now, window);
                entry.note_departed(pod, now, window);
            }
            let reservation = entry.unreserve(uid);
            observed.is_some() || reservation.is_some()
        })
    }

    /// Drops `uid` from the index when `node` neither reserves nor holds it any more.
    pub(super) fn forget_if_gone(&mut self, node: &str, uid: &str) {
        let held = self
            .nodes
            .get(node)
            .is_some_and(|e| e.pods.contains_key(uid) || e.reservation(uid).is_some());
        if !held && self.pod_nodes.get(uid).is_some_and(|n| n == node) {
            self.pod_nodes.remove(uid);
        }
    }
}
