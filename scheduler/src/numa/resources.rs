//! Resource names and amounts as the NUMA code sees them.
//!
//! Every amount is an `i64` in one fixed unit per resource: CPU in millicores,
//! memory and hugepages in bytes, everything else in whole units (device counts).
//! [`Resources`] is a small map sorted by name, built once per pod; each entry carries
//! its [`ResourceKind`] and its [`ResourceId`] so the per-node fit never re-classifies
//! or compares a name: it looks the id up in the node's table.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock};

use parking_lot::RwLock;

/// A resource name resolved to a small process-wide number, once per pod and once per
/// NRT object, so per-node lookups compare integers instead of strings.
///
/// The names every node has get fixed ids without a lookup; others are interned on
/// first sight, up to [`ResourceId::MAX_INTERNED`] names. A name seen after that gets
/// [`ResourceId::UNINTERNED`], which callers resolve by name instead (never wrong,
/// only slower).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId(u16);

/// Names with fixed ids, in id order.
const WELL_KNOWN: [&str; 6] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "pods",
    "hugepages-1Gi",
    "hugepages-2Mi",
];

/// Interned names beyond [`WELL_KNOWN`]: name → id and id → name.
#[derive(Default)]
struct Interned {
    ids: HashMap<Arc<str>, u16>,
    names: Vec<Arc<str>>,
}

static INTERNED: LazyLock<RwLock<Interned>> = LazyLock::new(RwLock::default);

impl ResourceId {
    /// `cpu`.
    pub const CPU: Self = Self(0);
    /// `memory`.
    pub const MEMORY: Self = Self(1);
    /// A name beyond the interning limit: resolve it by name.
    pub const UNINTERNED: Self = Self(u16::MAX);
    /// How many names beyond the well-known ones are interned at most; bounds the
    /// table whatever names pods make up.
    pub const MAX_INTERNED: usize = 4096;

    /// The id of `name`, interning it on first sight.
    pub fn of(name: &str) -> Self {
        if let Some(id) = Self::well_known(name) {
            return id;
        }
        if let Some(&id) = INTERNED.read().ids.get(name) {
            return Self(id);
        }
        let mut table = INTERNED.write();
        if let Some(&id) = table.ids.get(name) {
            return Self(id);
        }
        if table.names.len() >= Self::MAX_INTERNED {
            return Self::UNINTERNED;
        }
        let id = (WELL_KNOWN.len() + table.names.len()) as u16;
        let name: Arc<str> = Arc::from(name);
        table.names.push(name.clone());
        table.ids.insert(name, id);
        Self(id)
    }

    /// The fixed id of a name every node has, without touching the interning table;
    /// `None` for other names.
    pub fn well_known(name: &str) -> Option<Self> {
        WELL_KNOWN
            .iter()
            .position(|&w| w == name)
            .map(|i| Self(i as u16))
    }

    /// The id as an index (small for the names a cluster uses).
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Whether this id stands for exactly one name.
    pub fn is_interned(self) -> bool {
        self != Self::UNINTERNED
    }
}

/// How the kubelet treats a resource when aligning it to NUMA nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// `cpu`: aligned by the CPU manager, for exclusive (integer, Guaranteed) CPUs only.
    Cpu,
    /// `memory`: aligned by the memory manager, Guaranteed pods only.
    Memory,
    /// `hugepages-<size>`: aligned together with memory, Guaranteed pods only.
    Hugepages,
    /// A domain-qualified extended resource (`example.com/nic`): served by device
    /// plugins and aligned by the device manager for every QoS class.
    Device,
    /// Any other native resource (`ephemeral-storage`, `pods`, ...): never aligned.
    Unaligned,
}

impl ResourceKind {
    /// Classifies a resource name.
    pub fn of(name: &str) -> Self {
        match name {
            "cpu" => Self::Cpu,
            "memory" => Self::Memory,
            _ if name.starts_with("hugepages-") => Self::Hugepages,
            // Kubernetes' extended-resource rule: qualified, outside the kubernetes.io
            // namespace, not a quota name. Only those can come from device plugins.
            _ if name.contains('/')
                && !name.contains("kubernetes.io/")
                && !name.starts_with("requests.") =>
            {
                Self::Device
            }
            _ => Self::Unaligned,
        }
    }

    /// Whether amounts of this kind are counted in thousandths (CPU).
    pub fn is_milli(self) -> bool {
        self == Self::Cpu
    }

    /// Whether the memory manager aligns this kind (memory and hugepages, jointly).
    pub fn is_memory(self) -> bool {
        matches!(self, Self::Memory | Self::Hugepages)
    }
}

/// One requested resource: interned name, kind and amount in the kind's unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAmount {
    /// The resource name, shared with every copy of this request.
    pub name: Arc<str>,
    /// The classification of `name`.
    pub kind: ResourceKind,
    /// The id of `name`.
    pub id: ResourceId,
    /// The amount: millicores for CPU, bytes for memory and hugepages, else units.
    pub amount: i64,
}

/// A small map resource name → positive amount, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    entries: Vec<ResourceAmount>,
}

impl Resources {
    /// Builds the map from `(name, amount)` pairs in the kind's unit; amounts of the
    /// same name add up and zero amounts are dropped.
    pub fn from_amounts<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut resources = Self::default();
        for (name, amount) in pairs {
            resources.add(name, amount);
        }
        resources
    }

    /// The amount of `name`, 0 when absent.
    pub fn get(&self, name: &str) -> i64 {
        self.position(name).map_or(0, |i| self.entries[i].amount)
    }

    /// The amount of the resource with id `id` (interned), 0 when absent.
    pub fn get_id(&self, id: ResourceId) -> i64 {
        if !id.is_interned() {
            return 0;
        }
        self.entries
            .iter()
            .find(|e| e.id == id)
            .map_or(0, |e| e.amount)
    }

    /// The amount of `name` whose id is `id`: by id when interned, else by name.
    pub fn get_resolved(&self, id: ResourceId, name: &str) -> i64 {
        if id.is_interned() {
            self.get_id(id)
        } else {
            self.get(name)
        }
    }

    /// The entries, sorted by name.
    pub fn entries(&self) -> &[ResourceAmount] {
        &self.entries
    }

    /// `(name, amount)` pairs sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.entries.iter().map(|e| (&*e.name, e.amount))
    }

    /// Number of resources with a non-zero amount.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is requested.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.entries.binary_search_by(|e| (*e.name).cmp(name)).ok()
    }

    /// Adds `amount` to `name` (saturating), dropping the entry when it reaches 0.
    pub(crate) fn add(&mut self, name: &str, amount: i64) {
        self.update(name, |old| old.saturating_add(amount));
    }

    /// Raises `name` to at least `amount`.
    pub(crate) fn raise_to(&mut self, name: &str, amount: i64) {
        self.update(name, |old| old.max(amount));
    }

    fn update(&mut self, name: &str, f: impl FnOnce(i64) -> i64) {
        match self.entries.binary_search_by(|e| (*e.name).cmp(name)) {
            Ok(i) => {
                self.entries[i].amount = f(self.entries[i].amount);
                if self.entries[i].amount == 0 {
                    self.entries.remove(i);
                }
            }
            Err(i) => {
                let amount = f(0);
                if amount != 0 {
                    let entry = ResourceAmount {
                        name: Arc::from(name),
                        kind: ResourceKind::of(name),
                        id: ResourceId::of(name),
                        amount,
                    };
                    self.entries.insert(i, entry);
                }
            }
        }
    }

    /// Adds every entry of `other`.
    pub(crate) fn add_all(&mut self, other: &Self) {
        for e in &other.entries {
            self.add(&e.name, e.amount);
        }
    }

    /// Raises every entry to at least the one in `other`.
    pub(crate) fn raise_all(&mut self, other: &Self) {
        for e in &other.entries {
            self.raise_to(&e.name, e.amount);
        }
    }
}

/// An amount rendered for people: `8` or `1500m` CPUs, `12Gi` of memory, `3` devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    /// The kind of resource, which fixes the unit.
    pub kind: ResourceKind,
    /// The amount in the kind's unit.
    pub value: i64,
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.value;
        if self.kind.is_milli() {
            return if v % 1000 == 0 {
                write!(f, "{}", v / 1000)
            } else {
                write!(f, "{v}m")
            };
        }
        if self.kind.is_memory() && v != 0 {
            for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
                if v % (1i64 << shift) == 0 {
                    return write!(f, "{}{suffix}", v >> shift);
                }
            }
        }
        write!(f, "{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_kubernetes_naming() {
        use ResourceKind as K;
        for (name, kind) in [
            ("cpu", K::Cpu),
            ("memory", K::Memory),
            ("hugepages-1Gi", K::Hugepages),
            ("example.com/nic", K::Device),
            ("nvidia.com/gpu", K::Device),
            ("ephemeral-storage", K::Unaligned),
            ("kubernetes.io/batch", K::Unaligned),
            ("foo.kubernetes.io/bar", K::Unaligned),
            ("requests.example.com/x", K::Unaligned),
        ] {
            assert_eq!(ResourceKind::of(name), kind, "{name}");
        }
    }

    #[test]
    fn ids_are_stable_and_name_one_resource() {
        assert_eq!(ResourceId::of("cpu"), ResourceId::CPU);
        assert_eq!(ResourceId::of("memory"), ResourceId::MEMORY);
        let gpu = ResourceId::of("example.com/ids-test-gpu");
        assert!(gpu.is_interned());
        assert_eq!(ResourceId::of("example.com/ids-test-gpu"), gpu);
        assert_ne!(ResourceId::of("example.com/ids-test-nic"), gpu);
        let r = Resources::from_amounts([("cpu", 2000), ("example.com/ids-test-gpu", 1)]);
        assert_eq!(r.get_id(ResourceId::CPU), 2000);
        assert_eq!(r.get_id(gpu), 1);
        assert_eq!(r.get_id(ResourceId::MEMORY), 0);
    }

    #[test]
    fn map_stays_sorted_and_drops_zeros() {
        let mut r = Resources::from_amounts([("memory", 5), ("cpu", 2000), ("x.io/a", 0)]);
        assert_eq!(r.iter().collect::<Vec<_>>(), [("cpu", 2000), ("memory", 5)]);
        r.add("memory", -5);
        r.raise_to("cpu", 1000);
        r.raise_to("a.io/z", 3);
        assert_eq!(r.iter().collect::<Vec<_>>(), [("a.io/z", 3), ("cpu", 2000)]);
        assert_eq!(r.get("memory"), 0);
    }

    #[test]
    fn amounts_render_in_natural_units() {
        let show = |kind, value| Amount { kind, value }.to_string();
        assert_eq!(show(ResourceKind::Cpu, 8000), "8");
        assert_eq!(show(ResourceKind::Cpu, 1500), "1500m");
        assert_eq!(show(ResourceKind::Memory, 12 << 30), "12Gi");
        assert_eq!(show(ResourceKind::Hugepages, 3 << 20), "3Mi");
        assert_eq!(show(ResourceKind::Memory, 1000), "1000");
        assert_eq!(show(ResourceKind::Device, 3), "3");
    }
}
