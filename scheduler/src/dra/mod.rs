//! Dynamic Resource Allocation with structured parameters (`resource.k8s.io/v1`): the
//! pure, synchronous core that allocates a pod's ResourceClaims on one node, as
//! kube-scheduler's DynamicResources plugin does, and keeps the devices inside the
//! NUMA zones the caller allows. No API calls: the caller reads the objects from its
//! caches and writes the results.
//!
//! # Using it
//!
//! ```text
//! let cache = SelectorCache::new();                          // once, shared
//! let devices = NodeDevices::gather(&node, &slices, &pcie);  // per node and snapshot
//! let input = AllocationInput { claims: &pod_claims, classes: &classes,
//!     in_use: &in_use, zone_rule: &ZoneRule::Within { zones, allow_unknown: false },
//!     max_steps: DEFAULT_MAX_STEPS };
//! match allocate(&devices, &input, &cache) {
//!     Ok(allocation) => { /* reserve allocation.new_devices(); write each
//!                           claims[i].result to the claim's status at bind */ }
//!     Err(e) if e.is_permanent() => { /* the claims need a change: every node fails */ }
//!     Err(e) => { /* this node does not fit: e is the reason to show */ }
//! }
//! inventory(&devices, &in_use);                              // for `kubectl tas explain`
//! ```
//!
//! - [`NodeDevices::gather`] ([`pools`]): slices → the pools and devices the node can
//!   see, with each device's CEL value and NUMA zones ([`topology`]) computed once;
//!   [`NodeDevices::warnings`] lists what was wrong in the slices (malformed zone
//!   attributes, unsupported slices) for an Event.
//! - [`allocate`] ([`allocate`](mod@allocate)): claims and classes → normalized requests
//!   ([`request`]), then one backtracking search over all requests of the pod's
//!   unallocated claims ([`constraint`] checks `matchAttribute` / `distinctAttribute`),
//!   then an `AllocationResult` per claim ([`result`]).
//! - [`SelectorCache`] ([`cel`](mod@cel)): selectors compiled once per expression text.
//!
//! # Against kube-scheduler
//!
//! The outcome is kube-scheduler's (v1.34) for the pool order TAS uses: incomplete
//! pools serve `ExactCount`, selectors run lazily in search order, an invalid pool
//! fails the node when the search reaches it. `e2e/tests/dra_differential.rs` checks
//! this against kube-scheduler's own allocator on random cases and lists where TAS
//! differs on purpose (kube-scheduler v1.34 bugs in `distinctAttribute` and in `All`
//! subrequests, fixed in later versions).
//!
//! # The in-use set
//!
//! `in_use` must hold every device allocated to any claim (`status.allocation` of all
//! claims, whichever node) and every device of allocations in flight (reserved but
//! not yet written, also other pods' of the same cycle): a device missing from it can
//! be handed out twice. The devices of the pod's own already-allocated claims are
//! added by [`allocate`]. Add [`Allocation::new_devices`] on reserve, remove them on
//! unreserve or once the claim's status carries them.
//!
//! # Zones
//!
//! [`ZoneRule::Within`] makes a device whose zones are known usable only inside the
//! set, and one whose zones are unknown only with `allow_unknown`. `All` requests must
//! find every matching device admitted, or fail. [`Allocation::aligned`] says whether
//! every device of the pod (also of already-allocated claims, which are not moved)
//! has known zones inside the set.
//!
//! # Not supported (refused with a reason, never allocated blind)
//!
//! - `adminAccess: true`, consumable capacity (`capacity.requests`) and tolerations
//!   in requests: [`AllocateError::Unsupported`] ("not supported by TAS yet").
//! - Device taints are honoured (`NoSchedule` / `NoExecute` devices are not
//!   allocated) but DeviceTaintRule objects are not read.
//! - `perDeviceNodeSelection` slices: skipped with a warning. Devices consuming shared
//!   counters (partitionable devices) or with binding conditions: never allocated
//!   (counted as unusable in the inventory). `allowMultipleAllocations` devices are
//!   allocated exclusively.
//! - CEL, with the `cel` crate: no type checker, so unknown functions, variables and
//!   `device` fields are refused by TAS's own check at compile time; the functions
//!   offered are listed in [`cel::FUNCTIONS`]. Missing: `cel.bind`, the lists, regex
//!   extraction, URL, IP/CIDR and format libraries, quantity `add`/`sub`, the
//!   two-argument `semver(text, normalize)`, string functions that build longer
//!   strings (`replace`, `join`, `format`), the optional syntax (`a.?b`). Each fails
//!   to compile with a message naming it. The runtime cost limit is replaced by a
//!   static cost estimate ([`cel::MAX_COST`]) and a depth limit.

pub mod allocate;
mod attribute;
pub mod cel;
pub mod constraint;
pub mod error;
pub mod inventory;
pub mod pools;
pub mod request;
pub mod result;
pub mod topology;

#[cfg(test)]
mod tests;

use std::fmt;

pub use allocate::{AllocationInput, DEFAULT_MAX_STEPS, allocate};
pub use cel::SelectorCache;
pub use error::{AllocateError, Shortage, Unsupported, Warning};
pub use inventory::{DeviceCounts, Inventory, inventory};
pub use pools::{NodeDevices, Pool, PoolId, PoolState};
pub use request::DeviceClasses;
pub use result::{AllocatedDevice, Allocation, ClaimAllocation};
pub use topology::{PcieRootZones, ZoneRule, Zones};

/// A device's identity: driver, pool, device name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl DeviceId {
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        Self {
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            device: device.to_owned(),
        }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}
