//! Node-group membership: which nodes each group's label selector picks, and the one
//! rule about groups that only the operator can check, that no node is in two groups.
//!
//! ```text
//! effective node groups + every Node's labels
//!   └─ membership() ─► Membership { per group: its nodes, overlaps: node → groups }
//!                        └─ check_overlaps() ─► Ok, or OverlapError (Degraded=NodeGroupsOverlap)
//! ```
//!
//! Two groups selecting one node would run two node agents there, both writing the
//! node's NodeResourceTopology with different settings. The CRD schema cannot see node
//! labels, so the operator refuses this at reconcile time and leaves the DaemonSets as
//! they are until the groups or the labels change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet};
use tas_api::labels::{Selector, SelectorError};
use tas_api::tas::NodeGroup;

/// How many overlapping nodes the error message names before "and N more".
const MAX_NAMED_NODES: usize = 5;

/// The nodes of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMembers {
    /// The group's name.
    pub name: String,
    /// Names of the nodes its selector matches.
    pub nodes: BTreeSet<String>,
    /// Why the selector could not be evaluated (the group then has no nodes).
    pub invalid: Option<SelectorError>,
}

/// Membership of every group, in the groups' order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Membership {
    /// One entry per group.
    pub groups: Vec<GroupMembers>,
}

impl Membership {
    /// Evaluates each group's selector against each node's labels (`nodes`: the Nodes'
    /// metadata, all the operator watches of them).
    pub fn compute<'a>(
        groups: &[NodeGroup],
        nodes: impl IntoIterator<Item = &'a ObjectMeta>,
    ) -> Self {
        let parsed: Vec<_> = groups
            .iter()
            .map(|g| Selector::parse(&g.node_selector))
            .collect();
        let mut members: Vec<BTreeSet<String>> = vec![BTreeSet::new(); groups.len()];
        let no_labels = BTreeMap::new();
        for node in nodes {
            let Some(name) = node.name.as_ref() else {
                continue;
            };
            let labels = node.labels.as_ref().unwrap_or(&no_labels);
            for (selector, set) in parsed.iter().zip(members.iter_mut()) {
                if selector.as_ref().is_ok_and(|s| s.matches(labels)) {
                    set.insert(name.clone());
                }
            }
        }
        Self {
            groups: groups
                .iter()
                .zip(parsed)
                .zip(members)
                .map(|((group, selector), nodes)| GroupMembers {
                    name: group.name.clone(),
                    nodes,
                    invalid: selector.err(),
                })
                .collect(),
        }
    }

    /// The members of the group named `name`.
    pub fn group(&self, name: &str) -> Option<&GroupMembers> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// Every node selected by more than one group, with those groups (in spec order).
    pub fn overlaps(&self) -> BTreeMap<String, Vec<String>> {
        let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for group in &self.groups {
            for node in &group.nodes {
                by_node
                    .entry(node.clone())
                    .or_default()
                    .push(group.name.clone());
            }
        }
        by_node.retain(|_, groups| groups.len() > 1);
        by_node
    }

    /// `Err` naming the overlapping nodes and their groups, if any node is in two groups.
    pub fn check_overlaps(&self) -> Result<(), OverlapError> {
        let overlaps = self.overlaps();
        if overlaps.is_empty() {
            Ok(())
        } else {
            Err(OverlapError { overlaps })
        }
    }

    /// Number of distinct nodes selected by any group.
    pub fn total_nodes(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.nodes.iter())
            .collect::<BTreeSet<_>>()
            .len()
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn node(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn group(name: &str, key: &str, value: &str) -> NodeGroup {
        NodeGroup {
            name: name.to_owned(),
            node_selector: LabelSelector {
                match_labels: Some(BTreeMap::from([(key.to_owned(), value.to_owned())])),
                ..LabelSelector::default()
            },
            updater: None,
        }
    }

    #[test]
    fn disjoint_groups_do_not_overlap() {
        let nodes = [
            node("n1", &[("pool", "a")]),
            node("n2", &[("pool", "b")]),
            node("n3", &[]),
        ];
        let m = Membership::compute(&[group("a", "pool", "a"), group("b", "pool", "b")], &nodes);
        assert_eq!(m.group("a").unwrap().nodes, BTreeSet::from(["n1".into()]));
        assert_eq!(m.group("b").unwrap().nodes, BTreeSet::from(["n2".into()]));
        assert_eq!(m.total_nodes(), 2);
        assert_eq!(m.check_overlaps(), Ok(()));
    }

    #[test]
    fn the_implicit_all_group_selects_every_node() {
        let nodes = [node("n1", &[]), node("n2", &[("x", "y")])];
        let m = Membership::compute(&[NodeGroup::all_nodes()], &nodes);
        assert_eq!(m.groups[0].nodes.len(), 2);
    }

    #[test]
    fn overlap_names_the_node_and_both_groups() {
        let nodes = [
            node("n1", &[("pool", "a"), ("gpu", "yes")]),
            node("n2", &[("pool", "a")]),
        ];
        let groups = [group("numa", "pool", "a"), group("gpu", "gpu", "yes")];
        let err = Membership::compute(&groups, &nodes)
            .check_overlaps()
            .unwrap_err();
        assert_eq!(
            err.overlaps,
            BTreeMap::from([("n1".to_owned(), vec!["numa".to_owned(), "gpu".to_owned()])])
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "1 node is selected by more than one node group: n1 (groups numa, gpu)."
            ),
            "{msg}"
        );
        assert!(!msg.contains("n2"), "{msg}");
    }

    #[test]
    fn overlap_message_lists_five_nodes_then_counts_the_rest() {
        let nodes: Vec<ObjectMeta> = (0..8)
            .map(|i| node(&format!("n{i}"), &[("pool", "a")]))
            .collect();
        let groups = [group("one", "pool", "a"), group("two", "pool", "a")];
        let msg = Membership::compute(&groups, &nodes)
            .check_overlaps()
            .unwrap_err()
            .to_string();
        assert!(msg.starts_with("8 nodes are selected"), "{msg}");
        for i in 0..5 {
            assert!(msg.contains(&format!("n{i} (groups one, two)")), "{msg}");
        }
        assert!(!msg.contains("n5"), "{msg}");
        assert!(msg.contains("and 3 more"), "{msg}");
    }

    #[test]
    fn an_invalid_selector_selects_nothing_and_says_why() {
        let mut bad = group("bad", "pool", "a");
        bad.node_selector.match_expressions = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "pool".into(),
                operator: "Gt".into(),
                values: Some(vec!["1".into()]),
            },
        ]);
        let m = Membership::compute(&[bad], &[node("n1", &[("pool", "a")])]);
        assert!(m.groups[0].nodes.is_empty());
        assert!(m.groups[0].invalid.is_some());
    }
}
