//! Resource amounts the way kube-scheduler's `NodeResourcesFit` sees them.
//!
//! kube-scheduler keeps three native resources in fixed fields (CPU in millicores,
//! memory and ephemeral storage in bytes), the node's pod capacity apart, and every
//! other *scalar* resource (extended resources such as `example.com/gpu`,
//! `hugepages-<size>`, `kubernetes.io/`-prefixed native resources and the legacy
//! `attachable-volumes-*`) in a map. Names outside those groups (`pods` in a request,
//! unqualified unknown names) are not compared at all. [`ResourceTotals`] mirrors that
//! split so the per-node check is a few integer comparisons.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tas_api::quantity::{QuantityError, parse_milli, parse_value};

use crate::numa::Resources;
use crate::numa::resources::ResourceId;

/// Where kube-scheduler files a resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Cpu,
    Memory,
    EphemeralStorage,
    Pods,
    Scalar,
    Ignored,
}

fn slot(name: &str) -> Slot {
    match name {
        "cpu" => Slot::Cpu,
        "memory" => Slot::Memory,
        "ephemeral-storage" => Slot::EphemeralStorage,
        "pods" => Slot::Pods,
        _ if is_scalar(name) => Slot::Scalar,
        _ => Slot::Ignored,
    }
}

/// Kubernetes' scalar-resource rule: extended, hugepages, prefixed native or
/// attachable-volume names.
fn is_scalar(name: &str) -> bool {
    let prefixed_native = name.contains("kubernetes.io/");
    let extended = name.contains('/') && !prefixed_native && !name.starts_with("requests.");
    extended
        || prefixed_native
        || name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
}

/// Amounts of cpu (millicores), memory and ephemeral storage (bytes) and of every
/// scalar resource (whole units; bytes for hugepages).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceTotals {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Scalar resources sorted by name, zero amounts dropped, with their ids.
    scalars: Vec<(Arc<str>, ResourceId, i64)>,
}

impl ResourceTotals {
    /// The scheduler's view of a pod-level request (see
    /// [`crate::numa::PodRequest::effective`]); names it does not compare are dropped.
    pub fn from_request(request: &Resources) -> Self {
        let mut totals = Self::default();
        for entry in request.entries() {
            totals.add_named(&entry.name, entry.amount);
        }
        totals
    }

    /// The amount of scalar resource `name`, 0 when absent.
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalar_position(name).map_or(0, |i| self.scalars[i].2)
    }

    /// The amount of scalar resource `name` whose id is `id`, 0 when absent: compares
    /// ids, not names, when the id is interned.
    pub fn scalar_of(&self, id: ResourceId, name: &str) -> i64 {
        if !id.is_interned() {
            return self.scalar(name);
        }
        self.scalars.iter().find(|s| s.1 == id).map_or(0, |s| s.2)
    }

    /// Scalar resources with a non-zero amount, sorted by name.
    pub fn scalars(&self) -> impl Iterator<Item = (&Arc<str>, i64)> {
        self.scalars.iter().map(|(name, _, amount)| (name, *amount))
    }

    /// Scalar resources with a non-zero amount, sorted by name, with their ids.
    pub fn scalar_ids(&self) -> impl Iterator<Item = (&Arc<str>, ResourceId, i64)> {
        self.scalars
            .iter()
            .map(|(name, id, amount)| (name, *id, *amount))
    }

    /// Whether every amount is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalars.is_empty()
    }

    /// Adds (`sign` 1) or subtracts (`sign` -1) every amount of `other`, saturating.
    pub(crate) fn add_scaled(&mut self, other: &Self, sign: i64) {
        self.milli_cpu = self
            .milli_cpu
            .saturating_add(sign.saturating_mul(other.milli_cpu));
        self.memory = self
            .memory
            .saturating_add(sign.saturating_mul(other.memory));
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(sign.saturating_mul(other.ephemeral_storage));
        for (name, _, amount) in &other.scalars {
            self.add_scalar(name, sign.saturating_mul(*amount));
        }
    }

    /// Adds `amount` of `name` if kube-scheduler compares it; returns the slot so the
    /// caller can handle `pods`.
    fn add_named(&mut self, name: &str, amount: i64) -> Slot {
        let slot = slot(name);
        match slot {
            Slot::Cpu => self.milli_cpu = self.milli_cpu.saturating_add(amount),
            Slot::Memory => self.memory = self.memory.saturating_add(amount),
            Slot::EphemeralStorage => {
                self.ephemeral_storage = self.ephemeral_storage.saturating_add(amount);
            }
            Slot::Scalar => self.add_scalar(name, amount),
            Slot::Pods | Slot::Ignored => {}
        }
        slot
    }

    fn add_scalar(&mut self, name: &str, amount: i64) {
        match self.scalar_position(name) {
            Some(i) => {
                let total = self.scalars[i].2.saturating_add(amount);
                if total == 0 {
                    self.scalars.remove(i);
                } else {
                    self.scalars[i].2 = total;
                }
            }
            None if amount != 0 => {
                let i = self.scalars.partition_point(|(n, _, _)| &**n < name);
                self.scalars
                    .insert(i, (Arc::from(name), ResourceId::of(name), amount));
            }
            None => {}
        }
    }

    fn scalar_position(&self, name: &str) -> Option<usize> {
        self.scalars
            .binary_search_by(|(n, _, _)| (**n).cmp(name))
            .ok()
    }
}

/// What a node offers to pods: `status.allocatable`, parsed once per node update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocatable {
    /// Allocatable amounts of every compared resource.
    pub resources: ResourceTotals,
    /// The `pods` allocatable: how many pods the node accepts (0 when absent).
    pub pods: i64,
}

/// An allocatable quantity of a node that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allocatable {resource:?}: {source}")]
pub struct AllocatableError {
    /// The resource name.
    pub resource: String,
    /// Why the quantity was rejected.
    pub source: QuantityError,
}

impl Allocatable {
    /// Parses `status.allocatable` in kube-scheduler's units.
    pub fn parse(list: &BTreeMap<String, Quantity>) -> Result<Self, AllocatableError> {
        let mut allocatable = Self::default();
        for (name, quantity) in list {
            let parsed = if name == "cpu" {
                parse_milli(&quantity.0)
            } else {
                parse_value(&quantity.0)
            };
            let amount = parsed.map_err(|source| AllocatableError {
                resource: name.clone(),
                source,
            })?;
            if allocatable.resources.add_named(name, amount) == Slot::Pods {
                allocatable.pods = amount;
            }
        }
        Ok(allocatable)
    }
}

/// A resource named in an "Insufficient" reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResourceName {
    /// The node's pod capacity.
    Pods,
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
    /// `ephemeral-storage`.
    EphemeralStorage,
    /// A scalar resource (`example.com/gpu`, `hugepages-2Mi`, ...).
    Scalar(Arc<str>),
}

impl ResourceName {
    /// The Kubernetes resource name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Pods => "pods",
            Self::Cpu => "cpu",
            Self::Memory => "memory",
            Self::EphemeralStorage => "ephemeral-storage",
            Self::Scalar(name) => name,
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One resource the node lacks for the pod, like kube-scheduler's
/// `InsufficientResource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insufficient {
    /// The resource.
    pub resource: ResourceName,
    /// What the pod asks for (1 for pods).
    pub requested: i64,
    /// What pods bound to the node already take (their number, for pods).
    pub used: i64,
    /// The node's allocatable amount.
    pub capacity: i64,
}

impl Insufficient {
    /// kube-scheduler's reason string: `Too many pods` or `Insufficient <name>`.
    pub fn reason(&self) -> std::borrow::Cow<'static, str> {
        match &self.resource {
            ResourceName::Pods => "Too many pods".into(),
            ResourceName::Cpu => "Insufficient cpu".into(),
            ResourceName::Memory => "Insufficient memory".into(),
            ResourceName::EphemeralStorage => "Insufficient ephemeral-storage".into(),
            ResourceName::Scalar(name) => format!("Insufficient {name}").into(),
        }
    }
}
