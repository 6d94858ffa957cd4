//! ResourceSlices by name, indexed by pool and by the nodes they reach, and each
//! node's [`NodeDevices`] gathered from them.
//!
//! A node's devices are gathered again only when something they depend on changed: a
//! slice that reaches the node (`nodeName`), a cluster-wide slice (`allNodes`,
//! `nodeSelector`: every node), another slice of a pool the node sees (the pool's
//! completeness and generation are counted over all its slices), or the node's labels.
//! Nodes without any slice reaching them have no entry.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::dra::{NodeDevices, PcieRootZones, PoolId};

/// Which nodes a slice reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reach {
    /// One node, by name.
    Node(String),
    /// Any node (`allNodes`, or a node selector matched per node).
    ClusterWide,
    /// None the scheduler can use (`perDeviceNodeSelection`, or nothing set).
    Nowhere,
}

fn reach(slice: &ResourceSlice) -> Reach {
    let spec = &slice.spec;
    match spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        Some(node) => Reach::Node(node.to_owned()),
        None if spec.all_nodes == Some(true) || spec.node_selector.is_some() => Reach::ClusterWide,
        None => Reach::Nowhere,
    }
}

fn pool_of(slice: &ResourceSlice) -> PoolId {
    PoolId {
        driver: slice.spec.driver.clone(),
        pool: slice.spec.pool.name.clone(),
    }
}

/// Nodes whose devices must be gathered again.
enum Affected {
    Nodes(BTreeSet<String>),
    All,
}

impl Affected {
    fn add(&mut self, reach: Reach) {
        if let Self::Nodes(nodes) = self {
            match reach {
                Reach::Node(node) => {
                    nodes.insert(node);
                }
                Reach::ClusterWide => *self = Self::All,
                Reach::Nowhere => {}
            }
        }
    }
}

/// The slices and the devices they give each node.
#[derive(Debug, Default)]
pub(super) struct Slices {
    objects: HashMap<String, ResourceSlice>,
    by_pool: HashMap<PoolId, BTreeSet<String>>,
    node_local: HashMap<String, BTreeSet<String>>,
    cluster_wide: BTreeSet<String>,
    /// Every node's labels, as the node watch delivered them.
    labels: HashMap<String, BTreeMap<String, String>>,
    /// Node → its devices; copied on write so a decision's snapshot stays as it was.
    devices: Arc<HashMap<String, Arc<NodeDevices>>>,
}

impl Slices {
    /// Each node's devices, as of now.
    pub(super) fn devices(&self) -> Arc<HashMap<String, Arc<NodeDevices>>> {
        Arc::clone(&self.devices)
    }

    /// Whether any slice is known.
    pub(super) fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Adds or replaces a slice; returns whether anything changed.
    pub(super) fn upsert(&mut self, slice: ResourceSlice) -> bool {
        let name = slice.name_any();
        let mut affected = Affected::Nodes(BTreeSet::new());
        if let Some(old) = self.objects.get(&name) {
            if old.spec == slice.spec && old.metadata.generation == slice.metadata.generation {
                return false;
            }
            self.unindex(&name, &mut affected);
        }
        self.index(&name, &slice);
        self.objects.insert(name.clone(), slice);
        self.pool_members(&name, &mut affected);
        self.regather(affected);
        true
    }

    /// Forgets a slice.
    pub(super) fn remove(&mut self, name: &str) {
        let mut affected = Affected::Nodes(BTreeSet::new());
        if self.objects.contains_key(name) {
            self.unindex(name, &mut affected);
            self.objects.remove(name);
            self.regather(affected);
        }
    }

    /// Keeps the slices for which `keep(name)` holds.
    pub(super) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self.objects.keys().filter(|n| !keep(n)).cloned().collect();
        let mut affected = Affected::Nodes(BTreeSet::new());
        for name in &gone {
            self.unindex(name, &mut affected);
            self.objects.remove(name);
        }
        self.regather(affected);
    }

    /// A node's labels were seen (added or changed).
    pub(super) fn upsert_node(&mut self, name: &str, labels: BTreeMap<String, String>) {
        if self.labels.get(name) == Some(&labels) {
            return;
        }
        self.labels.insert(name.to_owned(), labels);
        self.regather(Affected::Nodes(BTreeSet::from([name.to_owned()])));
    }

    /// A node is gone.
    pub(super) fn remove_node(&mut self, name: &str) {
        self.labels.remove(name);
        if self.devices.contains_key(name) {
            Arc::make_mut(&mut self.devices).remove(name);
        }
    }

    /// Keeps the nodes for which `keep(name)` holds.
    pub(super) fn retain_nodes(&mut self, keep: impl Fn(&str) -> bool) {
        self.labels.retain(|n, _| keep(n));
        if self.devices.keys().any(|n| !keep(n)) {
            Arc::make_mut(&mut self.devices).retain(|n, _| keep(n));
        }
    }

    fn index(&mut self, name: &str, slice: &ResourceSlice) {
        self.by_pool
            .entry(pool_of(slice))
            .or_default()
            .insert(name.to_owned());
        match reach(slice) {
            Reach::Node(node) => {
                self.node_local
                    .entry(node)
                    .or_default()
                    .insert(name.to_owned());
            }
            Reach::ClusterWide => {
                self.cluster_wide.insert(name.to_owned());
            }
            Reach::Nowhere => {}
        }
    }

    /// Takes slice `name` out of the indexes, noting the nodes it and its pool reached.
    fn unindex(&mut self, name: &str, affected: &mut Affected) {
        let Some(slice) = self.objects.get(name) else {
            return;
        };
        self.pool_members(name, affected);
        let pool = pool_of(slice);
        let reach = reach(slice);
        if let Some(members) = self.by_pool.get_mut(&pool) {
            members.remove(name);
            if members.is_empty() {
                self.by_pool.remove(&pool);
            }
        }
        match reach {
            Reach::Node(node) => {
                if let Some(names) = self.node_local.get_mut(&node) {
                    names.remove(name);
                    if names.is_empty() {
                        self.node_local.remove(&node);
                    }
                }
            }
            Reach::ClusterWide => {
                self.cluster_wide.remove(name);
            }
            Reach::Nowhere => {}
        }
    }

    /// Notes the nodes reached by any slice of `name`'s pool (itself included).
    fn pool_members(&self, name: &str, affected: &mut Affected) {
        let Some(slice) = self.objects.get(name) else {
            return;
        };
        affected.add(reach(slice));
        for member in self.by_pool.get(&pool_of(slice)).into_iter().flatten() {
            if let Some(other) = self.objects.get(member) {
                affected.add(reach(other));
            }
        }
    }

    fn regather(&mut self, affected: Affected) {
        let nodes: Vec<String> = match affected {
            Affected::All => self.labels.keys().cloned().collect(),
            Affected::Nodes(nodes) => nodes.into_iter().collect(),
        };
        if nodes.is_empty() {
            return;
        }
        let gathered: Vec<(String, Option<NodeDevices>)> = nodes
            .into_iter()
            .map(|node| {
                let devices = gather(self, &node);
                (node, devices)
            })
            .collect();
        let devices = Arc::make_mut(&mut self.devices);
        for (node, found) in gathered {
            match found {
                Some(found) => {
                    for warning in found.warnings() {
                        tracing::warn!(node = %node, %warning, "DRA devices");
                    }
                    devices.insert(node, Arc::new(found));
                }
                None => {
                    devices.remove(&node);
                }
            }
        }
    }
}

/// The devices of `node`, or `None` when the node is unknown or no slice reaches it.
fn gather(slices: &Slices, node: &str) -> Option<NodeDevices> {
    let labels = slices.labels.get(node)?;
    let reaching = slices
        .node_local
        .get(node)
        .into_iter()
        .flatten()
        .chain(&slices.cluster_wide);
    let pools: BTreeSet<PoolId> = reaching
        .filter_map(|name| slices.objects.get(name))
        .map(pool_of)
        .collect();
    if pools.is_empty() {
        return None;
    }
    let members = pools
        .iter()
        .flat_map(|p| slices.by_pool.get(p).into_iter().flatten())
        .filter_map(|name| slices.objects.get(name));
    let object = Node {
        metadata: ObjectMeta {
            name: Some(node.to_owned()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    // The node agent does not publish PCIe roots yet: devices that only name their
    // root have unknown zones.
    Some(NodeDevices::gather(&object, members, &PcieRootZones::new()))
}
