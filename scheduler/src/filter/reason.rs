//! Why a node does not fit a pod, worded like kube-scheduler.
//!
//! Each reason string is stable — it names no node and, apart from a taint's key and
//! value or a resource name, carries no amounts — so a caller can count them across
//! nodes into the familiar "0/5000 nodes are available: 3000 Insufficient cpu, ..."
//! message. `NodeResourcesFit` reports every resource the node lacks, so one
//! [`FilterReason`] can carry several reason strings ([`FilterReason::reasons`]).

use std::borrow::Cow;
use std::fmt;

use super::Plugin;
use super::resources::Insufficient;

/// The first filter a node failed, with kube-scheduler's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterReason {
    /// `NodeUnschedulable`: the node is cordoned and the pod does not tolerate it.
    Unschedulable,
    /// `NodeName`: the pod names another node.
    NodeNameMismatch,
    /// `TaintToleration`: the first `NoSchedule`/`NoExecute` taint not tolerated.
    UntoleratedTaint {
        /// The taint key.
        key: String,
        /// The taint value.
        value: String,
    },
    /// `NodeAffinity`: node selector or required node affinity not satisfied.
    AffinityMismatch,
    /// `NodePorts`: a wanted host port is taken.
    PortsInUse,
    /// `NodeResourcesFit`: every resource the node lacks (never empty).
    InsufficientResources(Vec<Insufficient>),
    /// `VolumeBinding`: a bound PersistentVolume's node affinity excludes the node.
    VolumeNodeConflict,
    /// `VolumeZone`: the node is not in a bound PersistentVolume's zone or region.
    VolumeZoneConflict,
}

impl FilterReason {
    /// The kube-scheduler plugin that rejected the node.
    pub fn plugin(&self) -> Plugin {
        match self {
            Self::Unschedulable => Plugin::NodeUnschedulable,
            Self::NodeNameMismatch => Plugin::NodeName,
            Self::UntoleratedTaint { .. } => Plugin::TaintToleration,
            Self::AffinityMismatch => Plugin::NodeAffinity,
            Self::PortsInUse => Plugin::NodePorts,
            Self::InsufficientResources(_) => Plugin::NodeResourcesFit,
            Self::VolumeNodeConflict => Plugin::VolumeBinding,
            Self::VolumeZoneConflict => Plugin::VolumeZone,
        }
    }

    /// Whether evicting pods from the node cannot help (kube-scheduler's
    /// `UnschedulableAndUnresolvable`): true for everything but ports and resources.
    pub fn is_unresolvable(&self) -> bool {
        !matches!(self, Self::PortsInUse | Self::InsufficientResources(_))
    }

    /// The reason strings to aggregate across nodes: one, or one per missing resource.
    pub fn reasons(&self) -> impl Iterator<Item = Cow<'static, str>> + '_ {
        let (single, many): (Option<Cow<'static, str>>, &[Insufficient]) = match self {
            Self::InsufficientResources(missing) => (None, missing),
            Self::Unschedulable => (Some("node(s) were unschedulable".into()), &[]),
            Self::NodeNameMismatch => (
                Some("node(s) didn't match the requested node name".into()),
                &[],
            ),
            Self::UntoleratedTaint { key, value } => (
                Some(format!("node(s) had untolerated taint {{{key}: {value}}}").into()),
                &[],
            ),
            Self::AffinityMismatch => (
                Some("node(s) didn't match Pod's node affinity/selector".into()),
                &[],
            ),
            Self::PortsInUse => (
                Some("node(s) didn't have free ports for the requested pod ports".into()),
                &[],
            ),
            Self::VolumeNodeConflict => (
                Some("node(s) had volume node affinity conflict".into()),
                &[],
            ),
            Self::VolumeZoneConflict => (Some("node(s) had no available volume zone".into()), &[]),
        };
        single
            .into_iter()
            .chain(many.iter().map(Insufficient::reason))
    }
}

impl fmt::Display for FilterReason {
    /// The reasons joined with ", ".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, reason) in self.reasons().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&reason)?;
        }
        Ok(())
    }
}

impl std::error::Error for FilterReason {}
