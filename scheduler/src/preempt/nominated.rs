//! Nominations: a preemptor waits for the room its victims leave, and nobody else may
//! take it meanwhile.
//!
//! After evicting victims for a pod, the scheduler nominates it to their node
//! (`status.nominatedNodeName`) and keeps a [`Nomination`]. Two rules follow:
//!
//! - **The room is held.** Deciding for any *other* pod of lower or equal priority, a
//!   node counts the nominated pods of at least that priority as if they were already
//!   there: their requests at node level, their NUMA footprint on every zone
//!   ([`Nominations::holding`]).
//! - **One round at a time.** While the nomination is young, the preemptor does not
//!   preempt again ([`Nomination::gate`]): it waits for its victims to leave the node,
//!   and then for the cache to take the node's view from a NodeResourceTopology object
//!   after they left (at once on a clean node, at the next matching resync on a dirty
//!   one) — only an NRT shows which zone was freed. If the preemptor still does not fit
//!   on that view (the zone guess of [`super::numa_rule`] was wrong, or someone else
//!   took the room), a new round may start; so it may once the nomination is older
//!   than the cache's maximum staleness.
//!
//! A nomination ends when the pod is bound or deleted, or a new round replaces it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::filter::PodUsage;

/// A pod nominated to a node after preemption.
#[derive(Debug, Clone)]
pub struct Nomination {
    /// The node.
    pub node: String,
    /// What the pod will take there (its priority and NUMA footprint in `meta`).
    pub usage: PodUsage,
    /// UIDs of the evicted pods.
    pub victims: Vec<String>,
    /// When the victims were chosen.
    pub since: Instant,
    /// When the victims were first seen gone.
    pub victims_gone_at: Option<Instant>,
}

/// Whether a pod may start a preemption round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Yes.
    Open,
    /// No: why it waits.
    Wait(String),
}

impl Nomination {
    /// Whether the nominated pod may preempt again now; see the module documentation.
    /// `present(uid)` says whether a victim is still on the node; `nrt_updated` is when
    /// the cache last took the node's view from an NRT object.
    pub fn gate(
        &mut self,
        present: impl Fn(&str) -> bool,
        nrt_updated: Option<Instant>,
        now: Instant,
        max_wait: Duration,
    ) -> Gate {
        if now.saturating_duration_since(self.since) >= max_wait {
            return Gate::Open;
        }
        let left = self.victims.iter().filter(|v| present(v)).count();
        if left > 0 {
            return Gate::Wait(format!(
                "waiting for {left} preempted pod(s) to leave node {}",
                self.node
            ));
        }
        let gone_at = *self.victims_gone_at.get_or_insert(now);
        if nrt_updated.is_some_and(|t| t > gone_at) {
            return Gate::Open;
        }
        Gate::Wait(format!(
            "waiting for the NodeResourceTopology of node {} to show the resources freed by preemption",
            self.node
        ))
    }
}

/// Every nomination, by pod UID.
#[derive(Debug, Default)]
pub struct Nominations {
    by_pod: HashMap<String, Nomination>,
}

impl Nominations {
    /// Records (or replaces) the nomination of pod `uid`.
    pub fn insert(&mut self, uid: &str, nomination: Nomination) {
        self.by_pod.insert(uid.to_owned(), nomination);
    }

    /// Ends the nomination of pod `uid`; returns it.
    pub fn remove(&mut self, uid: &str) -> Option<Nomination> {
        self.by_pod.remove(uid)
    }

    /// The nomination of pod `uid`.
    pub fn get_mut(&mut self, uid: &str) -> Option<&mut Nomination> {
        self.by_pod.get_mut(uid)
    }

    /// Whether pod `uid` is nominated anywhere.
    pub fn contains(&self, uid: &str) -> bool {
        self.by_pod.contains_key(uid)
    }

    /// The nominations a decision for pod `uid` of `priority` must respect, by node:
    /// other pods of at least that priority.
    pub fn holding(&self, uid: &str, priority: i32) -> HashMap<&str, Vec<(&str, &PodUsage)>> {
        let mut out: HashMap<&str, Vec<(&str, &PodUsage)>> = HashMap::new();
        for (pod, n) in &self.by_pod {
            if pod != uid && n.usage.meta.priority >= priority {
                out.entry(n.node.as_str())
                    .or_default()
                    .push((pod.as_str(), &n.usage));
            }
        }
        out
    }
}
