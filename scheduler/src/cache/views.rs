//! [`Views`]: the cache read under one lock hold, for a reader that keeps its own copy
//! of the views ([`crate::snapshot::Snapshot`]) and catches up on what changed since
//! the [`crate::generation`] it last saw.

use parking_lot::RwLockReadGuard;

use super::TopologyCache;
use super::node::{self, NodeView};
use super::store::State;

/// The cache's views, read-locked; see the module documentation.
pub struct Views<'a> {
    state: RwLockReadGuard<'a, State>,
    /// Every change up to this generation is visible through the guard.
    generation: u64,
}

impl TopologyCache {
    /// The views, read-locked until the result is dropped: keep it briefly.
    pub fn views(&self) -> Views<'_> {
        let state = self.read();
        // Read under the lock: every stamp up to it has been made, every later one
        // will be greater.
        let generation = crate::generation::current();
        Views { state, generation }
    }
}

impl Views<'_> {
    /// Everything stamped up to this generation is visible here.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The nodes whose view may have changed after generation `since`, oldest change
    /// first; `None` when a node's entry was removed since, which this list cannot
    /// name: then every view must be read again.
    pub fn changed_since(&self, since: u64) -> Option<impl Iterator<Item = &str>> {
        if self.state.removed > since {
            return None;
        }
        Some(self.state.generations.changed_since(since).map(|(_, n)| n))
    }

    /// The node's view as [`TopologyCache::snapshot_for`] gives it.
    pub fn view_for(&self, node: &str, node_uid: &str) -> Option<NodeView> {
        let entry = self.state.nodes.get(node)?;
        let owner = entry.latest().and_then(|nrt| node::node_owner(nrt));
        if !node_uid.is_empty() && owner.is_some_and(|o| o != node_uid) {
            return None;
        }
        entry.view()
    }
}
