//! ResourceSlices → the pools and devices one node can use, as kube-scheduler sees
//! them.
//!
//! Only the slices that reach the node count: `nodeName` equal to the node's name,
//! `nodeSelector` selecting the node's labels or `metadata.name`, or `allNodes`.
//! They are grouped by (driver, pool name); of each pool the slices of the highest
//! `pool.generation` among them count. The pool is incomplete when their number
//! differs from their `resourceSliceCount` (a driver updating it, or slices of the
//! pool reaching other nodes), and invalid when two of them name the same device.
//! Devices of incomplete pools are allocated as if the pool were complete, except by
//! `allocationMode: All`, which fails on a node with an incomplete or invalid pool;
//! devices of invalid pools are never allocated.
//!
//! Pools are sorted by driver then pool name, slices within a pool by name, devices
//! in slice order: that is the order the search tries them in. Each device gets its
//! CEL value and its NUMA zones once, here.
//!
//! Slices with `perDeviceNodeSelection` are not supported: they are skipped with a
//! warning. Devices that consume shared counters (partitionable devices) or carry
//! binding conditions are shown by the inventory but never allocated; the selectors
//! of the former are still evaluated, as kube-scheduler does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use k8s_openapi::api::core::v1::{Node, NodeSelector};
use k8s_openapi::api::resource::v1::{Device as ApiDevice, ResourceSlice};

use super::DeviceId;
use super::cel::DeviceValue;
use super::error::Warning;
use super::topology::{self, PcieRootZones, Zones};
use crate::filter::node_selector::Term;

/// A pool's identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PoolId {
    pub driver: String,
    pub pool: String,
}

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.driver, self.pool)
    }
}

/// Whether a pool's devices can be allocated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolState {
    Usable,
    /// Not all slices of the current generation reach the node (the driver is
    /// updating the pool, or some of its slices are for other nodes): its devices
    /// serve `ExactCount` requests, and no `All` request can be allocated on the node.
    Incomplete {
        slices: usize,
        expected: i64,
    },
    /// The pool's slices contradict each other: its devices are never allocated.
    Invalid {
        reason: String,
    },
}

/// A pool visible to the node.
#[derive(Debug, Clone)]
pub struct Pool {
    pub id: PoolId,
    pub generation: i64,
    pub state: PoolState,
}

impl Pool {
    /// What is wrong with the pool, for a human; `None` if nothing is.
    pub fn problem(&self) -> Option<String> {
        match &self.state {
            PoolState::Usable => None,
            PoolState::Incomplete { slices, expected } => Some(format!(
                "resource pool {} is incomplete ({slices} of {expected} slices of generation {} reach the node)",
                self.id, self.generation
            )),
            PoolState::Invalid { reason } => {
                Some(format!("resource pool {} is invalid: {reason}", self.id))
            }
        }
    }
}

/// How a slice reaches nodes, which the allocation's node selector repeats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reach {
    Node(String),
    Selector(NodeSelector),
    AllNodes,
}

/// One device of a visible pool.
#[derive(Debug, Clone)]
pub(crate) struct Device {
    pub id: DeviceId,
    /// Index into [`NodeDevices::pools`].
    pub pool: usize,
    pub reach: Reach,
    pub api: ApiDevice,
    /// `None`: unknown (no zone attribute, or a malformed one).
    pub zones: Option<Zones>,
    pub tainted: bool,
    /// The device's `device` for selectors; `None` when it has binding conditions
    /// or cannot be shown to selectors (kube-scheduler never evaluates those).
    pub value: Option<DeviceValue>,
    /// Why the device is never allocated, if it is not.
    pub excluded: Option<String>,
}

/// The devices one node can see, gathered once per node and snapshot.
#[derive(Debug, Clone)]
pub struct NodeDevices {
    node: String,
    labels: BTreeMap<String, String>,
    pub(crate) pools: Vec<Pool>,
    pub(crate) devices: Vec<Device>,
    index: HashMap<DeviceId, usize>,
    warnings: Vec<Warning>,
}

impl NodeDevices {
    /// Gathers the pools of `slices` (all the cluster's, or at least all of every pool
    /// that targets the node) visible to `node`; `pcie_roots` maps the node's PCIe
    /// roots to its NUMA zones.
    pub fn gather<'a>(
        node: &Node,
        slices: impl IntoIterator<Item = &'a ResourceSlice>,
        pcie_roots: &PcieRootZones,
    ) -> Self {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let mut gathered = Self {
            node: name,
            labels: labels.clone(),
            pools: Vec::new(),
            devices: Vec::new(),
            index: HashMap::new(),
            warnings: Vec::new(),
        };
        let mut by_pool: BTreeMap<PoolId, Vec<&ResourceSlice>> = BTreeMap::new();
        for slice in slices {
            let id = PoolId {
                driver: slice.spec.driver.clone(),
                pool: slice.spec.pool.name.clone(),
            };
            by_pool.entry(id).or_default().push(slice);
        }
        for (id, slices) in by_pool {
            gathered.add_pool(id, slices, &labels, pcie_roots);
        }
        gathered
    }

    fn add_pool(
        &mut self,
        id: PoolId,
        slices: Vec<&ResourceSlice>,
        labels: &BTreeMap<String, String>,
        pcie_roots: &PcieRootZones,
    ) {
        let visible: Vec<(&ResourceSlice, Reach)> = slices
            .into_iter()
            .filter_map(|slice| self.reach(slice, labels).map(|reach| (slice, reach)))
            .collect();
        let Some(generation) = visible.iter().map(|(s, _)| s.spec.pool.generation).max() else {
            return;
        };
        let mut current: Vec<(&ResourceSlice, Reach)> = visible
            .into_iter()
            .filter(|(s, _)| s.spec.pool.generation == generation)
            .collect();
        current.sort_by(|(a, _), (b, _)| a.metadata.name.cmp(&b.metadata.name));
        let expected = current[0].0.spec.pool.resource_slice_count;
        let state = match duplicate_device(current.iter().map(|(s, _)| *s)) {
            Some(name) => PoolState::Invalid {
                reason: format!("duplicate device name {name}"),
            },
            None if i64::try_from(current.len()).ok() != Some(expected) => PoolState::Incomplete {
                slices: current.len(),
                expected,
            },
            None => PoolState::Usable,
        };
        let pool = self.pools.len();
        self.pools.push(Pool {
            id: id.clone(),
            generation,
            state,
        });
        for (slice, reach) in current {
            for api in slice.spec.devices.iter().flatten() {
                let device = self.device(&id, pool, slice, reach.clone(), api, pcie_roots);
                self.index
                    .entry(device.id.clone())
                    .or_insert(self.devices.len());
                self.devices.push(device);
            }
        }
    }

    /// How `slice` reaches this node, or `None` if it does not.
    fn reach(&mut self, slice: &ResourceSlice, labels: &BTreeMap<String, String>) -> Option<Reach> {
        let spec = &slice.spec;
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            return (node == self.node).then(|| Reach::Node(node.to_owned()));
        }
        if spec.all_nodes == Some(true) {
            return Some(Reach::AllNodes);
        }
        if let Some(selector) = &spec.node_selector {
            let mut selected = false;
            for (index, term) in selector.node_selector_terms.iter().enumerate() {
                match Term::parse(index, term) {
                    Ok(Some(term)) => selected |= term.matches(labels, &self.node),
                    Ok(None) => {}
                    Err(e) => self.warn(
                        &slice_name,
                        None,
                        format!("node selector {e}: term ignored"),
                    ),
                }
            }
            return selected.then(|| Reach::Selector(selector.clone()));
        }
        if spec.per_device_node_selection == Some(true) {
            self.warn(
                &slice_name,
                None,
                "perDeviceNodeSelection is not supported by TAS yet: slice ignored".to_owned(),
            );
        }
        None
    }

    fn device(
        &mut self,
        pool_id: &PoolId,
        pool: usize,
        slice: &ResourceSlice,
        reach: Reach,
        api: &ApiDevice,
        pcie_roots: &PcieRootZones,
    ) -> Device {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        let driver = &pool_id.driver;
        let attributes = api.attributes.clone().unwrap_or_default();
        let zones = match topology::device_zones(driver, &attributes, pcie_roots) {
            Ok(zones) => zones,
            Err(e) => {
                self.warn(
                    &slice_name,
                    Some(&api.name),
                    format!("{e}: NUMA zones unknown"),
                );
                None
            }
        };
        let tainted = api
            .taints
            .iter()
            .flatten()
            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute");
        let mut excluded = None;
        let mut selectable = true;
        if api
            .consumes_counters
            .as_ref()
            .is_some_and(|c| !c.is_empty())
        {
            excluded = Some(
                "consumes shared counters (partitionable devices are not supported by TAS yet)"
                    .to_owned(),
            );
        } else if api
            .binding_conditions
            .as_ref()
            .is_some_and(|c| !c.is_empty())
        {
            excluded = Some("has binding conditions (not supported by TAS yet)".to_owned());
            selectable = false;
        }
        let value = match DeviceValue::build(
            driver,
            &attributes,
            &api.capacity.clone().unwrap_or_default(),
            api.allow_multiple_allocations.unwrap_or(false),
        ) {
            Ok(value) => selectable.then_some(value),
            Err(e) => {
                let message = format!("{e}: device not used");
                self.warn(&slice_name, Some(&api.name), message.clone());
                excluded = Some(message);
                None
            }
        };
        Device {
            id: DeviceId::new(driver, &pool_id.pool, &api.name),
            pool,
            reach,
            api: api.clone(),
            zones,
            tainted,
            value,
            excluded,
        }
    }

    fn warn(&mut self, slice: &str, device: Option<&str>, message: String) {
        self.warnings.push(Warning {
            slice: slice.to_owned(),
            device: device.map(str::to_owned),
            message,
        });
    }

    /// The node's name.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// Whether a node selector (terms ORed) selects this node.
    pub fn selected_by(&self, selector: &NodeSelector) -> bool {
        selector.node_selector_terms.iter().enumerate().any(|(index, term)| {
            matches!(Term::parse(index, term), Ok(Some(term)) if term.matches(&self.labels, &self.node))
        })
    }

    /// The pools visible to the node, in search order.
    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// What was wrong in the slices (malformed zone attributes, unsupported slices).
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The NUMA zones of a device visible to the node (`None`: unknown or not here).
    pub fn zones(&self, id: &DeviceId) -> Option<&Zones> {
        self.index
            .get(id)
            .and_then(|&i| self.devices[i].zones.as_ref())
    }

    /// Index of a device in [`Self::devices`].
    pub(crate) fn position(&self, id: &DeviceId) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Whether the devices of pool `pool` may be allocated (by `ExactCount`; `All`
    /// also needs every pool of the node complete).
    pub(crate) fn pool_is_usable(&self, pool: usize) -> bool {
        !matches!(self.pools[pool].state, PoolState::Invalid { .. })
    }
}

/// The first device name that appears twice in a pool's current slices.
fn duplicate_device<'a>(slices: impl Iterator<Item = &'a ResourceSlice>) -> Option<String> {
    let mut seen = BTreeSet::new();
    slices
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| !seen.insert(d.name.as_str()))
        .map(|d| d.name.clone())
}
