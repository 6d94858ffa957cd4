//! Nodes whose NRT writer stopped (see [`super::resync`], rule 5), for the scheduler's
//! explanations: a pod that fits nowhere may fit once such a node's agent writes again,
//! because until then the pods bound there since its last write stay reserved.

use std::time::{Duration, Instant, SystemTime};

use super::TopologyCache;
use super::resync::stopped_writer_since;

/// A node whose NRT writer stopped while its view carries reservations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoppedWriter {
    /// Node name.
    pub node: String,
    /// Since the writer's last write.
    pub heartbeat_age: Duration,
    /// Reservations the view carries on every zone.
    pub reservations: usize,
}

impl TopologyCache {
    /// The dirty nodes whose NRT writer stopped, sorted by name. `now` and `wall` are
    /// the same moment on both clocks.
    pub fn stopped_writers(&self, now: Instant, wall: SystemTime) -> Vec<StoppedWriter> {
        let state = self.read();
        let mut out: Vec<StoppedWriter> = state
            .nodes
            .iter()
            .filter(|(_, entry)| entry.is_dirty())
            .filter_map(|(node, entry)| {
                let writer = stopped_writer_since(entry, now, wall, &self.config)?;
                Some(StoppedWriter {
                    node: node.clone(),
                    heartbeat_age: writer.age,
                    reservations: entry.reservations().count(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.node.cmp(&b.node));
        out
    }
}

/// The sentence an unschedulable pod's message ends with when some nodes' writers
/// stopped; `None` when none did.
pub fn stopped_writers_note(stopped: &[StoppedWriter], named: usize) -> Option<String> {
    if stopped.is_empty() {
        return None;
    }
    let mut nodes: Vec<String> = stopped
        .iter()
        .take(named)
        .map(|s| {
            format!(
                "{} ({} min, {} pod(s) held)",
                s.node,
                s.heartbeat_age.as_secs() / 60,
                s.reservations
            )
        })
        .collect();
    if stopped.len() > named {
        nodes.push(format!("+{} more", stopped.len() - named));
    }
    Some(format!(
        "The NodeResourceTopology writer stopped on {} node(s): {}; the pods bound there since its last write stay counted against their NUMA zones until the node agent writes again.",
        stopped.len(),
        nodes.join(", ")
    ))
}
