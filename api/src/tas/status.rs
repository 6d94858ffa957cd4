//! Observed state of the stack, written by the operator through the status subresource.

pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Condition types the operator reports.
pub mod condition_type {
    /// Every operand is applied, rolled out and ready.
    pub const AVAILABLE: &str = "Available";
    /// The operator is changing something (rollout in progress, or paused).
    pub const PROGRESSING: &str = "Progressing";
    /// Something needs attention; the reason and message say what.
    pub const DEGRADED: &str = "Degraded";
    /// The one condition GitOps tools read (kstatus, i.e. Flux, and Argo CD's health
    /// check in docs/argocd): True when Available is True, nothing rolls out and
    /// nothing is Degraded, at the generation in `observedGeneration`; False with the
    /// reason of the first of those that does not hold.
    pub const READY: &str = "Ready";
    /// Who writes the NodeResourceTopology CRD and objects: True when TAS alone does
    /// (or was told to take over); False names the other field managers.
    pub const NRT_OWNERSHIP: &str = "NRTOwnership";
}

/// Observed state of the topology-aware scheduling stack.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAwareSchedulingStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Available`, `Progressing` and `Degraded`, each with a reason and a message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The NodeResourceTopology CRD as found in the cluster.
    #[serde(default, rename = "nrtCRD", skip_serializing_if = "Option::is_none")]
    pub nrt_crd: Option<NrtCrdStatus>,

    /// Node agents, per node group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<NodeGroupStatus>,

    /// Nodes selected by all node groups together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_nodes: Option<i32>,

    /// Nodes, over all groups, whose NodeResourceTopology is present and fresh.
    #[serde(
        default,
        rename = "nodesWithFreshNRT",
        skip_serializing_if = "Option::is_none"
    )]
    pub nodes_with_fresh_nrt: Option<i32>,

    /// The scheduler Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerStatus>,

    /// Every object the operator manages for this stack.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<RelatedObject>,

    /// Namespaces the operator created for `spec.namespace`, by name and uid: the only
    /// namespaces it changes, binds itself rights in and deletes. Recorded by the operator
    /// when it creates one; an annotation cannot prove it (whoever may edit a namespace
    /// may annotate it), and editing the object's spec cannot set its status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_objects: Vec<CreatedObject>,
}

/// An object the operator created, identified by uid: a later object of the same name
/// is not it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct CreatedObject {
    /// Kind, e.g. `Namespace`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// `metadata.uid` of the object the operator created.
    pub uid: String,
}

/// The NodeResourceTopology CRD.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NrtCrdStatus {
    /// The CRD exists and is Established.
    pub installed: bool,
    /// The operator installs and upgrades it (`spec.nrtCRD.manage`).
    pub managed: bool,
    /// Versions the API server serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served_versions: Vec<String>,
    /// The version objects are stored as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_version: Option<String>,
    /// Field managers other than the operator that manage the CRD's spec (e.g. a
    /// node-feature-discovery Helm release).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_managers: Vec<String>,
}

/// Node agents of one node group.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupStatus {
    /// The node group.
    pub name: String,
    /// Nodes the group's selector matches.
    pub desired_nodes: i32,
    /// Nodes whose agent pod is ready.
    pub ready_nodes: i32,
    /// Nodes whose NodeResourceTopology exists with zones and was written within
    /// `spec.scheduler.cache.missedHeartbeats` heartbeat periods.
    #[serde(rename = "nodesWithFreshNRT")]
    pub nodes_with_fresh_nrt: i32,
    /// Nodes whose NodeResourceTopology is missing, or stale: not written for longer
    /// than `spec.scheduler.cache.missedHeartbeats` heartbeat periods (the object's
    /// `tas.dev/heartbeat`, else its last `managedFields` time against the group's
    /// `refresh.heartbeatPeriod`). At most 20 listed; `staleNodeCount` counts them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale_nodes: Vec<String>,
    /// Nodes whose kubelet configuration the agent cannot read, or whose Topology
    /// Manager policy is `none` (at most 20 listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubelet_config_issues: Vec<KubeletConfigIssue>,
    /// Nodes whose NodeResourceTopology another field manager writes (at most 20).
    #[serde(
        default,
        rename = "foreignNRTWriters",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub foreign_nrt_writers: Vec<ForeignNrtWriter>,
    /// How many nodes are missing or stale, listed or not in `staleNodes`.
    #[serde(default)]
    pub stale_node_count: i32,
}

/// The scheduler Deployment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerStatus {
    /// Pods with this `spec.schedulerName` are scheduled by TAS.
    pub scheduler_name: String,
    /// Desired replicas.
    pub replicas: i32,
    /// Ready replicas.
    pub ready_replicas: i32,
}

/// A reference to an object the operator manages.
#[derive(
    KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default,
)]
#[serde(rename_all = "camelCase")]
pub struct RelatedObject {
    /// API group (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// Kind, e.g. `DaemonSet`.
    pub kind: String,
    /// Namespace, for namespaced objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// A node whose kubelet configuration needs attention.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfigIssue {
    /// The node.
    pub node: String,
    /// `ConfigUnreadable` (the agent keeps publishing the last settings it could read, if
    /// any) or `PolicyNone` (the Topology Manager aligns nothing on this node).
    pub reason: String,
    /// Where the agent read, or tried to read, the configuration (host paths, or
    /// `/configz`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// What is wrong, naming the file.
    pub message: String,
}

/// A node whose NodeResourceTopology another field manager writes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct ForeignNrtWriter {
    /// The node (and object) name.
    pub node: String,
    /// The other writers' field managers, e.g. `nfd-topology-updater`.
    pub field_managers: Vec<String>,
}
