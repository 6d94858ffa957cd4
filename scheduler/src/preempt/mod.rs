//! Preemption, NUMA-aware: when a pod fits nowhere, evict lower-priority pods from one
//! node so that it fits there — its NUMA fit under the node's Topology Manager policy
//! included.
//!
//! Data flows in four steps:
//!
//! 1. [`attempt`] (scheduling loop, after an unschedulable decision): may the pod
//!    preempt? Not when preemption is off, when its `preemptionPolicy` is `Never`, or
//!    while an earlier round of its own is still settling ([`nominated`]).
//! 2. [`victims::plans`]: per node, the smallest set of lower-priority victims whose
//!    eviction makes the pod pass every filter; the NUMA view after an eviction is
//!    estimated by the zone rule of [`numa_rule`], the DRA devices of claims only
//!    victims use counted free ([`dra_rule`]); PodDisruptionBudgets ([`pdb`]) rank
//!    the plans. The best few are kept.
//! 3. [`execute::run`] (background task): evict through the Eviction API, falling back
//!    to the next plan on a budget refusal; set `status.nominatedNodeName`; Events
//!    `Preempted` on each victim and `Preempting` on the preemptor.
//! 4. The preemptor goes back to the queue. It is bound by an ordinary cycle once the
//!    cache's view of the node shows room — after the victims are gone and the node's
//!    NRT says so — so a wrong zone guess never reaches the kubelet.

pub mod dra_rule;
pub mod execute;
pub mod nominated;
pub mod numa_rule;
pub mod pdb;
pub mod victims;

use std::time::Instant;

pub use nominated::{Gate, Nomination, Nominations};
pub use pdb::{Budget, Budgets};
pub use victims::Plan;

use crate::cycle::{CycleSettings, PodInput};
use crate::shared::Shared;
use crate::snapshot::Snapshot;

/// Plans kept to fall back on when an eviction is refused.
pub const PLANS_KEPT: usize = 3;

/// What preemption does for an unschedulable pod.
#[derive(Debug)]
pub enum Outcome {
    /// Preemption is off, or the pod may not preempt.
    Skipped,
    /// An earlier round is still settling.
    Waiting(String),
    /// No eviction would help.
    NotHelpful,
    /// Carry out one of these, best first.
    Plans(Vec<Plan>),
}

impl Outcome {
    /// The sentence added to the pod's FailedScheduling message.
    pub fn note(&self) -> Option<String> {
        match self {
            Self::Skipped => None,
            Self::Waiting(why) => Some(format!("Preemption: {why}.")),
            Self::NotHelpful => Some(
                "Preemption: no node has lower-priority pods whose eviction would make room."
                    .to_owned(),
            ),
            Self::Plans(plans) => plans.first().map(|p| {
                format!(
                    "Preemption: evicting {} lower-priority pod(s) from node {}.",
                    p.victims.len(),
                    p.node
                )
            }),
        }
    }
}

/// Steps 1 and 2 of the module documentation, for a pod no node fits.
pub fn attempt(shared: &Shared, pod: &PodInput, settings: &CycleSettings) -> Outcome {
    attempt_with(shared, &mut Snapshot::new(), pod, settings)
}

/// [`attempt`] over the scheduling loop's snapshot (brought up to date first).
pub fn attempt_with(
    shared: &Shared,
    snapshot: &mut Snapshot,
    pod: &PodInput,
    settings: &CycleSettings,
) -> Outcome {
    if !shared.settings.preemption || pod.filter.meta().never_preempts {
        return Outcome::Skipped;
    }
    if let Gate::Wait(why) = gate(shared, &pod.uid) {
        return Outcome::Waiting(why);
    }
    if !lower_priority_exists(shared, pod) {
        return Outcome::NotHelpful;
    }
    shared.metrics.preemption_searches.inc();
    let budgets = shared.budgets.read().clone();
    let holders = match pod.dra {
        Some(_) => dra_rule::Holders::from_store(&shared.dra.read()),
        None => dra_rule::Holders::default(),
    };
    let context = victims::Context {
        budgets: &budgets,
        holders: &holders,
        s: settings,
    };
    let plans = snapshot.with(shared, pod, |cluster, lookup| {
        let reserved = |node: &str, uid: &str| shared.cache.reserved_amounts(node, uid);
        victims::plans_with(pod, cluster, lookup, reserved, &context, PLANS_KEPT)
    });
    if plans.is_empty() {
        Outcome::NotHelpful
    } else {
        Outcome::Plans(plans)
    }
}

/// Whether some node the pod may use runs a pod of lower priority: without one no
/// eviction can help, and the snapshot and victim search are skipped. "May use" is
/// judged by the node-level filters eviction cannot change (cordon, `nodeName`,
/// taints, selector and affinity); ports and resources are what eviction frees.
fn lower_priority_exists(shared: &Shared, pod: &PodInput) -> bool {
    use crate::filter::Plugin;
    let state = shared.state.read();
    let priority = pod.filter.meta().priority;
    state.nodes().any(|node| {
        node.pods().any(|p| p.meta.priority < priority)
            && [
                Plugin::NodeUnschedulable,
                Plugin::NodeName,
                Plugin::TaintToleration,
                Plugin::NodeAffinity,
            ]
            .iter()
            .all(|plugin| plugin.filter(&pod.filter, node).is_ok())
    })
}

/// The pod's own nomination decides whether it may preempt now.
fn gate(shared: &Shared, uid: &str) -> Gate {
    let mut nominations = shared.nominations.lock();
    let Some(nomination) = nominations.get_mut(uid) else {
        return Gate::Open;
    };
    let updated = shared.nrt_updated.lock().get(&nomination.node).copied();
    let node = nomination.node.clone();
    let present = |victim: &str| shared.state.read().node_of(victim) == Some(node.as_str());
    nomination.gate(
        present,
        updated,
        Instant::now(),
        shared.settings.max_staleness,
    )
}

#[cfg(test)]
mod tests;
