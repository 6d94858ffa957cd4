//! A decision with what the scheduler's spans show of it (see [`crate::telemetry`]):
//! how long the snapshot and each step of the cycle took, how many nodes it looked at
//! and the NUMA zones of the chosen node (the ones its filter's NUMA fit placed the pod
//! in, carried in the [`Candidate`]: nothing is fitted again). For a pod with resource
//! claims it also carries the allocation on the chosen node, which the reserve and bind
//! phases write.

use crate::cycle::dra::DraChoice;
use crate::cycle::{self, Candidate, ClusterView, CycleSettings, CycleTimings, Decision, PodInput};
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use std::time::{Duration, Instant};

/// What a decision measured besides its result, for the attempt's span.
#[derive(Debug, Clone, Default)]
pub struct DecisionTrace {
    /// Bringing the snapshot up to date (under the state and cache locks) and applying
    /// the nominations.
    pub snapshot: Duration,
    /// The steps of the cycle.
    pub cycle: CycleTimings,
    /// Nodes in the snapshot.
    pub nodes: usize,
    /// The NUMA zones of the chosen node the pod would use.
    pub zones: Option<Vec<u32>>,
    /// The allocation of the pod's claims on the chosen node (`None`: no claims, or no
    /// node chosen); an error only if the snapshot changed under the decision, which
    /// it cannot.
    pub dra: Option<Result<DraChoice, String>>,
}

impl DecisionTrace {
    /// The phases back to back, as the attempt's span shows them.
    pub fn phases(&self) -> Vec<(&'static str, Duration)> {
        vec![
            ("snapshot", self.snapshot),
            ("prefilter", self.cycle.prefilter),
            ("filter", self.cycle.filter),
            ("score", self.cycle.score),
        ]
    }
}

/// [`crate::scheduler::decide`] over `snapshot` (brought up to date first), timed. The
/// chosen node's zones and its claims' allocation are the ones its filter found.
pub fn decide_traced(
    shared: &Shared,
    snapshot: &mut Snapshot,
    input: &PodInput,
    settings: &CycleSettings,
) -> (Decision, DecisionTrace) {
    let started = Instant::now();
    snapshot.with(shared, input, |cluster, lookup| {
        let snapshot = started.elapsed();
        let (decision, cycle) = cycle::decide_timed(input, cluster, lookup, settings);
        let (zones, dra) = match &decision {
            Decision::Schedule(c) => (
                c.zones.map(|z| z.iter().collect()),
                chosen_devices(cluster, input, c),
            ),
            Decision::Unschedulable(_) => (None, None),
        };
        let trace = DecisionTrace {
            snapshot,
            cycle,
            nodes: cluster.nodes.len(),
            zones,
            dra,
        };
        (decision, trace)
    })
}

/// The allocation of `input`'s claims on the chosen node inside the zones its NUMA fit
/// chose, as the filter found it.
fn chosen_devices(
    cluster: &ClusterView<'_>,
    input: &PodInput,
    chosen: &Candidate,
) -> Option<Result<DraChoice, String>> {
    let dra = input.dra.as_ref()?;
    let node = &chosen.node;
    let Some(info) = cluster.nodes.iter().find(|n| n.name() == node) else {
        return Some(Err(format!("node {node} left the snapshot")));
    };
    Some(dra.fit(info, chosen.zones))
}

#[cfg(test)]
mod tests;
