//! What the cache needs to know about a pod, derived once when it is first seen:
//! identity, phase, whether it holds NUMA-pinned resources and how much it pins.

use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use tas_api::tas::InformerMode;

use crate::numa::{InitHolding, PodRequest, ResourceKind, Resources};

/// A pod's identity: the UID keys the cache, namespace and name feed the fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl PodRef {
    /// Builds a reference from its parts.
    pub fn new(
        uid: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            uid: uid.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Reads `pod`'s metadata; `None` when the UID or the name is missing or empty
    /// (never the case for pods read from the API server).
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let meta = &pod.metadata;
        let uid = meta.uid.as_deref().filter(|u| !u.is_empty())?;
        let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
        Some(Self::new(
            uid,
            meta.namespace.as_deref().unwrap_or_default(),
            name,
        ))
    }
}

/// `status.phase`; a missing or unrecognised phase reads as `Pending` (nothing
/// admitted yet) except `Unknown`, which is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// Not yet admitted and started by the kubelet.
    Pending,
    /// Admitted; at least one container started.
    Running,
    /// Every container exited successfully.
    Succeeded,
    /// Every container exited, some failed (or the kubelet rejected the pod).
    Failed,
    /// The node stopped reporting the pod.
    Unknown,
}

impl PodPhase {
    /// The phase of `pod`.
    pub fn of(pod: &Pod) -> Self {
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Running") => Self::Running,
            Some("Succeeded") => Self::Succeeded,
            Some("Failed") => Self::Failed,
            Some("Unknown") => Self::Unknown,
            _ => Self::Pending,
        }
    }

    /// Whether the pod finished: it holds no resources any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    /// Whether the pod counts in the scheduler-side fingerprint. A shared pod watch
    /// counts only running pods; a dedicated one counts every phase but `Pending`,
    /// because the kubelet keeps reporting finished pods for a while.
    pub fn counts_in_fingerprint(self, mode: InformerMode) -> bool {
        match mode {
            InformerMode::Shared => self == Self::Running,
            InformerMode::Dedicated => self != Self::Pending,
        }
    }
}

/// The scheduler's judgement of the `with-exclusive-resources` fingerprint method: a
/// container gets exclusive CPUs (Guaranteed, whole CPUs), or the pod requests
/// hugepages or device-plugin resources. The node agent decides from what the kubelet
/// actually pinned, so the two can disagree (memory-manager blocks of Guaranteed pods
/// without whole CPUs, devices without NUMA affinity); a disagreement shows up as a
/// fingerprint mismatch that bounded staleness resolves.
pub fn holds_exclusive_resources(request: &PodRequest) -> bool {
    request.containers().iter().any(|c| c.exclusive_cpu)
        || request
            .effective()
            .entries()
            .iter()
            .any(|e| matches!(e.kind, ResourceKind::Hugepages | ResourceKind::Device))
}

/// What the kubelet may pin to NUMA zones for this pod, and so what a reservation
/// subtracts: the pod-level NUMA request ([`PodRequest::numa_request`]: exclusive CPUs
/// only, no overhead) for Guaranteed pods, only devices for the others (their CPU,
/// memory and hugepages come from shared pools that node agents do not subtract from
/// any zone). Resources the kubelet never aligns are left out.
pub fn numa_footprint(request: &PodRequest) -> Resources {
    let guaranteed = request.is_guaranteed();
    Resources::from_amounts(
        request
            .numa_request()
            .entries()
            .iter()
            .filter(|e| match e.kind {
                ResourceKind::Device => true,
                ResourceKind::Cpu | ResourceKind::Memory | ResourceKind::Hugepages => guaranteed,
                ResourceKind::Unaligned => false,
            })
            .map(|e| (&*e.name, e.amount)),
    )
}

/// A pod the cache believes is bound to a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ObservedPod {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// [`holds_exclusive_resources`], or `true` when the request did not parse.
    pub(crate) exclusive: bool,
    pub(crate) phase: PodPhase,
    /// When the cache first saw the pod bound to the node.
    pub(crate) bound_at: Instant,
    /// [`numa_footprint`]; `None` when the request did not parse.
    pub(crate) footprint: Option<Resources>,
    /// Terminating, or able to finish on its own (`restartPolicy` other than
    /// `Always`): the kubelet may release what it holds before the cache hears of it.
    pub(crate) releasing: bool,
    /// Being deleted (`deletionTimestamp` set).
    pub(crate) terminating: bool,
    /// What its regular init containers keep that node agents do not report
    /// ([`crate::numa::init_holdings`]): held back on the view while the pod has no
    /// reservation and cannot release (see `NodeEntry::holding`).
    pub(crate) init_holdings: Vec<InitHolding>,
    /// The request whose init holdings are still to be predicted: the node had no
    /// usable view when the pod was first seen. The next rebuild of the view predicts
    /// them (with the pod's own footprint added back, as its object may count it).
    pub(crate) pending_holdings: Option<std::sync::Arc<PodRequest>>,
}

impl ObservedPod {
    /// Whether what the pod holds may be free on the node although an NRT still
    /// counts it.
    pub(crate) fn may_release(&self) -> bool {
        self.releasing || self.phase.is_terminal()
    }
}

/// Whether `pod` is terminating or can finish on its own (see
/// [`ObservedPod::releasing`]).
pub(crate) fn releasing(pod: &Pod) -> bool {
    let restarts = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .is_none_or(|p| p == "Always");
    pod.metadata.deletion_timestamp.is_some() || !restarts
}

/// The status message prefix of a pod its node's kubelet refused at admission
/// (`rejectPod` in the kubelet, the same in every supported minor).
const KUBELET_REJECTED: &str = "Pod was rejected: ";

/// Whether `pod`'s kubelet refused it at admission: phase `Failed` with the kubelet's
/// rejection message. Its resource managers may have allocated some containers before
/// the refusal (see [`crate::numa::memory_doubt`]).
pub(crate) fn kubelet_refused(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Failed")
            && s.message
                .as_deref()
                .is_some_and(|m| m.starts_with(KUBELET_REJECTED))
    })
}
