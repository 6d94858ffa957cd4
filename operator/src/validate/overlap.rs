//! The one rule about node groups that only the operator can check: no node is in two
//! groups.
//!
//! Two groups selecting one node would run two node agents there, both writing the
//! node's NodeResourceTopology with different settings. The CRD schema cannot see node
//! labels, so the operator refuses this at reconcile time and leaves the DaemonSets as
//! they are until the groups or the labels change.

use crate::node_groups::Membership;
use std::collections::BTreeMap;

/// How many overlapping nodes the error message names before "and N more".
const MAX_NAMED_NODES: usize = 5;

/// Some nodes are selected by more than one node group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", overlap_message(.overlaps))]
pub struct OverlapError {
    /// Node name → the groups selecting it (two or more).
    pub overlaps: BTreeMap<String, Vec<String>>,
}

impl OverlapError {
    /// CamelCase reason for the `Degraded` condition.
    pub const REASON: &'static str = "NodeGroupsOverlap";
}

/// `Err` naming the overlapping nodes and their groups, if any node is in two groups.
pub fn check_overlaps(membership: &Membership) -> Result<(), OverlapError> {
    let overlaps = membership.overlaps();
    if overlaps.is_empty() {
        Ok(())
    } else {
        Err(OverlapError { overlaps })
    }
}

/// "3 nodes are selected by more than one node group: n1 (a, b), n2 (a, b), n3 (a, c);
/// ..." with at most [`MAX_NAMED_NODES`] nodes named.
fn overlap_message(overlaps: &BTreeMap<String, Vec<String>>) -> String {
    let count = overlaps.len();
    let mut named: Vec<String> = overlaps
        .iter()
        .take(MAX_NAMED_NODES)
        .map(|(node, groups)| format!("{node} (groups {})", groups.join(", ")))
        .collect();
    if count > MAX_NAMED_NODES {
        named.push(format!("and {} more", count - MAX_NAMED_NODES));
    }
    let subject = if count == 1 {
        "1 node is".to_owned()
    } else {
        format!("{count} nodes are")
    };
    format!(
        "{subject} selected by more than one node group: {}. A node may belong to one group only: change spec.nodeGroups[].nodeSelector or the nodes' labels. The node agent DaemonSets are left unchanged until then.",
        named.join(", ")
    )
}
