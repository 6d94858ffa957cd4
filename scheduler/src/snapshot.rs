//! The cluster as one decision sees it, read from [`Shared`] under its locks: every
//! node with its pods, namespace labels, and each node's topology view from the cache —
//! with the room that nominated pods of at least the decided pod's priority hold added
//! in (see [`crate::preempt::nominated`]): their requests on a copy of the node, their
//! NUMA footprint on every zone of a copy of the view. Nodes without such nominations
//! are read in place.

use std::collections::HashMap;

use crate::cycle::{ClusterView, PodInput, TopologyView};
use crate::filter::{NodeInfo, PodUsage};
use crate::shared::Shared;

/// Runs `f` on a consistent snapshot for deciding about `pod`.
pub fn with_snapshot<T>(
    shared: &Shared,
    pod: &PodInput,
    f: impl FnOnce(&ClusterView<'_>, &(dyn Fn(&str) -> TopologyView + Sync)) -> T,
) -> T {
    // Copied out first: the nominations lock is never held with the state lock.
    let held: HashMap<String, Vec<(String, PodUsage)>> = shared
        .nominations
        .lock()
        .holding(&pod.uid, pod.filter.meta().priority)
        .into_iter()
        .map(|(node, pods)| {
            let pods = pods
                .into_iter()
                .map(|(uid, usage)| (uid.to_owned(), usage.clone()))
                .collect();
            (node.to_owned(), pods)
        })
        .collect();
    let state = shared.state.read();
    let namespaces = shared.namespaces.read();
    let adjusted: HashMap<&str, NodeInfo> = held
        .iter()
        .filter_map(|(name, pods)| {
            let mut node = state.node(name)?.clone();
            for (uid, usage) in pods {
                if !node.contains_pod(uid) {
                    node.add_usage(uid, usage.clone());
                }
            }
            Some((name.as_str(), node))
        })
        .collect();
    let nodes: Vec<&NodeInfo> = state
        .nodes()
        .map(|n| adjusted.get(n.name()).unwrap_or(n))
        .collect();
    let lookup = |name: &str| -> TopologyView {
        let node = state.node(name);
        // An NRT of an earlier Node object of this name counts as none.
        let uid = node.map_or("", NodeInfo::uid);
        let view = match shared.cache.snapshot_for(name, uid) {
            None if node.is_some_and(|n| shared.settings.in_node_group(n.labels())) => {
                TopologyView::Unpublished
            }
            None => TopologyView::Missing,
            Some(Ok(view)) => TopologyView::Known(view),
            Some(Err(e)) => TopologyView::Invalid(e),
        };
        match (view, held.get(name)) {
            (TopologyView::Known(mut topology), Some(pods)) => {
                let t = std::sync::Arc::make_mut(&mut topology);
                for (_, usage) in pods {
                    t.reserve_on_every_zone(&usage.meta.footprint);
                }
                TopologyView::Known(topology)
            }
            (view, _) => view,
        }
    };
    let cluster = ClusterView {
        nodes: &nodes,
        namespaces: &namespaces,
    };
    f(&cluster, &lookup)
}
