//! Node groups: sets of nodes, chosen by label selector, that run one node-agent
//! DaemonSet with one set of settings.

use super::kubelet::{KubeletOverride, TopologyManagerOverride};
use super::updater::{PodsFingerprint, RefreshMode, RefreshSpec, UpdaterSpec, period_rule};
use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The name of the implicit group used when `spec.nodeGroups` is empty.
pub const ALL_NODES_GROUP: &str = "all";

/// A set of nodes selected by labels, running the node agent with one set of settings.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroup {
    /// Group name, used in the names of the objects created for it (e.g. the DaemonSet
    /// `tas-updater-<name>`): a DNS-1123 label of at most 40 characters.
    #[schemars(length(min = 1, max = 40))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("spec.nodeGroups[].name must be a DNS-1123 label (lowercase letters, digits, '-') of at most 40 characters"))]
    pub name: String,

    /// Nodes in this group. matchLabels and matchExpressions (In, NotIn, Exists,
    /// DoesNotExist) as in any Kubernetes label selector; an empty selector selects every
    /// node. A node must not be selected by two groups.
    #[serde(default)]
    pub node_selector: LabelSelector,

    /// Overrides of `spec.updater` for this group; unset fields inherit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updater: Option<NodeGroupUpdater>,
}

impl NodeGroup {
    /// The implicit group covering every node.
    pub fn all_nodes() -> Self {
        Self {
            name: ALL_NODES_GROUP.to_owned(),
            node_selector: LabelSelector::default(),
            updater: None,
        }
    }

    /// The node-agent settings of this group: `base` with this group's overrides applied.
    pub fn merged_updater(&self, base: &UpdaterSpec) -> UpdaterSpec {
        let mut merged = base.clone();
        let Some(o) = &self.updater else {
            return merged;
        };
        super::pod::merge_group_pod_overrides(&mut merged, o);
        if let Some(image) = &o.image {
            merged.image = Some(image.clone());
        }
        if let Some(r) = &o.refresh {
            merged.refresh = RefreshSpec {
                mode: r.mode.unwrap_or(base.refresh.mode),
                period: r
                    .period
                    .clone()
                    .unwrap_or_else(|| base.refresh.period.clone()),
                debounce: r
                    .debounce
                    .clone()
                    .unwrap_or_else(|| base.refresh.debounce.clone()),
                heartbeat_period: r
                    .heartbeat_period
                    .clone()
                    .unwrap_or_else(|| base.refresh.heartbeat_period.clone()),
            };
        }
        if let Some(fp) = o.pods_fingerprint {
            merged.pods_fingerprint = fp;
        }
        if let Some(ex) = &o.exclude_pods {
            merged.exclude_pods = ex.clone();
        }
        if let Some(t) = &o.tolerations {
            merged.tolerations = t.clone();
        }
        if let Some(r) = &o.resources {
            merged.resources = r.clone();
        }
        merge_kubelet(&mut merged, o);
        merged
    }
}

/// Per-group overrides of the node-agent settings. Every field is optional; an unset
/// field takes the value from `spec.updater`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupUpdater {
    /// Container image for this group's agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = Rule::new("!self.contains(' ')").message("spec.nodeGroups[].updater.image must not contain spaces"))]
    pub image: Option<String>,
    /// Publishing triggers for this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh: Option<RefreshOverride>,
    /// Which pods the fingerprint covers on this group's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_fingerprint: Option<PodsFingerprint>,
    /// Pods left out of the fingerprint (replaces, not extends, `spec.updater.excludePods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 253)))]
    #[x_kube(validation = Rule::new(r#"self.all(p, p.matches('^([^/\\s\\[\\]{}\\\\]|\\[!?[^/\\s\\[\\]\\\\^!-]+\\]|\\{[^/\\s\\[\\]{}\\\\]+\\})+/([^/\\s\\[\\]{}\\\\]|\\[!?[^/\\s\\[\\]\\\\^!-]+\\]|\\{[^/\\s\\[\\]{}\\\\]+\\})+$'))"#).message("spec.nodeGroups[].updater.excludePods entries must look like 'namespace/name' (globs: *, ?, [class] without ranges, {a,b} without nesting)"))]
    pub exclude_pods: Option<Vec<String>>,
    /// Tolerations for this group's agents (replaces `spec.updater.tolerations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Compute resources for this group's agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// PriorityClass of this group's agent pods, empty for none (replaces
    /// `spec.updater.priorityClassName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = super::pod::priority_class_name("spec.nodeGroups[].updater.priorityClassName"))]
    pub priority_class_name: Option<String>,
    /// Extra labels of this group's agent pods (replaces, not extends,
    /// `spec.updater.podLabels`; the same keys are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::pod::label_map_schema")]
    #[x_kube(
        validation = super::pod::reserved_label_keys("spec.nodeGroups[].updater.podLabels"),
        validation = super::pod::qualified_keys("spec.nodeGroups[].updater.podLabels"),
        validation = super::pod::label_values("spec.nodeGroups[].updater.podLabels")
    )]
    pub pod_labels: Option<BTreeMap<String, String>>,
    /// Extra annotations of this group's agent pods (replaces, not extends,
    /// `spec.updater.podAnnotations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::pod::annotation_map_schema")]
    #[x_kube(
        validation = super::pod::reserved_annotation_keys("spec.nodeGroups[].updater.podAnnotations"),
        validation = super::pod::qualified_keys("spec.nodeGroups[].updater.podAnnotations")
    )]
    pub pod_annotations: Option<BTreeMap<String, String>>,
    /// How many of this group's agents may be down at once during a rollout (replaces
    /// `spec.updater.maxUnavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::pod::max_unavailable_override_schema")]
    #[x_kube(validation = super::pod::max_unavailable("spec.nodeGroups[].updater.maxUnavailable"))]
    pub max_unavailable: Option<IntOrString>,
    /// Where this group's kubelets keep their files; unset fields inherit
    /// `spec.updater.kubelet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletOverride>,
    /// Topology Manager settings to publish on this group's nodes (kubelets configured by
    /// flags); unset fields inherit `spec.updater.topologyManager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_manager: Option<TopologyManagerOverride>,
    /// Whether this group's agents write NodeResourceTopology objects that another field
    /// manager writes (inherits `spec.updater.takeOverNRT`).
    #[serde(
        default,
        rename = "takeOverNRT",
        skip_serializing_if = "Option::is_none"
    )]
    pub take_over_nrt: Option<bool>,
}

/// Per-group overrides of `spec.updater.refresh`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RefreshOverride {
    /// Periodic, Events or PeriodicAndEvents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<RefreshMode>,
    /// Re-check interval (at least 1s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(period_rule()).message("spec.nodeGroups[].updater.refresh.period must be a duration of at least 1s, e.g. '5s'"))]
    pub period: Option<String>,
    /// Pod-event debounce (0s to 10s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(super::updater::debounce_rule()).message("spec.nodeGroups[].updater.refresh.debounce must be a duration between 0s and 10s"))]
    pub debounce: Option<String>,
    /// Longest time between two writes of a node's NodeResourceTopology (10s to 1h); see
    /// `spec.updater.refresh.heartbeatPeriod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(super::updater::heartbeat_period_rule()).message("spec.nodeGroups[].updater.refresh.heartbeatPeriod must be a duration between 10s and 1h, e.g. '10m'"))]
    pub heartbeat_period: Option<String>,
}

/// The kubelet paths, Topology Manager overrides and NRT take-over of a group.
fn merge_kubelet(merged: &mut UpdaterSpec, o: &NodeGroupUpdater) {
    if let Some(k) = &o.kubelet {
        let paths = &mut merged.kubelet;
        if let Some(dir) = &k.pod_resources_dir {
            paths.pod_resources_dir = dir.clone();
        }
        if let Some(file) = &k.config_file {
            paths.config_file = file.clone();
        }
        if let Some(dir) = &k.config_dir {
            paths.config_dir = Some(dir.clone());
        }
        if let Some(configz) = k.configz {
            paths.configz = configz;
        }
    }
    if let Some(tm) = &o.topology_manager {
        merged.topology_manager = merged.topology_manager.merged(tm);
    }
    if let Some(take_over) = o.take_over_nrt {
        merged.take_over_nrt = take_over;
    }
}
