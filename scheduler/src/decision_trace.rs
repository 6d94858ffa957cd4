//! A decision with what the scheduler's spans show of it (see [`crate::telemetry`]):
//! how long the snapshot and each step of the cycle took, how many nodes it looked at
//! and, when asked, the NUMA zones of the chosen node. For a pod with resource claims it
//! also carries the allocation on the chosen node, which the reserve and bind phases
//! write.

use crate::cycle::dra::DraChoice;
use crate::cycle::{
    self, ClusterView, CycleSettings, CycleTimings, Decision, PodInput, TopologyView,
};
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
    /// The NUMA zones of the chosen node the pod would use, when asked for.
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

/// [`crate::scheduler::decide`] over `snapshot` (brought up to date first), timed;
/// with `zones`, the chosen node's NUMA fit is run once more for the zones it picks.
pub fn decide_traced(
    shared: &Shared,
    snapshot: &mut Snapshot,
    input: &PodInput,
    settings: &CycleSettings,
    zones: bool,
) -> (Decision, DecisionTrace) {
    let started = Instant::now();
    snapshot.with(shared, input, |cluster, lookup| {
        let snapshot = started.elapsed();
        let (decision, cycle) = cycle::decide_timed(input, cluster, lookup, settings);
        let zones = match &decision {
            Decision::Schedule(c) if zones => chosen_zones(cluster, lookup, input, &c.node),
            _ => None,
        };
        let dra = match &decision {
            Decision::Schedule(c) => chosen_devices(cluster, lookup, input, &c.node),
            Decision::Unschedulable(_) => None,
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

/// The zones the NUMA fit picks for `input` on `node`.
fn chosen_zones(
    cluster: &ClusterView<'_>,
    lookup: &(dyn Fn(&str) -> TopologyView + Sync),
    input: &PodInput,
    node: &str,
) -> Option<Vec<u32>> {
    let TopologyView::Known(topology) = lookup(node) else {
        return None;
    };
    let info = cluster.nodes.iter().find(|n| n.name() == node)?;
    let placement = cycle::numa_fit(&topology, &input.request, info).ok()?;
    placement.zones.map(|z| z.iter().collect())
}

/// The allocation of `input`'s claims on `node`, as the filter found it.
fn chosen_devices(
    cluster: &ClusterView<'_>,
    lookup: &(dyn Fn(&str) -> TopologyView + Sync),
    input: &PodInput,
    node: &str,
) -> Option<Result<DraChoice, String>> {
    input.dra.as_ref()?;
    let Some(info) = cluster.nodes.iter().find(|n| n.name() == node) else {
        return Some(Err(format!("node {node} left the snapshot")));
    };
    cycle::dra_choice(input, info, lookup(node))
}
