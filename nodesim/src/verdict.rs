//! The kubelet's verdict on a pod bound to its node, and the words it uses for it.
//!
//! The referee decides ([`crate::node::SimNode::admit`]); the controller writes the
//! verdict into the pod's status ([`crate::status`]) and an Event. The reasons and
//! messages are the kubelet's own, so tests and reports can match them.

/// Reason of a pod the Topology Manager refused.
pub const TOPOLOGY_AFFINITY_ERROR: &str = "TopologyAffinityError";
/// The kubelet's message for [`TOPOLOGY_AFFINITY_ERROR`] (its Event note; the pod's
/// status message is this after [`REJECTED_PREFIX`]).
pub const TOPOLOGY_AFFINITY_MESSAGE: &str = "Resources cannot be allocated with Topology locality";
/// Reason of a pod a resource manager failed to allocate for.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";
/// What the kubelet puts before the message in a rejected pod's status.
pub const REJECTED_PREFIX: &str = "Pod was rejected: ";

/// Why a pod was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// CamelCase reason (`TopologyAffinityError`, `OutOfcpu`, ...).
    pub reason: String,
    /// The message (without [`REJECTED_PREFIX`]).
    pub message: String,
}

/// The kubelet's verdict on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; its resources are allocated.
    Admitted,
    /// Rejected; it holds nothing.
    Rejected(Rejection),
}
