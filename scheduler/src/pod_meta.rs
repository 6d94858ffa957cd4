//! [`PodMeta`]: who a pod is, as the cluster-wide plugins and preemption need it —
//! identity, labels, priority, inter-pod affinity terms and NUMA footprint — parsed once
//! per pod update and shared (`Arc`) between the node it is counted on and every
//! scheduling cycle that reads it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::affinity::PodAffinityTerms;
use crate::cache::numa_footprint;
use crate::numa::pins::ContainerPin;
use crate::numa::{PodRequest, Resources};

/// A pod's identity and scheduling-relevant metadata; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMeta {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `spec.preemptionPolicy: Never`.
    pub never_preempts: bool,
    /// Inter-pod affinity terms, when it has any.
    pub affinity: Option<PodAffinityTerms>,
    /// What the kubelet may pin to NUMA zones for it ([`numa_footprint`]).
    pub footprint: Resources,
    /// The PersistentVolumeClaims its volumes use, in its namespace
    /// ([`crate::filter::volumes::claim_names`]).
    pub claims: Vec<String>,
    /// Its app containers and sidecars that may hold NUMA-pinned resources: what a
    /// node agent can publish the NUMA placement of ([`crate::numa::pins`]).
    pub pins: Vec<ContainerPin>,
}

impl PodMeta {
    /// Reads `pod`, whose requests were parsed into `request`.
    pub fn new(pod: &Pod, request: &PodRequest) -> Self {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        Self {
            uid: meta.uid.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            terminating: meta.deletion_timestamp.is_some(),
            never_preempts: spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never"),
            affinity: PodAffinityTerms::from_pod(pod),
            footprint: numa_footprint(request),
            claims: crate::filter::volumes::claim_names(pod),
            pins: crate::numa::pins::of(request),
        }
    }

    /// Whether the pod has required anti-affinity terms (other pods must respect them).
    pub fn has_required_anti_affinity(&self) -> bool {
        self.affinity
            .as_ref()
            .is_some_and(|a| !a.required_anti_affinity.is_empty())
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
