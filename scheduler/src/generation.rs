//! Generations: one process-wide monotonic counter (kube-scheduler's `nextGeneration`)
//! stamped on a node each time its scheduling-relevant state changes — in the
//! [`crate::state::ClusterState`] (the Node object, the pods counted on it) or in the
//! [`crate::cache::TopologyCache`] (its NUMA view). A reader that has seen everything
//! up to generation `g` catches up by copying only the nodes stamped after `g`
//! ([`crate::snapshot::Snapshot`]).
//!
//! Stamps are taken while the stamping structure's write lock is held, and
//! [`current`] is read under its read lock, so a reader holding that lock has seen
//! every stamp up to what [`current`] returns, and every later stamp is greater.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

static LAST: AtomicU64 = AtomicU64::new(0);

/// A new generation, greater than every one handed out before.
pub fn next() -> u64 {
    LAST.fetch_add(1, Ordering::SeqCst) + 1
}

/// The latest generation handed out (0 before the first).
pub fn current() -> u64 {
    LAST.load(Ordering::SeqCst)
}

/// The generation of each node of one structure, indexed by generation too so that
/// "changed since `g`" costs only the changed nodes.
#[derive(Debug, Default, Clone)]
pub struct NodeGenerations {
    by_node: HashMap<String, u64>,
    by_generation: BTreeMap<u64, String>,
}

impl NodeGenerations {
    /// Stamps `node` with a new generation and returns it.
    pub fn bump(&mut self, node: &str) -> u64 {
        let generation = next();
        match self.by_node.get_mut(node) {
            Some(old) => {
                let name = self
                    .by_generation
                    .remove(old)
                    .unwrap_or_else(|| node.to_owned());
                *old = generation;
                self.by_generation.insert(generation, name);
            }
            None => {
                self.by_node.insert(node.to_owned(), generation);
                self.by_generation.insert(generation, node.to_owned());
            }
        }
        generation
    }

    /// Forgets `node` (it is gone, and its removal is signalled otherwise).
    pub fn forget(&mut self, node: &str) {
        if let Some(old) = self.by_node.remove(node) {
            self.by_generation.remove(&old);
        }
    }

    /// The node's generation (0 when never stamped).
    pub fn of(&self, node: &str) -> u64 {
        self.by_node.get(node).copied().unwrap_or(0)
    }

    /// The nodes stamped after `since`, oldest stamp first.
    pub fn changed_since(&self, since: u64) -> impl Iterator<Item = (u64, &str)> {
        self.by_generation
            .range(since.saturating_add(1)..)
            .map(|(g, n)| (*g, n.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nodes_stamped_after_a_generation_are_listed_once_each() {
        let mut g = NodeGenerations::default();
        g.bump("a");
        g.bump("b");
        let seen = current();
        assert_eq!(g.changed_since(seen).count(), 0);
        g.bump("a");
        g.bump("c");
        g.bump("a");
        let changed: Vec<&str> = g.changed_since(seen).map(|(_, n)| n).collect();
        assert_eq!(changed, ["c", "a"]);
        assert!(g.of("a") > g.of("c") && g.of("c") > seen);
        g.forget("a");
        assert_eq!(g.of("a"), 0);
        let changed: Vec<&str> = g.changed_since(seen).map(|(_, n)| n).collect();
        assert_eq!(changed, ["c"]);
    }
}
