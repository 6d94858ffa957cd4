//! Everything the node filters read from a pod, parsed once per pod.
//!
//! [`PodFilterInput::new`] does all string parsing a scheduling cycle needs
//! (tolerations, selectors, quantities, host ports, affinity terms, spread
//! constraints), so checking it against thousands of nodes is comparisons only.
//! [`PodUsage`] is the part a pod *takes* from a node once bound — its request and
//! host ports — plus who it is ([`PodMeta`]: labels, priority, affinity terms, for the
//! cluster-wide plugins and preemption), and is what [`super::NodeInfo`] keeps per
//! bound pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::node_affinity::NodeAffinityInput;
use super::node_ports::{HostPort, host_ports};
use super::node_unschedulable::tolerates_unschedulable;
use super::resources::ResourceTotals;
use super::taint_toleration::PodToleration;
use super::volumes::VolumeInput;
use crate::numa::{PodRequest, RequestError};
use crate::pod_meta::PodMeta;
use crate::spread::SpreadConstraint;

/// What a pod takes from the node it runs on, and who it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodUsage {
    /// `max(max init, sum app + sidecars) + overhead`, in kube-scheduler's units.
    pub request: ResourceTotals,
    /// Host ports held by its app containers and sidecars.
    pub host_ports: Vec<HostPort>,
    /// Identity, labels, priority, affinity terms, NUMA footprint.
    pub meta: Arc<PodMeta>,
}

impl PodUsage {
    /// Parses the pod's requests, host ports and metadata. Fails on a quantity that
    /// does not parse or is negative (the API server rejects both, so this is a corrupt
    /// pod).
    pub fn from_pod(pod: &Pod) -> Result<Self, RequestError> {
        let request = PodRequest::from_pod(pod)?;
        Ok(Self::from_request(pod, &request))
    }

    /// As [`Self::from_pod`], with the requests already parsed.
    pub fn from_request(pod: &Pod, request: &PodRequest) -> Self {
        Self {
            request: ResourceTotals::from_request(request.effective()),
            host_ports: host_ports(pod),
            meta: Arc::new(PodMeta::new(pod, request)),
        }
    }
}

/// A pod to schedule, parsed for the node filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFilterInput {
    node_name: Option<String>,
    tolerations: Vec<PodToleration>,
    tolerates_unschedulable: bool,
    node_affinity: NodeAffinityInput,
    usage: PodUsage,
    spread: Vec<SpreadConstraint>,
    volumes: VolumeInput,
}

impl PodFilterInput {
    /// Parses `pod`. Only its resource quantities can make this fail; an unusable node
    /// affinity term is handled the way kube-scheduler handles it (see
    /// [`super::node_affinity`]).
    pub fn new(pod: &Pod) -> Result<Self, RequestError> {
        let spec = pod.spec.as_ref();
        let tolerations: Vec<_> = spec
            .and_then(|s| s.tolerations.as_deref())
            .unwrap_or_default()
            .iter()
            .map(PodToleration::new)
            .collect();
        Ok(Self {
            node_name: spec
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            tolerates_unschedulable: tolerates_unschedulable(&tolerations),
            tolerations,
            node_affinity: NodeAffinityInput::from_pod(pod),
            usage: PodUsage::from_pod(pod)?,
            spread: SpreadConstraint::from_pod(pod),
            volumes: VolumeInput::default(),
        })
    }

    /// `spec.nodeName`, when set and non-empty.
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    /// `spec.tolerations`, parsed.
    pub fn tolerations(&self) -> &[PodToleration] {
        &self.tolerations
    }

    /// Whether the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`.
    pub fn tolerates_unschedulable(&self) -> bool {
        self.tolerates_unschedulable
    }

    /// Node selector and node affinity, parsed.
    pub fn node_affinity(&self) -> &NodeAffinityInput {
        &self.node_affinity
    }

    /// What the pod will take from its node.
    pub fn usage(&self) -> &PodUsage {
        &self.usage
    }

    /// The pod's effective request.
    pub fn request(&self) -> &ResourceTotals {
        &self.usage.request
    }

    /// The host ports the pod needs.
    pub fn host_ports(&self) -> &[HostPort] {
        &self.usage.host_ports
    }

    /// Who the pod is: labels, namespace, priority, affinity terms.
    pub fn meta(&self) -> &PodMeta {
        &self.usage.meta
    }

    /// `spec.topologySpreadConstraints`, parsed.
    pub fn spread(&self) -> &[SpreadConstraint] {
        &self.spread
    }

    /// The pod's volume constraints, as [`Self::set_volumes`] left them (none after
    /// [`Self::new`]).
    pub fn volumes(&self) -> &VolumeInput {
        &self.volumes
    }

    /// Sets the volume constraints resolved by [`super::volumes::prepare`].
    pub fn set_volumes(&mut self, volumes: VolumeInput) {
        self.volumes = volumes;
    }
}
