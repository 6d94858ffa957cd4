//! Nodes: labels, taints, `unschedulable` and allocatable, for the node filters.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::relist::Index;
use crate::shared::Shared;

/// The nodes the scheduler knows, by name, with a digest of what matters of each so
/// that heartbeats (status updates that change nothing the filters read) are ignored.
pub(super) struct NodeWatch {
    shared: Arc<Shared>,
    digests: HashMap<String, u64>,
}

impl NodeWatch {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            digests: HashMap::new(),
        }
    }
}

impl Index for NodeWatch {
    type Object = Node;
    type Key = String;
    const WHAT: &'static str = "nodes";

    fn key(node: &Node) -> String {
        node.name_any()
    }

    fn apply(&mut self, name: String, node: Node) {
        let d = node_digest(&node);
        if self.digests.insert(name.clone(), d) != Some(d) {
            self.shared.state.write().upsert_node(&node);
            let labels = node.metadata.labels.clone().unwrap_or_default();
            self.shared.dra.write().upsert_node(&name, labels);
            self.shared.cluster_event();
        }
    }

    fn delete(&mut self, name: String, _: Node) {
        self.digests.remove(&name);
        self.shared.state.write().remove_node(&name);
        self.shared.dra.write().remove_node(&name);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        self.digests.retain(|n, _| seen.contains(n));
        self.shared.state.write().retain_nodes(&seen);
        self.shared.dra.write().retain_nodes(|n| seen.contains(n));
    }

    fn synced(&mut self) {
        self.shared.synced.nodes.store(true, Ordering::Release);
        self.shared.cluster_event();
    }
}

/// The parts of a Node that matter for scheduling (heartbeats do not).
fn node_digest(node: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    // A Node deleted and created again under its name is another node.
    node.metadata.uid.hash(&mut h);
    node.metadata.labels.hash(&mut h);
    if let Some(spec) = &node.spec {
        spec.unschedulable.hash(&mut h);
        for t in spec.taints.iter().flatten() {
            (&t.key, &t.value, &t.effect).hash(&mut h);
        }
    }
    if let Some(status) = &node.status {
        for (k, v) in status.allocatable.iter().flatten() {
            (k, &v.0).hash(&mut h);
        }
    }
    h.finish()
}
