//! Why a pod's claims cannot be allocated on a node, and the warnings gathering a
//! node's devices can leave for an Event.

use std::fmt;

use super::DeviceId;
use super::cel::{CompileError, EvalError};

/// Where a selector comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorOrigin {
    /// A device class's `spec.selectors`.
    Class(String),
    /// A request's (or subrequest's) own selectors.
    Claim { claim: String, request: String },
}

impl fmt::Display for SelectorOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Class(class) => write!(f, "class {class}"),
            Self::Claim { claim, request } => write!(f, "claim {claim}, request {request}"),
        }
    }
}

/// A feature of the API TAS refuses rather than allocating a claim blind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("adminAccess")]
    AdminAccess,
    #[error("consumable capacity (capacity.requests)")]
    ConsumableCapacity,
    #[error("device taint tolerations")]
    Tolerations,
}

/// How far a request is from being satisfied on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortage {
    /// Devices the request needs (for `All`: at least one).
    pub needed: usize,
    /// Devices that match its selectors in usable pools.
    pub matching: usize,
    /// Of those, held by other claims.
    pub in_use: usize,
    /// Of those, tainted `NoSchedule` / `NoExecute`.
    pub tainted: usize,
    /// Of those, with zones the zone rule refuses.
    pub outside_zones: usize,
    /// Of those, of a kind TAS never allocates (partitionable devices).
    pub unsupported: usize,
    /// Pools of the node whose devices are not used, with why.
    pub unusable_pools: Vec<String>,
}

impl Shortage {
    /// Matching devices left for this pod.
    pub fn free(&self) -> usize {
        self.matching
            .saturating_sub(self.in_use + self.tainted + self.outside_zones + self.unsupported)
    }
}

impl fmt::Display for Shortage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "needs {} device(s), {} free of {} matching ({} in use, {} tainted, {} outside the allowed NUMA zones)",
            self.needed,
            self.free(),
            self.matching,
            self.in_use,
            self.tainted,
            self.outside_zones
        )?;
        if self.unsupported > 0 {
            write!(f, "; {} of a kind TAS does not allocate", self.unsupported)?;
        }
        for pool in &self.unusable_pools {
            write!(f, "; {pool}")?;
        }
        Ok(())
    }
}

/// Why the claims of a pod cannot be allocated on a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    #[error("{origin}: selector #{index}: CEL compile error: {error}")]
    SelectorCompile {
        origin: SelectorOrigin,
        index: usize,
        error: CompileError,
    },
    #[error("{origin}: selector #{index} on device {device}: CEL runtime error: {error}")]
    SelectorRuntime {
        origin: SelectorOrigin,
        index: usize,
        device: Box<DeviceId>,
        error: EvalError,
    },
    #[error("claim {claim}, request {request}: {feature} is not supported by TAS yet")]
    Unsupported {
        claim: String,
        request: String,
        feature: Unsupported,
    },
    #[error("claim {claim}, request {request}: device class {class:?} not found")]
    ClassNotFound {
        claim: String,
        request: String,
        class: String,
    },
    #[error("claim {claim}: {problem}")]
    InvalidClaim { claim: String, problem: String },
    #[error("claim {claim}: allocated for other nodes (its node selector does not select {node})")]
    AllocatedElsewhere { claim: String, node: String },
    #[error("claim {claim}, request {request}: {shortage}")]
    Unsatisfiable {
        claim: String,
        request: String,
        shortage: Shortage,
    },
    #[error("claim {claim}, request {request}: asks for all devices, but {problem}")]
    AllDevicesUnavailable {
        claim: String,
        request: String,
        problem: String,
    },
    /// The search reached an invalid pool before it found an allocation (as
    /// kube-scheduler does: the pool's devices cannot be trusted, nor skipped).
    #[error("{problem}")]
    InvalidPool { problem: String },
    #[error(
        "no combination of free devices satisfies the claims' constraints and the NUMA zone rule together"
    )]
    NoCombination,
    #[error("gave up after {steps} search steps without an allocation (the search bound)")]
    SearchBound { steps: u64 },
}

impl AllocateError {
    /// Whether the error holds on every node until a claim or class changes (the pod
    /// waits for its objects to be fixed), rather than being about this node.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Self::SelectorCompile { .. }
                | Self::Unsupported { .. }
                | Self::ClassNotFound { .. }
                | Self::InvalidClaim { .. }
                | Self::AllocatedElsewhere { .. }
        )
    }
}

/// Something wrong in a ResourceSlice that did not stop the node's other devices from
/// being used; the caller may turn it into an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The slice's name.
    pub slice: String,
    /// The device, when the warning is about one.
    pub device: Option<String>,
    /// What is wrong and what TAS did about it.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResourceSlice {}", self.slice)?;
        if let Some(device) = &self.device {
            write!(f, ", device {device}")?;
        }
        write!(f, ": {}", self.message)
    }
}
