//! [`Unfit`]: why the kubelet would reject a pod on a node.
//!
//! The scheduler groups rejected nodes by the rendered reason, so the text names the
//! pod's container and resources and the amounts involved, but never the node, and it
//! is stable: the same shortage on two nodes reads the same.
//! [`Unfit::code`] is a short CamelCase token for metrics and event reasons.

use std::fmt;
use std::sync::Arc;

use tas_api::nrt::TopologyManagerPolicy;

use super::request::ContainerKind;
use super::resources::Amount;

/// Which part of the pod could not be aligned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnfitTarget {
    /// The whole pod (`pod` scope).
    Pod,
    /// One container (`container` scope).
    Container {
        /// Container name.
        name: Arc<str>,
        /// Init, sidecar or app.
        kind: ContainerKind,
    },
}

/// What stands in the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnfitReason {
    /// A resource that needs alignment is reported by no zone and not known to be a
    /// node-level resource.
    NotReported {
        /// The resource.
        resource: Arc<str>,
    },
    /// `single-numa-node`: more than any one zone holds in total, even empty.
    ExceedsZone {
        /// The resource.
        resource: Arc<str>,
        /// Amount requested.
        need: Amount,
        /// The largest zone total.
        largest: Amount,
    },
    /// No zone set of the minimum width has enough free.
    Insufficient {
        /// The resource.
        resource: Arc<str>,
        /// Amount requested.
        need: Amount,
        /// The most any set of `width` zones has free.
        best_free: Amount,
        /// The minimum width (1 = a single zone).
        width: u32,
    },
    /// `restricted`: the resources' minimum widths differ, so no merged hint can be
    /// preferred.
    WidthMismatch {
        /// A resource and its minimum width.
        first: (Arc<str>, u32),
        /// A resource needing another width.
        second: (Arc<str>, u32),
    },
    /// Each resource fits on its own, but no zone set of this width fits them all.
    Disjoint {
        /// The resources that must share the set.
        resources: Vec<Arc<str>>,
        /// The width of the sets searched.
        width: u32,
    },
    /// Too many NUMA zones to enumerate the zone sets.
    TooManyZones {
        /// Number of zones.
        zones: u32,
    },
    /// The memory manager `Static` cannot place the container's memory on zones that
    /// go with the Topology Manager's hint.
    MemoryPlacement {
        /// What the memory manager found.
        refusal: MemoryRefusal,
    },
    /// The CPU manager `static` has fewer free CPUs than the container asks for
    /// exclusively (CPUs of earlier init containers included).
    NotEnoughCpus {
        /// Whole CPUs requested.
        need: i64,
        /// Whole CPUs free.
        free: i64,
    },
}

/// The memory manager `Static`'s refusals, as the kubelet words them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryRefusal {
    /// No zone set has enough free memory ("no NUMA nodes with enough memory").
    NoZones,
    /// The hint has no zones and is preferred, the memory manager's own best is not
    /// ("failed to find the default preferred hint").
    DefaultNotPreferred,
    /// No zone set holding the hint's zones has enough free ("failed to find NUMA nodes
    /// to extend the current topology hint").
    CannotExtend,
    /// The hint was preferred but its extension is not ("failed to find the extended
    /// preferred hint").
    ExtensionNotPreferred,
    /// The zones would mix a single-zone and a multi-zone allocation, or two groups, or
    /// a zone of a group would serve a single-zone allocation ("preferred hint violates
    /// NUMA node allocation", or no hint of the memory manager on these zones).
    MixesGroups,
    /// A zone may hold memory of a group the kubelet split when it refused a pod
    /// part-way ([`super::memory_doubt`]): its cells are not known.
    Doubted,
}

impl fmt::Display for MemoryRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoZones => "no NUMA zones with enough free memory",
            Self::DefaultNotPreferred => "its own best NUMA zones would not be preferred",
            Self::CannotExtend => "no NUMA zones to extend the topology hint with",
            Self::ExtensionNotPreferred => "the extended topology hint would not be preferred",
            Self::MixesGroups => {
                "the zones would mix single-zone and multi-zone memory allocations"
            }
            Self::Doubted => {
                "a zone may hold a memory group the kubelet split when it refused a pod part-way"
            }
        })
    }
}

/// The kubelet would reject the pod: see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfit {
    /// The node's Topology Manager policy.
    pub policy: TopologyManagerPolicy,
    /// The pod or the container that failed.
    pub target: UnfitTarget,
    /// Why.
    pub reason: UnfitReason,
}

impl Unfit {
    /// A short, stable machine reason, e.g. `InsufficientNUMAResources`.
    pub fn code(&self) -> &'static str {
        match self.reason {
            UnfitReason::NotReported { .. } => "NUMAResourceNotReported",
            UnfitReason::ExceedsZone { .. } => "NUMAZoneTooSmall",
            UnfitReason::Insufficient { .. } => "InsufficientNUMAResources",
            UnfitReason::WidthMismatch { .. } => "NUMAWidthMismatch",
            UnfitReason::Disjoint { .. } => "NUMAResourcesNotColocated",
            UnfitReason::TooManyZones { .. } => "TooManyNUMAZones",
            UnfitReason::MemoryPlacement { .. } => "NUMAMemoryNotPlaceable",
            UnfitReason::NotEnoughCpus { .. } => "InsufficientExclusiveCPUs",
        }
    }
}

impl fmt::Display for UnfitTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod => f.write_str("pod"),
            Self::Container {
                name,
                kind: ContainerKind::App,
            } => write!(f, "container {name}"),
            Self::Container { name, .. } => write!(f, "init container {name}"),
        }
    }
}

/// "zone" or "2-zone set".
struct Sets(u32);

impl fmt::Display for Sets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 | 1 => f.write_str("zone"),
            w => write!(f, "{w}-zone set"),
        }
    }
}

/// "1 zone" or "2 zones".
struct Zones(u32);

impl fmt::Display for Zones {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1 zone"),
            w => write!(f, "{w} zones"),
        }
    }
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let goal = match self.policy {
            TopologyManagerPolicy::SingleNumaNode => "one NUMA zone",
            _ => "minimum-width NUMA set",
        };
        let target = &self.target;
        match &self.reason {
            UnfitReason::NotReported { resource } => {
                write!(f, "cannot align {target}: no NUMA zone reports {resource}")
            }
            UnfitReason::ExceedsZone {
                resource,
                need,
                largest,
            } => write!(
                f,
                "cannot align {target} to {goal} ({resource}: need {need}, largest zone {largest})"
            ),
            UnfitReason::Insufficient {
                resource,
                need,
                best_free,
                width,
            } => write!(
                f,
                "cannot align {target} to {goal} ({resource}: need {need}, largest free {} {best_free})",
                Sets(*width)
            ),
            UnfitReason::WidthMismatch { first, second } => write!(
                f,
                "cannot align {target} to {goal} ({} needs {}, {} needs {})",
                first.0,
                Zones(first.1),
                second.0,
                Zones(second.1)
            ),
            UnfitReason::Disjoint { resources, width } => {
                write!(
                    f,
                    "cannot align {target} to {goal} (no {} has enough free ",
                    Sets(*width)
                )?;
                for (i, r) in resources.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" and ")?;
                    }
                    f.write_str(r)?;
                }
                f.write_str(" together)")
            }
            UnfitReason::TooManyZones { zones } => {
                write!(
                    f,
                    "cannot align {target}: {zones} NUMA zones are too many to evaluate"
                )
            }
            UnfitReason::MemoryPlacement { refusal } => {
                write!(f, "cannot pin memory of {target}: {refusal}")
            }
            UnfitReason::NotEnoughCpus { need, free } => write!(
                f,
                "cannot give {target} exclusive CPUs (need {need}, {free} free)"
            ),
        }
    }
}

impl std::error::Error for Unfit {}
