//! What happened to a workload, and the report `make demo` prints.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;
use tas_nodesim::Scenario;

/// A pod running on a node, on these NUMA zones (its exclusive CPUs' zones; empty for
/// pods of the shared pool).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Placement {
    /// Pod name.
    pub pod: String,
    /// Node name.
    pub node: String,
    /// Zones of its exclusive CPUs.
    pub zones: BTreeSet<u32>,
}

/// Every pod's outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadOutcome {
    /// Admitted and running.
    pub placements: Vec<Placement>,
    /// Rejected by the (simulated) kubelet: (pod, node).
    pub topology_affinity_errors: Vec<(String, String)>,
    /// Failed for another reason: (pod, node).
    pub other_failures: Vec<(String, String)>,
    /// Not scheduled, with the scheduler's explanation: (pod, message).
    pub pending: Vec<(String, String)>,
    /// Pods without an outcome yet.
    pub undecided: usize,
}

/// The demo's report.
pub struct Report<'a> {
    /// The scenario run.
    pub scenario: &'a Scenario,
    /// From applying the CR to `Available` with every NRT fresh.
    pub available_after: Duration,
    /// The workload under TAS.
    pub tas: &'a WorkloadOutcome,
    /// The same workload under the default scheduler, if run.
    pub default_scheduler: Option<&'a WorkloadOutcome>,
}

impl<'a> Report<'a> {
    /// The report of `tas` (and of `default_scheduler`, when run) on `scenario`.
    pub fn new(
        scenario: &'a Scenario,
        available_after: Duration,
        tas: &'a WorkloadOutcome,
        default_scheduler: Option<&'a WorkloadOutcome>,
    ) -> Self {
        Self {
            scenario,
            available_after,
            tas,
            default_scheduler,
        }
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "== Nodes ==")?;
        for n in self.scenario.nodes() {
            let zones: Vec<String> = n
                .machine
                .zones
                .iter()
                .map(|z| format!("node-{}: {} cpus", z.id, z.cpus.len()))
                .collect();
            writeln!(
                f,
                "  {:<28} {:<17} {:<9} {}",
                n.name,
                n.settings.topology_manager_policy.as_str(),
                n.settings.topology_manager_scope.as_str(),
                zones.join(", ")
            )?;
        }
        writeln!(f, "\n== Placements under TAS ==")?;
        for p in &self.tas.placements {
            let zones: Vec<String> = p.zones.iter().map(|z| format!("node-{z}")).collect();
            let zones = if zones.is_empty() {
                "shared pool".to_owned()
            } else {
                zones.join("+")
            };
            writeln!(f, "  {:<36} {:<28} {}", p.pod, p.node, zones)?;
        }
        for (pod, why) in &self.tas.pending {
            writeln!(f, "  {pod:<36} Pending: {why}")?;
        }
        writeln!(f, "\n== TopologyAffinityErrors ==")?;
        writeln!(
            f,
            "  TAS:               {}",
            self.tas.topology_affinity_errors.len()
        )?;
        if let Some(d) = self.default_scheduler {
            writeln!(
                f,
                "  default scheduler: {}",
                d.topology_affinity_errors.len()
            )?;
            for (pod, node) in &d.topology_affinity_errors {
                writeln!(f, "    {pod} rejected by {node}")?;
            }
        }
        writeln!(
            f,
            "\n== Totals ==\n  TAS: {} running, {} pending, {} rejected",
            self.tas.placements.len(),
            self.tas.pending.len(),
            self.tas.topology_affinity_errors.len()
        )?;
        if let Some(d) = self.default_scheduler {
            writeln!(
                f,
                "  default scheduler: {} running, {} pending, {} rejected",
                d.placements.len(),
                d.pending.len(),
                d.topology_affinity_errors.len()
            )?;
        }
        writeln!(
            f,
            "  time from applying the TopologyAwareScheduling object to Available: {:.1}s",
            self.available_after.as_secs_f64()
        )
    }
}
