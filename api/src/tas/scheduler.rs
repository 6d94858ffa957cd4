//! NUMA-aware scheduler (`tas-scheduler`) settings.

use super::pod;
use super::updater::DURATION_PATTERN;
use k8s_openapi::api::core::v1::{
    Affinity, ResourceRequirements, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The scheduler name pods opt in with (`spec.schedulerName`) unless configured otherwise.
pub const DEFAULT_SCHEDULER_NAME: &str = "topology-aware-scheduler";

/// The NUMA-aware scheduler: which pods it schedules, how it scores nodes and how it
/// caches per-zone availability between NodeResourceTopology updates.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerSpec {
    /// Container image of the scheduler. Default: the image the operator was released with
    /// (its `--scheduler-image` flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = Rule::new("!self.contains(' ')").message("spec.scheduler.image must not contain spaces"))]
    pub image: Option<String>,

    /// Pods whose `spec.schedulerName` equals this are scheduled by TAS. A DNS-1123 label;
    /// `default-scheduler` is refused because kube-scheduler owns it.
    #[serde(default = "default_scheduler_name")]
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(
        validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("spec.scheduler.schedulerName must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters"),
        validation = Rule::new("self != 'default-scheduler'").message("spec.scheduler.schedulerName must not be 'default-scheduler': that name belongs to kube-scheduler")
    )]
    pub scheduler_name: String,

    /// Scheduler replicas (1 to 5). With more than one, the replicas elect a leader through
    /// a Lease: only the leader binds, the others keep warm caches to take over at once.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 5))]
    pub replicas: i32,

    /// How feasible nodes are ranked.
    #[serde(default)]
    pub scoring: ScoringSpec,

    /// The reserve cache that keeps decisions correct between NodeResourceTopology updates.
    #[serde(default)]
    pub cache: CacheSpec,

    /// What to do with nodes that publish no NodeResourceTopology object.
    #[serde(default)]
    pub nodes_without_topology: NodesWithoutTopology,

    /// Preemption: evicting lower-priority pods for a pod that fits nowhere.
    #[serde(default)]
    pub preemption: PreemptionSpec,

    /// How the devices TAS allocates for a pod's ResourceClaims (Dynamic Resource
    /// Allocation) must line up with the NUMA zones where the kubelet will put the pod's
    /// exclusive CPUs and memory. `Required`: a node where the devices cannot all be
    /// taken from those zones does not fit (devices must publish
    /// `resource.kubernetes.io/numaNode` for their zones to be known). `Preferred`: such
    /// a node still fits, with devices from any zone, but scores below every node where
    /// they line up. Pods without exclusive CPUs or pinned memory, and nodes without a
    /// NodeResourceTopology, take devices from any zone either way. Default: Required.
    #[serde(default, skip_serializing_if = "DraAlignment::is_default")]
    pub dra_alignment: DraAlignment,

    /// Compute resources of the scheduler container.
    #[serde(default = "default_resources")]
    pub resources: ResourceRequirements,

    /// Node labels the scheduler pods require, on top of `kubernetes.io/os: linux`, which
    /// always applies. At most 32. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "pod::label_map_schema")]
    #[x_kube(
        validation = pod::linux_only("spec.scheduler.nodeSelector"),
        validation = pod::qualified_keys("spec.scheduler.nodeSelector"),
        validation = pod::label_values("spec.scheduler.nodeSelector")
    )]
    pub node_selector: BTreeMap<String, String>,

    /// Tolerations of the scheduler pods, e.g. to run them on tainted control-plane or
    /// infrastructure nodes. At most 32. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub tolerations: Vec<Toleration>,

    /// Node affinity, pod affinity and pod anti-affinity of the scheduler pods.
    /// Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// PriorityClass of the scheduler pods; empty for none (the cluster's default
    /// priority). Default: `system-cluster-critical`, as for kube-scheduler.
    #[serde(default = "pod::default_scheduler_priority_class")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = pod::priority_class_name("spec.scheduler.priorityClassName"))]
    pub priority_class_name: String,

    /// Topology spread constraints of the scheduler pods. Unset: spread the replicas
    /// over nodes as a preference (maxSkew 1 over `kubernetes.io/hostname`,
    /// ScheduleAnyway, counting the pods labelled `app.kubernetes.io/name: tas-scheduler`
    /// of the same `pod-template-hash`). `[]`: none. Set: exactly these, replacing that
    /// default; select the scheduler pods with `app.kubernetes.io/name: tas-scheduler`.
    /// At most 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8))]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,

    /// Extra labels of the scheduler pods (not of the Deployment). The operator's own
    /// (`app.kubernetes.io/name`, `managed-by`, `part-of`, `component`, `tas.dev/*`) and
    /// the controllers' (`pod-template-hash`) are refused. At most 32. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "pod::label_map_schema")]
    #[x_kube(
        validation = pod::reserved_label_keys("spec.scheduler.podLabels"),
        validation = pod::qualified_keys("spec.scheduler.podLabels"),
        validation = pod::label_values("spec.scheduler.podLabels")
    )]
    pub pod_labels: BTreeMap<String, String>,

    /// Extra annotations of the scheduler pods, e.g. for a service mesh or a log
    /// shipper. `tas.dev/*` keys are the operator's and refused. At most 32. Default:
    /// none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "pod::annotation_map_schema")]
    #[x_kube(
        validation = pod::reserved_annotation_keys("spec.scheduler.podAnnotations"),
        validation = pod::qualified_keys("spec.scheduler.podAnnotations")
    )]
    pub pod_annotations: BTreeMap<String, String>,

    /// Percentage of the nodes each scheduling cycle finds feasible before it stops
    /// filtering and scores only those, as kube-scheduler's `percentageOfNodesToScore`:
    /// 1 to 100, or 0 for adaptive (50 % minus one point per 125 nodes, at least 5 %).
    /// At least 100 feasible nodes are looked for either way, and clusters of fewer
    /// than 100 nodes are always filtered whole; successive cycles start where the last
    /// one stopped, so every node gets its turn. 100 filters every node every cycle.
    /// Every candidate still passes every filter, the NUMA fit included. Default: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0, max = 100))]
    #[x_kube(validation = Rule::new("self >= 0 && self <= 100").message("spec.scheduler.percentageOfNodesToScore must be between 0 (adaptive) and 100"))]
    pub percentage_of_nodes_to_score: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Default for SchedulerSpec {
    fn default() -> Self {
        Self {
            image: None,
            scheduler_name: default_scheduler_name(),
            replicas: default_replicas(),
            scoring: ScoringSpec::default(),
            cache: CacheSpec::default(),
            nodes_without_topology: NodesWithoutTopology::default(),
            preemption: PreemptionSpec::default(),
            dra_alignment: DraAlignment::default(),
            resources: default_resources(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            affinity: None,
            priority_class_name: pod::default_scheduler_priority_class(),
            topology_spread_constraints: None,
            pod_labels: BTreeMap::new(),
            pod_annotations: BTreeMap::new(),
            percentage_of_nodes_to_score: 0,
        }
    }
}

fn default_scheduler_name() -> String {
    DEFAULT_SCHEDULER_NAME.to_owned()
}

fn default_replicas() -> i32 {
    1
}

fn default_resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_owned());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), q("100m")),
            ("memory".to_owned(), q("64Mi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_owned(), q("256Mi"))])),
        ..ResourceRequirements::default()
    }
}

/// Node ranking strategy.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum ScoringStrategy {
    /// Prefer the zones and nodes with the most free resources (spreads load).
    LeastAllocated,
    /// Prefer the fullest zones and nodes that still fit (packs, keeps whole zones free).
    MostAllocated,
    /// Prefer placements that leave CPU and memory use balanced.
    BalancedAllocation,
    /// Prefer nodes where the pod needs the fewest NUMA zones (best alignment).
    LeastNUMANodes,
    /// Prefer the node where the pod fills the NUMA zone the kubelet will give it most
    /// tightly, without breaking the node's largest free zone (fragmentation-aware).
    /// The default.
    #[default]
    FragmentationAware,
}

/// Scoring settings.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScoringSpec {
    /// LeastAllocated, MostAllocated, BalancedAllocation, LeastNUMANodes or
    /// FragmentationAware. A node labelled `tas.dev/numa-allocation-strategy` with one of
    /// these values is scored with that strategy instead.
    #[serde(default)]
    pub strategy: ScoringStrategy,
    /// Resources that count in the score and their weights (1 to 100). Names are
    /// resource names as in pod requests: `cpu`, `memory`, `hugepages-1Gi`, `vendor.com/gpu`.
    #[serde(default = "default_weights")]
    #[schemars(length(min = 1, max = 16))]
    #[x_kube(
        merge_strategy = ListMerge::Map(vec!["name".into()]),
        validation = Rule::new("self.all(r, self.filter(s, s.name == r.name).size() == 1)").message("spec.scheduler.scoring.resources[].name must be unique")
    )]
    pub resources: Vec<ResourceWeight>,
}

impl Default for ScoringSpec {
    fn default() -> Self {
        Self {
            strategy: ScoringStrategy::default(),
            resources: default_weights(),
        }
    }
}

fn default_weights() -> Vec<ResourceWeight> {
    vec![
        ResourceWeight {
            name: "cpu".to_owned(),
            weight: 1,
        },
        ResourceWeight {
            name: "memory".to_owned(),
            weight: 1,
        },
    ]
}

/// A resource and its weight in the score.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ResourceWeight {
    /// Resource name, e.g. `cpu`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Weight from 1 to 100.
    #[schemars(range(min = 1, max = 100))]
    pub weight: i32,
}

/// Which pods, not placed by this scheduler, make a node's cached state untrusted until
/// its NodeResourceTopology catches up.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum ForeignPodsDetection {
    /// Any pod bound by another scheduler.
    All,
    /// Only foreign pods that request exclusive resources (integer CPUs of Guaranteed
    /// pods, hugepages, devices): the only ones that change per-zone availability.
    #[default]
    OnlyExclusiveResources,
    /// Ignore foreign pods.
    None,
}

/// Which pods bound to a node the reserve cache counts when it computes the pod-set
/// fingerprint it compares with the node's NodeResourceTopology. Both modes use the
/// same single watch of bound pods; only the phases counted differ.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum InformerMode {
    /// Only `Running` pods count.
    #[default]
    Shared,
    /// Every pod but `Pending` ones counts (`Running`, and `Succeeded` or `Failed` pods
    /// not deleted yet), for node agents that keep reporting finished pods.
    Dedicated,
}

/// What a node without a NodeResourceTopology object means for NUMA-aware placement.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum NodesWithoutTopology {
    /// No NUMA opinion: the node is judged by node-level fit only.
    #[default]
    Schedule,
    /// The node is unschedulable for this scheduler until it publishes its topology.
    Skip,
}

/// How DRA devices must line up with the NUMA zones of a pod's exclusive CPUs and
/// memory (see `SchedulerSpec::dra_alignment`).
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum DraAlignment {
    /// Only nodes where every newly allocated device sits in those zones fit.
    #[default]
    Required,
    /// Nodes where the devices line up score higher; others still fit.
    Preferred,
}

impl DraAlignment {
    /// Whether this is the default (left out when rendered).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Preemption settings.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionSpec {
    /// When a pod fits no node, evict the smallest set of lower-priority pods from one
    /// node so that it fits there, NUMA alignment included (PodDisruptionBudgets are
    /// respected where possible; pods with `preemptionPolicy: Never` never preempt).
    /// The pod is nominated to the node and bound once the node's NodeResourceTopology
    /// shows the freed resources. Default: true.
    #[serde(default = "super::default_true")]
    pub enabled: bool,
}

impl Default for PreemptionSpec {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// The reserve cache: after placing a pod, the scheduler subtracts it from every zone of
/// the node until the node's NodeResourceTopology shows the pod (fingerprint match).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(format!("!self.resyncPeriod.matches('{DURATION_PATTERN}') || !self.maxStaleness.matches('{DURATION_PATTERN}') || duration(self.maxStaleness) >= duration(self.resyncPeriod)")).message("spec.scheduler.cache.maxStaleness must be at least spec.scheduler.cache.resyncPeriod"))]
pub struct CacheSpec {
    /// How often nodes with pending reservations are re-checked against their
    /// NodeResourceTopology (at least 1s).
    #[serde(default = "default_resync")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(super::updater::period_rule()).message("spec.scheduler.cache.resyncPeriod must be a duration of at least 1s, e.g. '5s'"))]
    pub resync_period: String,
    /// Longest time a node may stay in the pessimistic (reserved) state. Past it, the
    /// scheduler trusts the latest NodeResourceTopology, logs it and counts it in a metric.
    #[serde(default = "default_max_staleness")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(super::updater::period_rule()).message("spec.scheduler.cache.maxStaleness must be a duration of at least 1s, e.g. '2m'"))]
    pub max_staleness: String,
    /// All, OnlyExclusiveResources or None.
    #[serde(default)]
    pub foreign_pods: ForeignPodsDetection,
    /// Shared (the fingerprint counts Running pods) or Dedicated (every pod but
    /// Pending ones).
    #[serde(default)]
    pub informer_mode: InformerMode,
    /// How many heartbeat periods a NodeResourceTopology written by the TAS node agent
    /// (`tas.dev/heartbeat` attribute) may go without a write before its writer counts as
    /// stopped (1 to 100). The scheduler then never forces such a node clean after
    /// `maxStaleness`: it keeps counting the pods bound since the object's last write
    /// against the node until a fresh object arrives. The operator lists such nodes in
    /// `status.nodeGroups[].staleNodes` and reports `Degraded=True` (`StaleTopology`).
    /// Objects without the attribute (other writers) are judged as before. Default 3.
    #[serde(default = "default_missed_heartbeats")]
    #[schemars(range(min = 1, max = 100))]
    pub missed_heartbeats: u32,
}

impl Default for CacheSpec {
    fn default() -> Self {
        Self {
            resync_period: default_resync(),
            max_staleness: default_max_staleness(),
            foreign_pods: ForeignPodsDetection::default(),
            informer_mode: InformerMode::default(),
            missed_heartbeats: default_missed_heartbeats(),
        }
    }
}

fn default_missed_heartbeats() -> u32 {
    crate::nrt::heartbeat::DEFAULT_MISSED
}

fn default_resync() -> String {
    "5s".to_owned()
}

fn default_max_staleness() -> String {
    "2m".to_owned()
}
