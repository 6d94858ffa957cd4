//! The cluster as decisions see it: a [`Snapshot`] the scheduling loop keeps from one
//! decision to the next (kube-scheduler's `Cache.UpdateSnapshot`). Per node it holds
//! the node with its pods (an `Arc` shared with the [`crate::state::ClusterState`]) and
//! its topology view resolved from the [`crate::cache`], in the state's name order (the
//! sampling walk's rotating start depends on a stable order).
//!
//! Before each decision [`Snapshot::update`] takes the state's and the cache's read
//! locks once and copies in only the nodes stamped with a [`crate::generation`] newer
//! than the one it last saw; a node added or removed (or a cache entry removed) makes
//! it rebuild its list, reusing the shared nodes. The filters and scores then read the
//! snapshot without any lock.
//!
//! On top of it, per decision, the room that nominated pods of at least the decided
//! pod's priority hold is added in (see [`crate::preempt::nominated`]): their requests
//! on a copy of the node, their NUMA footprint on every zone of a copy of the view.
//! Only the nodes with such nominations are copied.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::cache::Views;
use crate::cycle::{ClusterView, PodInput, TopologyView};
use crate::filter::{NodeInfo, PodUsage};
use crate::shared::Shared;

/// A node as the snapshot holds it.
#[derive(Debug, Clone)]
struct NodeRecord {
    /// The node and its pods, shared with the cluster state until either changes it.
    info: Arc<NodeInfo>,
    /// Its topology view, resolved (an NRT of an earlier Node object of this name
    /// counts as none).
    view: TopologyView,
    /// The generation the record was copied at.
    generation: u64,
}

/// The persistent snapshot; see the module documentation.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Ordered by node name.
    nodes: Vec<NodeRecord>,
    /// Node name → position in `nodes` (looked up once per node per decision).
    index: HashMap<String, usize, BuildHasherDefault<NameHasher>>,
    /// Every change of the cluster state up to this generation is in.
    state_seen: u64,
    /// Every change of the cache up to this generation is in.
    cache_seen: u64,
}

/// What one [`Snapshot::update`] copied in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Update {
    /// The node list was rebuilt (a node was added or removed).
    pub rebuilt: bool,
    /// Nodes whose object or pods were copied in again.
    pub nodes: usize,
    /// Nodes whose topology view was read again.
    pub views: usize,
}

impl Snapshot {
    /// An empty snapshot: the first [`Self::update`] reads every node.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether there is no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The generation node `name` was last copied in at, if it is in the snapshot.
    pub fn generation_of(&self, name: &str) -> Option<u64> {
        self.index.get(name).map(|&i| self.nodes[i].generation)
    }

    /// Copies in what changed in `shared` since the last update.
    pub fn update(&mut self, shared: &Shared) -> Update {
        let state = shared.state.read();
        // Under the state lock: every change of the state up to it is visible.
        let state_now = crate::generation::current();
        let views = shared.cache.views();
        let in_group = |info: &NodeInfo| shared.settings.in_node_group(info.labels());
        let resolve = |info: &NodeInfo| resolve(&views, info, in_group(info));
        let mut done = Update::default();
        let mut reread: Vec<usize> = Vec::new();
        if state.membership() > self.state_seen || self.state_seen == 0 {
            // Nodes were added or removed: the list again, in the state's order, each
            // record kept when the state still shares its node.
            let old = std::mem::take(&mut self.nodes);
            let old_index = std::mem::take(&mut self.index);
            self.index.reserve(state.node_count());
            for (i, (info, _)) in state.nodes_shared().enumerate() {
                let kept = old_index
                    .get(info.name())
                    .map(|&j| &old[j])
                    .filter(|r| Arc::ptr_eq(&r.info, info));
                let record = match kept {
                    Some(r) => r.clone(),
                    None => {
                        reread.push(i);
                        NodeRecord {
                            info: info.clone(),
                            view: TopologyView::Missing,
                            generation: state_now,
                        }
                    }
                };
                self.index.insert(info.name().to_owned(), i);
                self.nodes.push(record);
            }
            done.rebuilt = true;
        } else {
            for (_, name) in state.changed_since(self.state_seen) {
                let (Some(&i), Some((info, _))) = (self.index.get(name), state.node_shared(name))
                else {
                    continue;
                };
                let record = &mut self.nodes[i];
                record.info = info.clone();
                record.generation = state_now;
                reread.push(i);
            }
        }
        done.nodes = reread.len();
        match views.changed_since(self.cache_seen) {
            Some(names) => reread.extend(names.filter_map(|n| self.index.get(n).copied())),
            None => reread = (0..self.nodes.len()).collect(),
        }
        reread.sort_unstable();
        reread.dedup();
        for &i in &reread {
            let record = &mut self.nodes[i];
            record.view = resolve(&record.info);
            record.generation = state_now;
        }
        done.views = reread.len();
        self.state_seen = state_now;
        self.cache_seen = views.generation();
        done
    }

    /// Updates the snapshot, then runs `f` on it for deciding about `pod`, with the
    /// room held by nominated pods added in (see the module documentation).
    pub fn with<T>(
        &mut self,
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
        self.update(shared);
        let this = &*self;
        let adjusted: Vec<(usize, NodeInfo)> = held
            .iter()
            .filter_map(|(name, pods)| {
                let i = *this.index.get(name)?;
                let mut node = NodeInfo::clone(&this.nodes[i].info);
                for (uid, usage) in pods {
                    if !node.contains_pod(uid) {
                        node.add_usage(uid, usage.clone());
                    }
                }
                Some((i, node))
            })
            .collect();
        let mut nodes: Vec<&NodeInfo> = this.nodes.iter().map(|r| &*r.info).collect();
        for (i, node) in &adjusted {
            nodes[*i] = node;
        }
        let lookup = |name: &str| -> TopologyView {
            let Some(&i) = this.index.get(name) else {
                return TopologyView::Missing;
            };
            let view = this.nodes[i].view.clone();
            match (view, held.get(name)) {
                (TopologyView::Known(mut topology), Some(pods)) => {
                    let t = Arc::make_mut(&mut topology);
                    for (_, usage) in pods {
                        t.reserve_on_every_zone(&usage.meta.footprint);
                    }
                    TopologyView::Known(topology)
                }
                (view, _) => view,
            }
        };
        let namespaces = shared.namespaces.read();
        let cluster = ClusterView {
            nodes: &nodes,
            namespaces: &namespaces,
        };
        f(&cluster, &lookup)
    }
}

/// The view decisions use for `info`: what the cache has for it, or why none.
fn resolve(views: &Views<'_>, info: &NodeInfo, in_node_group: bool) -> TopologyView {
    match views.view_for(info.name(), info.uid()) {
        None if in_node_group => TopologyView::Unpublished,
        None => TopologyView::Missing,
        Some(Ok(view)) => TopologyView::Known(view),
        Some(Err(e)) => TopologyView::Invalid(e),
    }
}

/// FxHash (as in rustc): node names are short and not chosen to collide, and
/// SipHash's resistance costs more than the rest of a lookup.
#[derive(Default, Clone, Copy)]
pub struct NameHasher(u64);

impl NameHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Runs `f` on a snapshot taken for this call alone (every node read), for deciding
/// about `pod`; the scheduling loop keeps a [`Snapshot`] instead.
pub fn with_snapshot<T>(
    shared: &Shared,
    pod: &PodInput,
    f: impl FnOnce(&ClusterView<'_>, &(dyn Fn(&str) -> TopologyView + Sync)) -> T,
) -> T {
    Snapshot::new().with(shared, pod, f)
}

#[cfg(test)]
mod tests;
