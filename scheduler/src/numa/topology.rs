//! [`NodeTopology`]: one node's NRT object, precomputed for fast fits.
//!
//! Built once per NRT update and then read by every fit and score of every pod, so
//! everything request-independent is done here: zones sorted by NUMA id, resource names
//! interned and indexed, quantities parsed to integers in flat zone-major arrays, the
//! per-resource "largest total of any k zones" table the minimum-width rule needs, and
//! the NUMA distance matrix.
//!
//! What counts as a zone's *total* follows the kubelet hint provider that owns the
//! resource: the CPU manager and the device manager count every CPU / device of the
//! NUMA node (NRT `capacity`, reserved CPUs and unhealthy devices included), the memory
//! manager counts allocatable memory and hugepages (NRT `allocatable`).

use std::collections::BTreeSet;
use std::sync::Arc;

use tas_api::nrt::memory_groups::{MEMORY_MANAGER_GROUP, format_group};
use tas_api::nrt::numa_placement::{Payload, PlacementError};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::nrt::{
    AttributeError, NrtQuantity, ResourceManagersConfig, TopologyManagerConfig,
    TopologyManagerPolicy, TopologyManagerScope, ZoneError, zone_numa_id,
};

use super::NumaSet;
use super::cpu_reuse::CpuOrder;
use super::request::QuantityProblem;
use super::resources::{ResourceAmount, ResourceId, ResourceKind, Resources};
use super::sanity::{self, SanityProblem};

/// Largest NUMA id the kubelet's 64-bit NUMA bitmask can hold.
pub const MAX_NUMA_ID: u32 = 63;
/// NUMA distance assumed when an NRT object has no cost entry: local and remote.
const DEFAULT_LOCAL_DISTANCE: u32 = 10;
const DEFAULT_REMOTE_DISTANCE: u32 = 20;

/// An NRT object that cannot be turned into a [`NodeTopology`]. Every variant names the
/// node and the offending field; all are permanent until the object changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A Topology Manager attribute (or `topologyPolicies[0]`) has an unknown value.
    #[error("node {node:?}: {source}")]
    Config {
        /// Node name.
        node: String,
        /// The attribute problem.
        source: AttributeError,
    },
    /// A `Node` zone's name is not `node-<NUMA id>`.
    #[error("node {node:?}: {source}")]
    ZoneName {
        /// Node name.
        node: String,
        /// The naming problem.
        source: ZoneError,
    },
    /// Two zones carry the same NUMA id.
    #[error("node {node:?}: NUMA zone {zone:?} is listed twice")]
    DuplicateZone {
        /// Node name.
        node: String,
        /// Zone name.
        zone: String,
    },
    /// A NUMA id the kubelet cannot represent.
    #[error("node {node:?}: NUMA zone {zone:?}: ids above {MAX_NUMA_ID} are not supported")]
    NumaIdOutOfRange {
        /// Node name.
        node: String,
        /// Zone name.
        zone: String,
    },
    /// A resource amount that does not parse or is negative.
    #[error("node {node:?}: zone {zone:?}: resource {resource:?} {field}: {problem}")]
    Quantity {
        /// Node name.
        node: String,
        /// Zone name.
        zone: String,
        /// Resource name.
        resource: String,
        /// `capacity`, `allocatable` or `available`.
        field: &'static str,
        /// What is wrong with it (boxed to keep the error small).
        problem: Box<QuantityProblem>,
    },
    /// The object fails a sanity check ([`super::sanity`]): it is not believed.
    #[error("node {node:?}: {source}")]
    Insane {
        /// Node name.
        node: String,
        /// The failed check (boxed to keep the error small).
        source: Box<SanityProblem>,
    },
}

impl TopologyError {
    /// A short, stable code for metrics labels.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Config { .. } => "config",
            Self::ZoneName { .. } => "zone_name",
            Self::DuplicateZone { .. } => "duplicate_zone",
            Self::NumaIdOutOfRange { .. } => "numa_id_out_of_range",
            Self::Quantity { .. } => "quantity",
            Self::Insane { source, .. } => source.code(),
        }
    }
}

/// Resource ids below this are looked up in [`NodeTopology`]'s inline table.
const ID_SLOTS: usize = 32;
/// In the inline table: the node reports no such resource.
const ABSENT: u8 = u8::MAX;
/// In the inline table: the node's index does not fit a byte; look the name up.
const BY_NAME: u8 = u8::MAX - 1;

/// A resource some zone of the node reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeResource {
    pub(crate) name: Arc<str>,
    pub(crate) kind: ResourceKind,
    pub(crate) id: ResourceId,
    /// Zone-index mask of the zones that list it.
    pub(crate) listed: u64,
}

/// One node's NUMA zones, precomputed; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTopology {
    name: String,
    config: TopologyManagerConfig,
    /// CPU manager `static`: Guaranteed pods' whole CPUs are exclusive and aligned.
    static_cpus: bool,
    /// Memory manager `Static`: Guaranteed pods' memory and hugepages are pinned.
    static_memory: bool,
    /// Topology Manager option `prefer-closest-numa-nodes` (never for
    /// `single-numa-node`, which ignores it).
    prefer_closest: bool,
    /// NUMA id per zone index, ascending.
    ids: Vec<u32>,
    /// Sorted by name; position = resource index.
    resources: Vec<NodeResource>,
    /// Resource index by [`ResourceId`] for ids below [`ID_SLOTS`] ([`ABSENT`],
    /// [`BY_NAME`]): a pod's resources are found without comparing names.
    by_id: [u8; ID_SLOTS],
    /// Bit `ri` set: resource `ri` is memory or hugepages (for `ri < 64`).
    memory_resources: u64,
    /// Zone-major free amounts: `[zone * resources.len() + resource]`; 0 where not
    /// listed. The only table reservations change.
    available: Vec<i64>,
    /// Every request-independent table in one allocation, so judging a node touches a
    /// few adjacent cache lines: see [`Fixed`].
    fixed: Vec<i64>,
    /// `[from * zones + to]`, by zone index.
    distances: Vec<u32>,
    /// The containers' NUMA placement the object publishes
    /// ([`tas_api::nrt::numa_placement`]), as read: `None` when it has none.
    placement: Option<Arc<Result<Payload, PlacementError>>>,
    /// The object's free CPUs already leave out those regular init containers keep
    /// ([`tas_api::nrt::init_cpus`]).
    init_cpus_counted: bool,
    /// The minor of the node's kubelet, when the object names it (`kubeletVersion`).
    kubelet_minor: Option<u32>,
    /// The CPU manager's order of taking CPUs within a zone, as far as the object's
    /// CPU layout tells ([`super::cpu_reuse`]).
    cpu_order: CpuOrder,
    /// Zone-index mask of the zones whose memory manager group is doubted
    /// ([`super::memory_doubt`]).
    doubted_memory: u64,
}

/// Where the tables of [`NodeTopology::fixed`] start, in the order a fit reads them:
/// - `best_total` `[resource * (zones + 1) + k]`: the largest `hint_total` sum of any
///   `k` zones;
/// - `hint_total`, zone-major: the total the owning hint provider counts (see the
///   module documentation);
/// - `allocatable`, zone-major;
/// - `memory_groups` per zone index: the zone-index mask of its memory manager group
///   as the zone's `memoryManagerGroup` attribute publishes it (its own bit for
///   single-zone allocations), 0 when the zone has none (stored as `i64` bits);
/// - `capacity`, zone-major.
#[derive(Debug, Clone, Copy)]
struct Fixed {
    hint_total: usize,
    allocatable: usize,
    memory_groups: usize,
    capacity: usize,
    end: usize,
}

impl Fixed {
    fn new(zones: usize, resources: usize) -> Self {
        let table = zones * resources;
        let hint_total = resources * (zones + 1);
        let allocatable = hint_total + table;
        let memory_groups = allocatable + table;
        let capacity = memory_groups + zones;
        Self {
            hint_total,
            allocatable,
            memory_groups,
            capacity,
            end: capacity + table,
        }
    }
}

impl NodeTopology {
    /// Reads `nrt`: Topology Manager configuration, `Node` zones, amounts and costs.
    pub fn from_nrt(nrt: &NodeResourceTopology) -> Result<Self, TopologyError> {
        let node = nrt.metadata.name.clone().unwrap_or_default();
        sanity::check(nrt).map_err(|source| TopologyError::Insane {
            node: node.clone(),
            source: Box::new(source),
        })?;
        let config =
            TopologyManagerConfig::from_nrt(nrt).map_err(|source| TopologyError::Config {
                node: node.clone(),
                source,
            })?;
        let managers =
            ResourceManagersConfig::from_nrt(nrt).map_err(|source| TopologyError::Config {
                node: node.clone(),
                source,
            })?;
        let zones = nrt.numa_zones().map_err(|source| TopologyError::ZoneName {
            node: node.clone(),
            source,
        })?;
        for (i, &(id, zone)) in zones.iter().enumerate() {
            if id > MAX_NUMA_ID {
                return Err(TopologyError::NumaIdOutOfRange {
                    node,
                    zone: zone.name.clone(),
                });
            }
            if i > 0 && zones[i - 1].0 == id {
                return Err(TopologyError::DuplicateZone {
                    node,
                    zone: zone.name.clone(),
                });
            }
        }
        let ids: Vec<u32> = zones.iter().map(|&(id, _)| id).collect();
        let n = ids.len();

        let names: BTreeSet<&str> = zones
            .iter()
            .flat_map(|(_, z)| z.resources.iter().map(|r| r.name.as_str()))
            .collect();
        let mut resources: Vec<NodeResource> = names
            .into_iter()
            .map(|name| NodeResource {
                name: Arc::from(name),
                kind: ResourceKind::of(name),
                id: ResourceId::of(name),
                listed: 0,
            })
            .collect();
        let nres = resources.len();
        let mut by_id = [ABSENT; ID_SLOTS];
        for (ri, r) in resources.iter().enumerate() {
            if let Some(slot) = by_id.get_mut(r.id.index()) {
                *slot = u8::try_from(ri)
                    .ok()
                    .filter(|&i| i < BY_NAME)
                    .unwrap_or(BY_NAME);
            }
        }

        let mut available = vec![0; n * nres];
        let mut allocatable = vec![0; n * nres];
        let mut capacity = vec![0; n * nres];
        for (zi, (_, zone)) in zones.iter().enumerate() {
            for (ri, resource) in resources.iter_mut().enumerate() {
                // The first entry wins, as with `Zone::resource`.
                let Some(info) = zone.resource(&resource.name) else {
                    continue;
                };
                resource.listed |= 1 << zi;
                let parse = |field, q: &NrtQuantity| {
                    parse_amount(resource.kind, q).map_err(|problem| TopologyError::Quantity {
                        node: node.clone(),
                        zone: zone.name.clone(),
                        resource: info.name.clone(),
                        field,
                        problem: Box::new(problem),
                    })
                };
                let at = zi * nres + ri;
                available[at] = parse("available", &info.available)?;
                allocatable[at] = parse("allocatable", &info.allocatable)?;
                capacity[at] = parse("capacity", &info.capacity)?;
            }
        }

        let layout = Fixed::new(n, nres);
        let mut fixed = Vec::with_capacity(layout.end);
        let hint_total: Vec<i64> = (0..n * nres)
            .map(|at| match resources[at % nres].kind {
                ResourceKind::Cpu | ResourceKind::Device => capacity[at].max(allocatable[at]),
                _ => allocatable[at],
            })
            .collect();
        let best_total = &mut fixed;
        for ri in 0..nres {
            let mut totals: Vec<i64> = (0..n).map(|zi| hint_total[zi * nres + ri]).collect();
            totals.sort_unstable_by(|a, b| b.cmp(a));
            best_total.push(0);
            let mut sum = 0i64;
            for t in totals {
                sum = sum.saturating_add(t);
                best_total.push(sum);
            }
        }

        let mut distances = vec![DEFAULT_REMOTE_DISTANCE; n * n];
        for (from, (_, zone)) in zones.iter().enumerate() {
            distances[from * n + from] = DEFAULT_LOCAL_DISTANCE;
            for cost in &zone.costs {
                let to = zone_numa_id(&cost.name)
                    .ok()
                    .and_then(|id| ids.binary_search(&id).ok());
                if let (Some(to), Ok(value)) = (to, u32::try_from(cost.value)) {
                    distances[from * n + to] = value;
                }
            }
        }

        let mut memory_groups = vec![0u64; n];
        debug_assert_eq!(fixed.len(), layout.hint_total);
        fixed.extend_from_slice(&hint_total);
        fixed.extend_from_slice(&allocatable);
        for (zi, (_, zone)) in zones.iter().enumerate() {
            let group = zone
                .memory_manager_group()
                .map_err(|source| TopologyError::Config {
                    node: node.clone(),
                    source,
                })?;
            for id in group.into_iter().flatten() {
                let other = ids.binary_search(&id).map_err(|_| TopologyError::Config {
                    node: node.clone(),
                    source: AttributeError::UnknownValue {
                        attribute: MEMORY_MANAGER_GROUP,
                        value: format_group(&[id]),
                        expected: "the names of zones of the object",
                    },
                })?;
                memory_groups[zi] |= 1 << other;
            }
        }

        fixed.extend(memory_groups.iter().map(|&m| m as i64));
        fixed.extend_from_slice(&capacity);
        debug_assert_eq!(fixed.len(), layout.end);
        let memory_resources = resources
            .iter()
            .enumerate()
            .filter(|(ri, r)| *ri < 64 && r.kind.is_memory())
            .fold(0u64, |acc, (ri, _)| acc | 1 << ri);

        Ok(Self {
            name: node,
            config,
            static_cpus: managers.static_cpus(),
            static_memory: managers.static_memory(),
            prefer_closest: managers.prefer_closest_numa_nodes()
                && config.policy != TopologyManagerPolicy::SingleNumaNode,
            ids,
            resources,
            by_id,
            memory_resources,
            available,
            fixed,
            distances,
            placement: Payload::from_nrt(nrt).map(Arc::new),
            init_cpus_counted: tas_api::nrt::init_cpus::counted(nrt),
            kubelet_minor: nrt.kubelet_minor(),
            cpu_order: CpuOrder::from_nrt(nrt, &managers),
            doubted_memory: 0,
        })
    }

    /// The CPU manager's order of taking CPUs within a zone, as far as the object's
    /// CPU layout tells.
    pub(crate) fn cpu_order(&self) -> CpuOrder {
        self.cpu_order
    }

    /// The minor of the node's kubelet, when its object names it.
    pub fn kubelet_minor(&self) -> Option<u32> {
        self.kubelet_minor
    }

    /// Zone-index mask of the zones the device manager builds hints of device resource
    /// `resource` (index) over: from kubelet 1.36 on, only the zones holding a device
    /// of it (every zone when none does); before, and when the object does not name
    /// its kubelet, every zone.
    pub(crate) fn device_hint_zones(&self, resource: usize) -> u64 {
        let n = self.zone_count();
        let all = if n >= 64 { u64::MAX } else { (1u64 << n) - 1 };
        if self.kubelet_minor.is_none_or(|minor| minor < 36) {
            return all;
        }
        let holding = (0..n)
            .filter(|&z| self.hint_total(z, resource) > 0)
            .fold(0u64, |acc, z| acc | 1 << z);
        if holding == 0 { all } else { holding }
    }

    /// Whether the object's free CPUs already leave out the CPUs regular init
    /// containers keep (its writer saw the CPU manager's shared pool): the scheduler's
    /// own prediction of them ([`super::init_holdings`]) is then not taken off again.
    pub fn counts_init_cpus(&self) -> bool {
        self.init_cpus_counted
    }

    /// The containers' NUMA placement the object publishes, if any (an error when it
    /// is malformed).
    pub fn placement(&self) -> Option<&Result<Payload, PlacementError>> {
        self.placement.as_deref()
    }

    /// The node name (the NRT object's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's Topology Manager configuration.
    pub fn config(&self) -> &TopologyManagerConfig {
        &self.config
    }

    /// The Topology Manager policy.
    pub fn policy(&self) -> TopologyManagerPolicy {
        self.config.policy
    }

    /// The Topology Manager scope.
    pub fn scope(&self) -> TopologyManagerScope {
        self.config.scope
    }

    /// Whether the CPU manager is `static` (the assumption when the NRT does not say).
    pub fn static_cpus(&self) -> bool {
        self.static_cpus
    }

    /// Whether the memory manager is `Static` (the assumption when the NRT does not say).
    pub fn static_memory(&self) -> bool {
        self.static_memory
    }

    /// Whether the Topology Manager picks the closest of equally wide zone sets.
    pub fn prefer_closest(&self) -> bool {
        self.prefer_closest
    }

    /// NUMA ids of the node's zones, ascending.
    pub fn numa_ids(&self) -> &[u32] {
        &self.ids
    }

    /// Number of NUMA zones.
    pub fn zone_count(&self) -> usize {
        self.ids.len()
    }

    /// Names of the resources any zone reports, sorted.
    pub fn resource_names(&self) -> impl Iterator<Item = &str> {
        self.resources.iter().map(|r| &*r.name)
    }

    /// Whether any zone reports `resource`.
    pub fn reports(&self, resource: &str) -> bool {
        self.resource_index(resource)
            .is_some_and(|ri| self.resources[ri].listed != 0)
    }

    /// What is free of `resource` in NUMA zone `numa_id` (CPU in millicores), if the
    /// zone reports it.
    pub fn available(&self, numa_id: u32, resource: &str) -> Option<i64> {
        self.amount(&self.available, numa_id, resource)
    }

    /// The allocatable amount of `resource` in zone `numa_id`, if reported.
    pub fn allocatable(&self, numa_id: u32, resource: &str) -> Option<i64> {
        self.amount(self.allocatable_table(), numa_id, resource)
    }

    /// The capacity of `resource` in zone `numa_id`, if reported.
    pub fn capacity(&self, numa_id: u32, resource: &str) -> Option<i64> {
        let f = self.layout();
        self.amount(&self.fixed[f.capacity..f.end], numa_id, resource)
    }

    /// NUMA distance between two zones (10 = local; defaults 10/20 when not reported).
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        let from = self.ids.binary_search(&from).ok()?;
        let to = self.ids.binary_search(&to).ok()?;
        Some(self.distances[from * self.ids.len() + to])
    }

    /// Subtracts `request` from every zone reporting each resource: the pessimistic
    /// assumption a scheduler cache makes until the node reports where the pod landed.
    pub fn reserve_on_every_zone(&mut self, request: &Resources) {
        self.shift_every_zone(request, -1);
    }

    /// Undoes [`Self::reserve_on_every_zone`].
    pub fn unreserve_on_every_zone(&mut self, request: &Resources) {
        self.shift_every_zone(request, 1);
    }

    /// Adds `amounts` back to the free amounts of zone `numa_id` only, never above the
    /// zone's allocatable: "these resources were taken from this zone". Returns whether
    /// the zone exists. Resources the zone does not report are ignored.
    pub fn release_on_zone(&mut self, numa_id: u32, amounts: &Resources) -> bool {
        let Ok(zi) = self.ids.binary_search(&numa_id) else {
            return false;
        };
        let nres = self.resources.len();
        for entry in amounts.entries() {
            let Some(ri) = self.entry_index(entry) else {
                continue;
            };
            if self.resources[ri].listed & 1 << zi == 0 {
                continue;
            }
            let at = zi * nres + ri;
            let freed = self.available[at].saturating_add(entry.amount);
            let allocatable = self.fixed[self.layout().allocatable + at];
            self.available[at] = freed.min(allocatable.max(self.available[at]));
        }
        true
    }

    /// Subtracts `request` from the zones of `zones` only (each reporting resource gets
    /// the whole amount): the reservation of a pod the kubelet can only put there (see
    /// [`super::landing`]). A set naming a NUMA id the node does not have is taken as
    /// every zone, so a reservation made on an earlier object is never lost.
    pub fn reserve_on_zones(&mut self, request: &Resources, zones: NumaSet) {
        let mask = self.zone_mask(zones);
        self.shift_zones(request, mask, -1);
    }

    /// Undoes [`Self::reserve_on_zones`] with the same set.
    pub fn unreserve_on_zones(&mut self, request: &Resources, zones: NumaSet) {
        let mask = self.zone_mask(zones);
        self.shift_zones(request, mask, 1);
    }

    /// The zone-index mask of `zones`; every zone when a NUMA id is not the node's.
    pub(crate) fn zone_mask(&self, zones: NumaSet) -> u64 {
        let mut mask = 0u64;
        for id in zones.iter() {
            match self.ids.binary_search(&id) {
                Ok(zi) => mask |= 1 << zi,
                Err(_) => return u64::MAX,
            }
        }
        mask
    }

    fn shift_every_zone(&mut self, request: &Resources, sign: i64) {
        self.shift_zones(request, u64::MAX, sign);
    }

    fn shift_zones(&mut self, request: &Resources, mask: u64, sign: i64) {
        let nres = self.resources.len();
        for entry in request.entries() {
            let Some(ri) = self.entry_index(entry) else {
                continue;
            };
            for zi in super::mask::bits(self.resources[ri].listed & mask) {
                let at = zi as usize * nres + ri;
                self.available[at] = self.available[at].saturating_add(sign * entry.amount);
            }
        }
    }

    fn amount(&self, table: &[i64], numa_id: u32, resource: &str) -> Option<i64> {
        let zi = self.ids.binary_search(&numa_id).ok()?;
        let ri = self.resource_index(resource)?;
        (self.resources[ri].listed & 1 << zi != 0).then(|| table[zi * self.resources.len() + ri])
    }

    pub(crate) fn resource_index(&self, name: &str) -> Option<usize> {
        self.resources
            .binary_search_by(|r| (*r.name).cmp(name))
            .ok()
    }

    /// The index of resource `id` (named `name`): from the inline table when the id
    /// is small, else by name.
    pub(crate) fn resource_index_of(&self, id: ResourceId, name: &str) -> Option<usize> {
        match self.by_id.get(id.index()) {
            Some(&ABSENT) if id.is_interned() => None,
            Some(&i) if i < BY_NAME => Some(usize::from(i)),
            _ => self.resource_index(name),
        }
    }

    /// The index of resource `name` given by name (a configured weight, say): the
    /// well-known names through the inline table, others by name.
    pub(crate) fn named_index(&self, name: &str) -> Option<usize> {
        match ResourceId::well_known(name) {
            Some(id) => self.resource_index_of(id, name),
            None => self.resource_index(name),
        }
    }

    /// The index of a requested resource ([`Self::resource_index_of`]). Every resource
    /// of the node is listed by at least one zone: the names come from the zones.
    pub(crate) fn entry_index(&self, entry: &ResourceAmount) -> Option<usize> {
        self.resource_index_of(entry.id, &entry.name)
    }

    /// The name of resource index `ri`.
    pub(crate) fn resource_name(&self, ri: usize) -> &str {
        &self.resources[ri].name
    }

    pub(crate) fn resource_count(&self) -> usize {
        self.resources.len()
    }

    /// Zone-major free amounts, `[zone * resource_count() + resource]`.
    pub(crate) fn free(&self) -> &[i64] {
        &self.available
    }

    /// Zone-major allocatable amounts, laid out like [`Self::free`].
    pub(crate) fn allocatable_table(&self) -> &[i64] {
        let f = self.layout();
        &self.fixed[f.allocatable..f.memory_groups]
    }

    fn layout(&self) -> Fixed {
        Fixed::new(self.ids.len(), self.resources.len())
    }

    pub(crate) fn hint_total(&self, zone: usize, resource: usize) -> i64 {
        self.fixed[self.layout().hint_total + zone * self.resources.len() + resource]
    }

    /// The kubelet's minimum affinity size for `need` of one resource: the fewest zones
    /// whose totals can hold it, or every zone when none can.
    pub(crate) fn min_width(&self, resource: usize, need: i64) -> u32 {
        let n = self.ids.len();
        let row = &self.fixed[resource * (n + 1)..(resource + 1) * (n + 1)];
        (1..=n).find(|&k| row[k] >= need).unwrap_or(n) as u32
    }

    /// Distance by zone index.
    pub(crate) fn zone_distance(&self, from: usize, to: usize) -> u32 {
        self.distances[from * self.ids.len() + to]
    }

    /// Whether no memory or hugepages of zone `zone` is in use according to `free`
    /// (zone-major, like [`Self::free`]): the memory manager can then start a
    /// multi-zone group on it.
    pub(crate) fn memory_untouched(&self, free: &[i64], zone: usize) -> bool {
        let nres = self.resources.len();
        let row = zone * nres..(zone + 1) * nres;
        let (free, allocatable) = (&free[row.clone()], &self.allocatable_table()[row]);
        if nres <= 64 {
            // Only the memory rows, without reading the resource list.
            return super::mask::bits(self.memory_resources)
                .all(|ri| free[ri as usize] >= allocatable[ri as usize]);
        }
        self.resources
            .iter()
            .zip(free.iter().zip(allocatable))
            .all(|(r, (free, allocatable))| !r.kind.is_memory() || free >= allocatable)
    }

    /// The memory manager's state of zone `zone` as far as the NRT shows it: the
    /// zone-index mask of the zones its pinned memory is grouped with, and whether it
    /// holds pinned memory at all. From the zone's `memoryManagerGroup` attribute when
    /// it has one; otherwise from `free` (zone-major, like [`Self::free`]): a zone with
    /// memory or hugepages taken is taken to hold single-zone allocations (objects of
    /// writers that do not publish groups, or memory a scheduler reserved on the zone).
    pub(crate) fn memory_state(&self, free: &[i64], zone: usize) -> (u64, bool) {
        match self.fixed[self.layout().memory_groups + zone] as u64 {
            0 => (1 << zone, !self.memory_untouched(free, zone)),
            group => (group, true),
        }
    }

    /// The zone-index mask of the memory manager group zone `zone` shows (0 when its
    /// object names none), doubt left aside.
    pub(crate) fn memory_group_mask(&self, zone: usize) -> u64 {
        self.fixed[self.layout().memory_groups + zone] as u64
    }

    /// Marks zone `zone`'s group as doubted (see [`super::memory_doubt`]).
    pub(crate) fn doubt_memory_zone(&mut self, zone: usize) {
        self.doubted_memory |= 1 << zone;
    }

    /// Zone-index mask of the zones whose memory manager group is doubted: the memory
    /// manager's hints are those of the NRT's groups, but no allocation goes there.
    pub(crate) fn doubted_memory(&self) -> u64 {
        self.doubted_memory
    }

    /// Whether zone `zone`'s memory manager group is doubted.
    pub fn memory_zone_doubted(&self, zone: usize) -> bool {
        self.doubted_memory >> zone & 1 == 1
    }

    /// NUMA ids of a zone-index mask.
    pub(crate) fn numa_set(&self, zones: u64) -> super::NumaSet {
        super::NumaSet::from_ids(super::mask::bits(zones).map(|zi| self.ids[zi as usize]))
    }
}

fn parse_amount(kind: ResourceKind, q: &NrtQuantity) -> Result<i64, QuantityProblem> {
    // NRT CPU amounts count CPUs: "4" is 4000 millicores.
    let amount = if kind.is_milli() {
        q.milli_value()
    } else {
        q.value()
    }?;
    if amount < 0 {
        return Err(QuantityProblem::Negative(q.as_str().to_owned()));
    }
    Ok(amount)
}
