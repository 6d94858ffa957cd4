//! Node-group membership: which nodes each group's label selector picks.
//!
//! ```text
//! effective node groups + every Node's labels
//!   └─ Membership::compute() ─► Membership { per group: its nodes }
//!                                 ├─ overlaps(): node → groups (validate refuses any)
//!                                 └─ per-group status (desired, ready, fresh NRT)
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet};
use tas_api::labels::{Selector, SelectorError};
use tas_api::tas::NodeGroup;

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

    /// Number of distinct nodes selected by any group.
    pub fn total_nodes(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.nodes.iter())
            .collect::<BTreeSet<_>>()
            .len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    /// A node's metadata with `labels`.
    pub(crate) fn node(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
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

    /// A group selecting the nodes labelled `key=value`.
    pub(crate) fn group(name: &str, key: &str, value: &str) -> NodeGroup {
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
        assert!(m.overlaps().is_empty());
    }

    #[test]
    fn the_implicit_all_group_selects_every_node() {
        let nodes = [node("n1", &[]), node("n2", &[("x", "y")])];
        let m = Membership::compute(&[NodeGroup::all_nodes()], &nodes);
        assert_eq!(m.groups[0].nodes.len(), 2);
    }

    #[test]
    fn overlaps_name_each_shared_node_with_its_groups_in_spec_order() {
        let nodes = [
            node("n1", &[("pool", "a"), ("gpu", "yes")]),
            node("n2", &[("pool", "a")]),
        ];
        let groups = [group("numa", "pool", "a"), group("gpu", "gpu", "yes")];
        assert_eq!(
            Membership::compute(&groups, &nodes).overlaps(),
            BTreeMap::from([("n1".to_owned(), vec!["numa".to_owned(), "gpu".to_owned()])])
        );
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
