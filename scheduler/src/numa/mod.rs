//! NUMA fit and score: the pure core of the NUMA-aware filter and score plugins.
//!
//! Data flows in three steps, each done as rarely as possible:
//!
//! 1. [`PodRequest::from_pod`] — once per pod: QoS class, per-container requests as
//!    integers, exclusive-CPU flags, pod-level sums ([`request`]).
//! 2. [`NodeTopology::from_nrt`] — once per NRT update: zones by NUMA id, interned
//!    resources, flat integer tables, minimum-width and distance tables ([`topology`]).
//! 3. [`fit`] and [`score`] — per pod × node: integer arithmetic over those views.
//!    Resources are found by [`resources::ResourceId`] (resolved once per pod and once
//!    per NRT object), never by comparing names; the filter's [`fits`] keeps a
//!    rejection as codes ([`UnfitCode`]) and allocates nothing for the usual node
//!    sizes, whether the pod fits or not.
//!
//! [`fit`] models what the kubelet Topology Manager admits under every policy and both
//! scopes (see `fit` for the rules); [`hint::merge`] is the kubelet's literal hint
//! merge, kept as the executable specification the fast path is tested against.
//!
//! Before step 2 trusts an object, [`sanity`] checks it (sizes, duplicates, costs,
//! `available <= allocatable <= capacity`); a node whose object fails is skipped.

mod align;
mod containers;
mod cpu_reuse;
pub mod fit;
pub mod hint;
pub mod init_holdings;
pub mod landing;
mod managers;
mod mask;
mod memory;
pub mod memory_doubt;
pub mod node_strategy;
mod pack;
pub mod pins;
mod providers;
pub mod request;
pub mod resources;
pub mod sanity;
pub mod score;
mod scratch;
pub mod topology;
pub mod unfit;

pub use fit::{Placement, UnfitCode, fit, fits};
pub use init_holdings::{InitHolding, init_holdings};
pub use landing::{landing_zones, landing_zones_below};
pub use mask::NumaSet;
pub use memory_doubt::MemoryDoubt;
pub use request::{ContainerKind, ContainerRequest, PodRequest, QosClass, RequestError};
pub use resources::{Amount, ResourceKind, Resources};
pub use score::{ScoreConfig, ScoringStrategy, score};
pub use topology::{NodeTopology, TopologyError};
pub use unfit::{MemoryRefusal, Unfit, UnfitReason, UnfitTarget};

#[cfg(test)]
mod tests;
