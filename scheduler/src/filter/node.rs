//! A node as the filters see it: parsed node fields plus what its pods take.
//!
//! [`NodeInfo::new`] parses the Node once per node update (labels, taints,
//! allocatable); [`NodeInfo::set_node`] re-parses them and keeps the pods. Bound (or
//! assumed) pods are added and removed one at a time, keyed by uid, and the node keeps
//! running totals of their requests and host ports, so a filter never walks the pods.
//!
//! Adding a uid that is already there replaces its old contribution, so "assume the
//! pod, then observe its binding" counts it once. A pod in phase `Succeeded` or
//! `Failed` holds nothing (kube-scheduler does not even cache it), so adding one
//! removes it.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};

use super::node_ports::HostPortSet;
use super::pod::PodUsage;
use super::resources::{Allocatable, AllocatableError, ResourceTotals};
use super::taint_toleration::NodeTaint;
use crate::numa::RequestError;
use crate::numa::node_strategy::{UnknownStrategy, label_strategy};
use crate::numa::score::ScoringStrategy;

/// Why a pod could not be added to a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddPodError {
    /// The pod has no `metadata.uid` to key it by.
    #[error("pod has no uid")]
    MissingUid,
    /// The pod's requests do not parse.
    #[error(transparent)]
    Request(#[from] RequestError),
}

/// A node and the pods bound to it; see the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    name: String,
    /// The Node object's uid (empty when it has none).
    uid: String,
    labels: BTreeMap<String, String>,
    /// The NUMA allocation strategy its label names, read once per Node update.
    numa_strategy: Option<Result<ScoringStrategy, UnknownStrategy>>,
    unschedulable: bool,
    taints: Vec<NodeTaint>,
    allocatable: Allocatable,
    requested: ResourceTotals,
    used_ports: HostPortSet,
    pods: HashMap<String, PodUsage>,
    /// Pods with any inter-pod affinity term (the affinity score scans only these
    /// when the incoming pod has no preferred term).
    with_affinity: usize,
    /// Pods with required anti-affinity terms (every incoming pod must respect them).
    with_required_anti_affinity: usize,
}

impl NodeInfo {
    /// Parses `node`, with no pods yet.
    pub fn new(node: &Node) -> Result<Self, AllocatableError> {
        let mut info = Self::default();
        info.set_node(node)?;
        Ok(info)
    }

    /// Replaces the node's own fields from an updated Node, keeping its pods. On error
    /// nothing changes.
    pub fn set_node(&mut self, node: &Node) -> Result<(), AllocatableError> {
        let allocatable = match node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
            Some(list) => Allocatable::parse(list)?,
            None => Allocatable::default(),
        };
        let spec = node.spec.as_ref();
        self.allocatable = allocatable;
        self.name = node.metadata.name.clone().unwrap_or_default();
        self.uid = node.metadata.uid.clone().unwrap_or_default();
        self.labels = node.metadata.labels.clone().unwrap_or_default();
        self.numa_strategy = label_strategy(&self.labels);
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.taints = spec
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default()
            .iter()
            .map(NodeTaint::new)
            .collect();
        Ok(())
    }

    /// Adds (or updates) a pod bound or assumed to this node. A terminal pod is
    /// removed instead. On error nothing changes.
    pub fn add_pod(&mut self, pod: &Pod) -> Result<(), AddPodError> {
        let uid = pod
            .metadata
            .uid
            .as_deref()
            .filter(|uid| !uid.is_empty())
            .ok_or(AddPodError::MissingUid)?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            self.remove_pod(uid);
            return Ok(());
        }
        let usage = PodUsage::from_pod(pod)?;
        self.add_usage(uid, usage);
        Ok(())
    }

    /// Adds (or replaces) the usage of pod `uid`, e.g. from an already parsed
    /// [`super::PodFilterInput::usage`] when assuming a pod.
    pub fn add_usage(&mut self, uid: &str, usage: PodUsage) {
        match self.pods.get(uid) {
            Some(old) if *old == usage => return,
            Some(_) => {
                self.remove_pod(uid);
            }
            None => {}
        }
        self.account(&usage, 1);
        self.pods.insert(uid.to_owned(), usage);
    }

    /// Removes pod `uid`; returns whether it was there.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        match self.pods.remove(uid) {
            Some(usage) => {
                self.account(&usage, -1);
                true
            }
            None => false,
        }
    }

    fn account(&mut self, usage: &PodUsage, sign: i64) {
        self.requested.add_scaled(&usage.request, sign);
        let step = |n: &mut usize| {
            *n = if sign > 0 {
                *n + 1
            } else {
                n.saturating_sub(1)
            }
        };
        if usage.meta.affinity.is_some() {
            step(&mut self.with_affinity);
        }
        if usage.meta.has_required_anti_affinity() {
            step(&mut self.with_required_anti_affinity);
        }
        for port in &usage.host_ports {
            if sign > 0 {
                self.used_ports.add(port);
            } else {
                self.used_ports.remove(port);
            }
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The NUMA allocation strategy of the node's label (see
    /// [`crate::numa::node_strategy`]): `None` without the label.
    pub fn numa_strategy(&self) -> Option<&Result<ScoringStrategy, UnknownStrategy>> {
        self.numa_strategy.as_ref()
    }

    /// `spec.unschedulable`.
    pub fn is_unschedulable(&self) -> bool {
        self.unschedulable
    }

    /// `spec.taints`, parsed, in the node's order.
    pub fn taints(&self) -> &[NodeTaint] {
        &self.taints
    }

    /// `status.allocatable`, parsed.
    pub fn allocatable(&self) -> &Allocatable {
        &self.allocatable
    }

    /// The summed requests of the pods on the node.
    pub fn requested(&self) -> &ResourceTotals {
        &self.requested
    }

    /// Host ports held by the pods on the node.
    pub fn used_ports(&self) -> &HostPortSet {
        &self.used_ports
    }

    /// Number of pods on the node.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Whether pod `uid` is on the node.
    pub fn contains_pod(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// What pod `uid` takes from the node, if it is there.
    pub fn pod(&self, uid: &str) -> Option<&PodUsage> {
        self.pods.get(uid)
    }

    /// The Node object's uid (empty when it has none).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The node's pods by uid, the node itself dropped.
    pub fn into_pods(self) -> HashMap<String, PodUsage> {
        self.pods
    }

    /// The pods on the node (bound and assumed), in no particular order.
    pub fn pods(&self) -> impl Iterator<Item = &PodUsage> {
        self.pods.values()
    }

    /// Whether some pod on the node has an inter-pod affinity term.
    pub fn has_pods_with_affinity(&self) -> bool {
        self.with_affinity > 0
    }

    /// Whether some pod on the node has a required anti-affinity term.
    pub fn has_pods_with_required_anti_affinity(&self) -> bool {
        self.with_required_anti_affinity > 0
    }
}
