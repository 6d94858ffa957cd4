//! The scheduler's view of nodes and the pods bound to them, fed by watches.
//!
//! Each node keeps a [`NodeInfo`] (requests and host ports of its pods, maintained
//! incrementally). Pods the scheduler has chosen a node for but whose binding has not
//! been observed yet are "assumed": counted on their node at once so the next decision
//! sees them, and replaced by the real pod when the watch delivers it (keyed by uid, so
//! nothing is counted twice).

use crate::filter::{NodeInfo, PodUsage};
use crate::generation::NodeGenerations;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Nodes and their pods.
///
/// Every change to a node — its object, a pod counted on it or taken off it — stamps
/// it with a new [`crate::generation`], and adding or removing a node also stamps the
/// membership, so a [`crate::snapshot::Snapshot`] copies in only what changed. Nodes
/// are held in `Arc`s the snapshot shares: a change copies a node only while a
/// snapshot still holds it.
#[derive(Default)]
pub struct ClusterState {
    nodes: BTreeMap<String, Arc<NodeInfo>>,
    /// The generation of each node's latest change.
    generations: NodeGenerations,
    /// The generation of the latest node addition or removal.
    membership: u64,
    /// Where each known bound (or assumed) pod is: uid → node.
    pod_node: HashMap<String, String>,
    /// Bound pods whose node is not known yet: node → (uid → pod).
    orphans: HashMap<String, HashMap<String, Pod>>,
    /// Pods counted on a node when it was deleted, until they are deleted too: the API
    /// server keeps them bound to its name (the pod garbage collector deletes them only
    /// after a quarantine), and a node registering again under that name runs them.
    ghosts: HashMap<String, HashMap<String, PodUsage>>,
}

impl ClusterState {
    /// Add or update a node.
    pub fn upsert_node(&mut self, node: &Node) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        match self.nodes.get_mut(&name) {
            // On error nothing changes (not even if the node was copied).
            Some(info) => match Arc::make_mut(info).set_node(node) {
                Ok(()) => {
                    self.generations.bump(&name);
                }
                Err(e) => tracing::warn!(node = %name, error = %e, "ignoring node update"),
            },
            None => match NodeInfo::new(node) {
                Ok(mut info) => {
                    for (uid, usage) in self.ghosts.remove(&name).unwrap_or_default() {
                        info.add_usage(&uid, usage);
                    }
                    for (_, pod) in self.orphans.remove(&name).unwrap_or_default() {
                        let _ = info.add_pod(&pod);
                    }
                    self.membership = self.generations.bump(&name);
                    self.nodes.insert(name, Arc::new(info));
                }
                Err(e) => tracing::warn!(node = %name, error = %e, "ignoring node"),
            },
        }
    }

    /// Remove a node. Its pods stay counted under its name (see `ghosts`): a node of
    /// that name added before they are deleted starts with them.
    pub fn remove_node(&mut self, name: &str) {
        if let Some(info) = self.nodes.remove(name) {
            self.generations.forget(name);
            self.membership = crate::generation::next();
            let pods = Arc::unwrap_or_clone(info).into_pods();
            if !pods.is_empty() {
                self.ghosts.entry(name.to_owned()).or_default().extend(pods);
            }
        }
    }

    /// The node `name` to change, stamped with a new generation (copied first if a
    /// snapshot shares it).
    fn edit(&mut self, name: &str) -> Option<&mut NodeInfo> {
        let info = self.nodes.get_mut(name)?;
        self.generations.bump(name);
        Some(Arc::make_mut(info))
    }

    /// A bound pod was observed (added, updated, or finished).
    pub fn upsert_bound_pod(&mut self, pod: &Pod) {
        let (Some(uid), Some(node)) = (
            pod.metadata.uid.clone(),
            pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        ) else {
            return;
        };
        if let Some(old) = self.pod_node.get(&uid)
            && *old != node
        {
            let old = old.clone();
            if self.nodes.get(&old).is_some_and(|n| n.contains_pod(&uid))
                && let Some(info) = self.edit(&old)
            {
                info.remove_pod(&uid);
            }
        }
        match self.nodes.get(&node) {
            Some(info) => {
                if !counts_differently(info, &uid, pod) {
                    // A status update that changes nothing the filters read.
                } else if let Some(info) = self.edit(&node)
                    && let Err(e) = info.add_pod(pod)
                {
                    tracing::warn!(pod = %uid, error = %e, "pod usage not counted");
                }
            }
            None => {
                self.orphans
                    .entry(node.clone())
                    .or_default()
                    .insert(uid.clone(), pod.clone());
            }
        }
        self.pod_node.insert(uid, node);
    }

    /// A pod was deleted.
    pub fn remove_pod(&mut self, uid: &str) {
        if let Some(node) = self.pod_node.remove(uid) {
            if self.nodes.get(&node).is_some_and(|n| n.contains_pod(uid))
                && let Some(info) = self.edit(&node)
            {
                info.remove_pod(uid);
            }
            if let Some(o) = self.orphans.get_mut(&node) {
                o.remove(uid);
            }
            if let Some(g) = self.ghosts.get_mut(&node) {
                g.remove(uid);
                if g.is_empty() {
                    self.ghosts.remove(&node);
                }
            }
        }
    }

    /// Count a pod on a node before its binding is observed.
    pub fn assume(&mut self, uid: &str, node: &str, usage: PodUsage) {
        if let Some(info) = self.edit(node) {
            info.add_usage(uid, usage);
            self.pod_node.insert(uid.to_owned(), node.to_owned());
        }
    }

    /// Forget an assumed pod (its binding failed).
    pub fn forget(&mut self, uid: &str) {
        self.remove_pod(uid);
    }

    /// The node, shared, with the generation of its latest change.
    pub fn node_shared(&self, name: &str) -> Option<(&Arc<NodeInfo>, u64)> {
        let info = self.nodes.get(name)?;
        Some((info, self.generations.of(name)))
    }

    /// Every node, shared, sorted by name, with the generation of its latest change.
    pub fn nodes_shared(&self) -> impl ExactSizeIterator<Item = (&Arc<NodeInfo>, u64)> {
        self.nodes
            .iter()
            .map(|(name, info)| (info, self.generations.of(name)))
    }

    /// The nodes changed after generation `since` (added or changed; a removal shows
    /// in [`Self::membership`] instead), oldest change first.
    pub fn changed_since(&self, since: u64) -> impl Iterator<Item = (u64, &str)> {
        self.generations.changed_since(since)
    }

    /// The generation of the latest node addition or removal.
    pub fn membership(&self) -> u64 {
        self.membership
    }

    /// The node, if known.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name).map(|n| &**n)
    }

    /// Every node, sorted by name (stable order for deterministic decisions).
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = &NodeInfo> {
        self.nodes.values().map(|n| &**n)
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Where a pod is counted, if anywhere.
    pub fn node_of(&self, uid: &str) -> Option<&str> {
        self.pod_node.get(uid).map(String::as_str)
    }

    /// Drop nodes not in `keep` (after a relist).
    pub fn retain_nodes(&mut self, keep: &std::collections::HashSet<String>) {
        let gone: Vec<String> = self
            .nodes
            .keys()
            .filter(|n| !keep.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            self.remove_node(&name);
        }
    }

    /// Drop pods not in `keep` (after a relist), except assumed ones still in flight.
    pub fn retain_pods(
        &mut self,
        keep: &std::collections::HashSet<String>,
        in_flight: &std::collections::HashSet<String>,
    ) {
        let gone: Vec<String> = self
            .pod_node
            .keys()
            .filter(|u| !keep.contains(*u) && !in_flight.contains(*u))
            .cloned()
            .collect();
        for uid in gone {
            self.remove_pod(&uid);
        }
    }
}

/// Whether counting `pod` on `info` would change it: it is not counted yet, or counted
/// with other requests, ports or metadata, or it has finished (and is still counted).
/// An unreadable pod changes nothing (it is not counted, as [`NodeInfo::add_pod`]
/// refuses it).
fn counts_differently(info: &NodeInfo, uid: &str, pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return info.contains_pod(uid);
    }
    match PodUsage::from_pod(pod) {
        Ok(usage) => info.pod(uid) != Some(&usage),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{guaranteed_container, pod};
    use serde_json::json;

    fn node_object(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}
        }))
        .expect("node")
    }

    fn bound(name: &str, node: &str, cpu: u32) -> Pod {
        pod(
            name,
            &[],
            json!({"nodeName": node, "containers": guaranteed_container(cpu)}),
        )
    }

    fn requested_cpu(state: &ClusterState, node: &str) -> i64 {
        state.node(node).expect("node known").requested().milli_cpu
    }

    /// A node deleted and created again under its name before its pods are deleted
    /// (the pod garbage collector waits 40 s): the API server still binds them to it
    /// and the new node's kubelet runs them, so they count on the new node.
    #[test]
    fn a_recreated_node_still_counts_the_pods_bound_to_its_name() {
        let mut state = ClusterState::default();
        state.upsert_node(&node_object("n", "16"));
        state.upsert_bound_pod(&bound("a", "n", 4));
        state.upsert_bound_pod(&bound("b", "n", 6));
        assert_eq!(requested_cpu(&state, "n"), 10_000);

        state.remove_node("n");
        assert!(state.node("n").is_none());
        // One of them is deleted while the node is gone.
        state.remove_pod("uid-b");
        state.upsert_node(&node_object("n", "12"));
        assert_eq!(requested_cpu(&state, "n"), 4_000, "a is still bound to n");
        assert_eq!(state.node_of("uid-a"), Some("n"));

        // Deleted later: no longer counted anywhere, nothing left to come back.
        state.remove_pod("uid-a");
        assert_eq!(requested_cpu(&state, "n"), 0);
        state.remove_node("n");
        state.upsert_node(&node_object("n", "12"));
        assert_eq!(requested_cpu(&state, "n"), 0);
    }

    /// The same when a relist finds the node gone.
    #[test]
    fn a_node_dropped_by_a_relist_keeps_its_pods_for_its_return() {
        let mut state = ClusterState::default();
        state.upsert_node(&node_object("n", "16"));
        state.upsert_node(&node_object("m", "16"));
        state.upsert_bound_pod(&bound("a", "n", 4));
        state.retain_nodes(&["m".to_owned()].into_iter().collect());
        assert!(state.node("n").is_none());
        state.upsert_node(&node_object("n", "16"));
        assert_eq!(requested_cpu(&state, "n"), 4_000);
    }
}
