//! Node-level filters with kube-scheduler's semantics, plus the raw scores that go
//! with them.
//!
//! A secondary scheduler must not place a pod where the default scheduler's own
//! filters would have refused it, so this module re-implements the node-local
//! plugins of kube-scheduler's default profile, in its order:
//!
//! 1. [`node_unschedulable`] — cordoned nodes;
//! 2. [`node_name`] — `spec.nodeName`;
//! 3. [`taint_toleration`] — `NoSchedule`/`NoExecute` taints;
//! 4. [`node_affinity`] — `nodeSelector` and required node affinity;
//! 5. [`node_ports`] — host ports;
//! 6. [`node_resources_fit`] — requests against allocatable, and pod count;
//! 7. [`volume_binding`] — the node affinity of the pod's bound PersistentVolumes;
//! 8. [`volume_zone`] — their zone and region labels.
//!
//! What the volume filters compare is resolved once per attempt by
//! [`volumes::prepare`] (claims, volumes and storage classes from the watches'
//! [`volume_catalog`]), which also keeps a pod Pending when a claim is missing, being
//! deleted, unbound, or `ReadWriteOncePod` and in use ([`volume_restrictions`]).
//!
//! Data flows in three steps so the per pod × node work is comparisons only:
//!
//! - [`PodFilterInput::new`] — once per pod: tolerations, selectors, the effective
//!   request and host ports, parsed.
//! - [`NodeInfo`] — once per Node update ([`NodeInfo::set_node`]) and once per pod
//!   bound to or removed from the node ([`NodeInfo::add_pod`],
//!   [`NodeInfo::remove_pod`]), keeping running totals.
//! - [`filter_node`] — per pod × node: runs the plugins and returns the first
//!   [`FilterReason`], whose strings aggregate across nodes like kube-scheduler's.
//!
//! [`taint_toleration::score`] and [`node_affinity::score`] give kube-scheduler's raw
//! scores, which [`score::normalize`] scales to 0..=100 across the feasible nodes.
//!
//! The plugins that need cluster-wide state live next door: `PodTopologySpread` in
//! [`crate::spread`], `InterPodAffinity` in [`crate::affinity`]. Not covered at all:
//! `NodeVolumeLimits` (attachable volume counts), the in-tree disk conflicts of
//! `VolumeRestrictions`, volume binding itself (see [`volumes`]), in-place resize
//! status, and the profile-level knobs (ignored resources, added affinity). Pod-level
//! `spec.resources` count as kube-scheduler counts them (cpu and memory replace the
//! containers' sums; see [`crate::numa::request`]).

pub mod node;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_selector;
pub mod node_unschedulable;
pub mod pod;
pub mod reason;
pub mod resources;
pub mod score;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_catalog;
pub mod volume_restrictions;
pub mod volume_zone;
pub mod volumes;

use std::fmt;

pub use node::{AddPodError, NodeInfo};
pub use pod::{PodFilterInput, PodUsage};
pub use reason::FilterReason;
pub use resources::{Insufficient, ResourceName, ResourceTotals};
pub use volumes::{VolumeInput, VolumeProblem};

/// A kube-scheduler filter plugin implemented here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plugin {
    /// Cordoned nodes.
    NodeUnschedulable,
    /// `spec.nodeName`.
    NodeName,
    /// Taints and tolerations.
    TaintToleration,
    /// Node selector and node affinity.
    NodeAffinity,
    /// Host ports.
    NodePorts,
    /// Resource requests and pod count.
    NodeResourcesFit,
    /// Node affinity of bound PersistentVolumes.
    VolumeBinding,
    /// Zone and region labels of bound PersistentVolumes.
    VolumeZone,
}

impl Plugin {
    /// Every plugin, in the order kube-scheduler's default profile runs them.
    pub const FILTER_ORDER: [Self; 8] = [
        Self::NodeUnschedulable,
        Self::NodeName,
        Self::TaintToleration,
        Self::NodeAffinity,
        Self::NodePorts,
        Self::NodeResourcesFit,
        Self::VolumeBinding,
        Self::VolumeZone,
    ];

    /// kube-scheduler's name for the plugin.
    pub fn name(self) -> &'static str {
        match self {
            Self::NodeUnschedulable => "NodeUnschedulable",
            Self::NodeName => "NodeName",
            Self::TaintToleration => "TaintToleration",
            Self::NodeAffinity => "NodeAffinity",
            Self::NodePorts => "NodePorts",
            Self::NodeResourcesFit => "NodeResourcesFit",
            Self::VolumeBinding => "VolumeBinding",
            Self::VolumeZone => "VolumeZone",
        }
    }

    /// Runs this plugin's filter.
    pub fn filter(self, pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
        match self {
            Self::NodeUnschedulable => node_unschedulable::filter(pod, node),
            Self::NodeName => node_name::filter(pod, node),
            Self::TaintToleration => taint_toleration::filter(pod, node),
            Self::NodeAffinity => node_affinity::filter(pod, node),
            Self::NodePorts => node_ports::filter(pod, node),
            Self::NodeResourcesFit => node_resources_fit::filter(pod, node),
            Self::VolumeBinding => volume_binding::filter(pod, node),
            Self::VolumeZone => volume_zone::filter(pod, node),
        }
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs every filter in kube-scheduler's order; the first failure wins.
pub fn filter_node(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    Plugin::FILTER_ORDER
        .iter()
        .try_for_each(|plugin| plugin.filter(pod, node))
}

#[cfg(test)]
mod tests;
