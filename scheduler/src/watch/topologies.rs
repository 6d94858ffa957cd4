//! NodeResourceTopology objects, into the reserve cache. New objects count at once,
//! unlike in the reference plugin.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use kube::ResourceExt;
use kube::runtime::watcher;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

use super::relist::Index;
use crate::cache::NrtUpdate;
use crate::shared::Shared;

/// NRT objects by node name, in the reserve cache; `known` is what the watch delivered,
/// `refused` the names whose latest object was refused (the `invalid_node_topologies`
/// gauge).
pub(super) struct TopologyWatch {
    shared: Arc<Shared>,
    known: HashSet<String>,
    refused: HashSet<String>,
}

impl TopologyWatch {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            known: HashSet::new(),
            refused: HashSet::new(),
        }
    }
}

impl Index for TopologyWatch {
    type Object = NodeResourceTopology;
    type Key = String;
    const WHAT: &'static str = "NodeResourceTopology objects";

    fn key(nrt: &NodeResourceTopology) -> String {
        nrt.name_any()
    }

    fn apply(&mut self, name: String, nrt: NodeResourceTopology) {
        let shared = &self.shared;
        self.known.insert(name.clone());
        // Judge the object itself, not the cache's view: on a node with reservations
        // the cache holds new objects back until a resync, and a broken one must be
        // reported when it arrives.
        // The cache builds its view with the same checks, so a refused object leaves
        // the node without a usable topology: ineligible for NUMA-sensitive pods.
        if let Err(reason) = crate::numa::NodeTopology::from_nrt(&nrt) {
            tracing::warn!(node = %name, error = %reason, "unusable NodeResourceTopology: node skipped");
            shared.events.invalid_topology(&name, &reason.to_string());
            shared.metrics.refused_topology(reason.code());
            self.refused.insert(name.clone());
        } else {
            self.refused.remove(&name);
        }
        self.count_refused();
        let update = shared.cache.update_nrt(nrt);
        if matches!(
            update,
            NrtUpdate::Added | NrtUpdate::Replaced | NrtUpdate::Confirmed
        ) {
            shared.topology_accepted(&name);
            shared.topology_event(&name);
        }
        // A held object changes nothing a decision reads: nobody is woken.
    }

    fn delete(&mut self, name: String, _: NodeResourceTopology) {
        self.known.remove(&name);
        self.refused.remove(&name);
        self.count_refused();
        self.shared.nrt_updated.lock().remove(&name);
        if self.shared.cache.delete_nrt(&name) {
            self.shared.topology_event(&name);
        }
    }

    fn retain(&mut self, seen: HashSet<String>) {
        for gone in self.known.difference(&seen) {
            self.shared.cache.delete_nrt(gone);
        }
        self.refused.retain(|name| seen.contains(name));
        self.known = seen;
        self.count_refused();
    }

    fn synced(&mut self) {
        self.shared.synced.topologies.store(true, Ordering::Release);
        self.shared.cluster_event();
    }

    fn failed(&mut self, e: &watcher::Error) {
        // Without the NRT CRD there is nothing to wait for: every node is then "without
        // topology", and the watch keeps retrying in the background.
        if crd_missing(e) && !self.shared.synced.topologies.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                "the NodeResourceTopology CRD is not installed: scheduling without NUMA data until it is"
            );
            self.shared.wake.notify_one();
        }
        tracing::debug!(error = %e, "watching NodeResourceTopology objects");
    }
}

impl TopologyWatch {
    fn count_refused(&self) {
        let refused = i64::try_from(self.refused.len()).unwrap_or(i64::MAX);
        self.shared.metrics.invalid_topologies.set(refused);
    }
}

fn crd_missing(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchFailed(kube::Error::Api(s))
            if s.code == 404
    )
}
