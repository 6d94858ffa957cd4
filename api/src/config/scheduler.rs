//! The scheduler's configuration file, as the operator renders it into a ConfigMap.

use crate::tas::{CacheSpec, DraAlignment, NodesWithoutTopology, PreemptionSpec, ScoringSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

/// File name of the configuration inside the ConfigMap / mounted directory.
pub const FILE_NAME: &str = "config.yaml";
/// Port of `/healthz`, `/readyz` and `/metrics`.
pub const HTTP_PORT: u16 = 8080;
/// Scheduling attempts the scheduler keeps for `GET /debug/decisions` by default.
pub const DEFAULT_DECISION_HISTORY: u32 = 512;
/// The most `decisionHistory` may be.
pub const MAX_DECISION_HISTORY: u32 = 100_000;

/// `tas-scheduler --config FILE`.
///
/// There are no cluster-wide default topology spread constraints (kube-scheduler's
/// `defaultConstraints`): pods are spread by their own constraints only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Pods with this `spec.schedulerName` are scheduled.
    #[serde(default = "default_scheduler_name")]
    pub scheduler_name: String,
    /// Leader election among replicas.
    #[serde(default)]
    pub leader_election: LeaderElection,
    /// Node ranking.
    #[serde(default)]
    pub scoring: ScoringSpec,
    /// Reserve cache.
    #[serde(default)]
    pub cache: CacheSpec,
    /// Nodes without a NodeResourceTopology.
    #[serde(default)]
    pub nodes_without_topology: NodesWithoutTopology,
    /// Nodes filtered in parallel per scheduling cycle (0: number of CPUs).
    #[serde(default)]
    pub parallelism: u32,
    /// Backoff of unschedulable pods.
    #[serde(default)]
    pub backoff: Backoff,
    /// Preemption of lower-priority pods (on unless `enabled: false`).
    #[serde(default)]
    pub preemption: PreemptionSpec,
    /// The node selectors of the TAS node groups (nodes that run the node agent). A
    /// node one of them selects is not trusted without a NodeResourceTopology: pods
    /// with exclusive resources stay off it until it publishes one, whatever
    /// `nodesWithoutTopology` says. Empty (the default): no node is known to be in one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<LabelSelector>,
    /// Percentage of the nodes a cycle finds feasible before it stops filtering and
    /// scores those (kube-scheduler's `percentageOfNodesToScore`): 1–100, or 0 for
    /// adaptive (50 % minus one point per 125 nodes, at least 5 %). At least 100 nodes
    /// are looked for either way; a cluster of fewer is always filtered whole.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub percentage_of_nodes_to_score: u32,
    /// Whether the devices allocated for a pod's ResourceClaims must sit in the NUMA
    /// zones of its exclusive CPUs and memory (`Required`) or only score higher there
    /// (`Preferred`).
    #[serde(default, skip_serializing_if = "DraAlignment::is_default")]
    pub dra_alignment: DraAlignment,
    /// Recent scheduling attempts kept in memory for `GET /debug/decisions` (`kubectl
    /// tas decisions`, `kubectl tas gather`): 0 (keep none) to
    /// [`MAX_DECISION_HISTORY`], [`DEFAULT_DECISION_HISTORY`] when unset.
    #[serde(
        default = "default_decision_history",
        skip_serializing_if = "is_default_decision_history"
    )]
    pub decision_history: u32,
}

fn default_decision_history() -> u32 {
    DEFAULT_DECISION_HISTORY
}

fn is_default_decision_history(v: &u32) -> bool {
    *v == DEFAULT_DECISION_HISTORY
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            scheduler_name: default_scheduler_name(),
            leader_election: LeaderElection::default(),
            scoring: ScoringSpec::default(),
            cache: CacheSpec::default(),
            nodes_without_topology: NodesWithoutTopology::default(),
            parallelism: 0,
            backoff: Backoff::default(),
            preemption: PreemptionSpec::default(),
            node_groups: Vec::new(),
            percentage_of_nodes_to_score: 0,
            dra_alignment: DraAlignment::default(),
            decision_history: DEFAULT_DECISION_HISTORY,
        }
    }
}

fn default_scheduler_name() -> String {
    crate::tas::DEFAULT_SCHEDULER_NAME.to_owned()
}

/// Leader election on a `coordination.k8s.io` Lease.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElection {
    /// Elect a leader (needed with more than one replica).
    #[serde(default)]
    pub enabled: bool,
    /// Lease name.
    #[serde(default = "default_lease_name")]
    pub lease_name: String,
    /// Lease namespace (default: the pod's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_namespace: Option<String>,
    /// How long a lease is valid without renewal.
    #[serde(default = "default_lease_duration")]
    pub lease_duration: String,
    /// How often the leader renews.
    #[serde(default = "default_renew_period")]
    pub renew_period: String,
}

impl Default for LeaderElection {
    fn default() -> Self {
        Self {
            enabled: false,
            lease_name: default_lease_name(),
            lease_namespace: None,
            lease_duration: default_lease_duration(),
            renew_period: default_renew_period(),
        }
    }
}

fn default_lease_name() -> String {
    "tas-scheduler".to_owned()
}
fn default_lease_duration() -> String {
    "15s".to_owned()
}
fn default_renew_period() -> String {
    "5s".to_owned()
}

/// Retry delays of unschedulable pods: doubling from `initial` up to `max`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Backoff {
    /// First retry delay.
    #[serde(default = "default_initial")]
    pub initial: String,
    /// Longest retry delay.
    #[serde(default = "default_max")]
    pub max: String,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: default_initial(),
            max: default_max(),
        }
    }
}

fn default_initial() -> String {
    "1s".to_owned()
}
fn default_max() -> String {
    "10s".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_default_config() {
        let c: SchedulerConfig = serde_norway::from_str("{}").unwrap();
        assert_eq!(c, SchedulerConfig::default());
    }

    #[test]
    fn preemption_is_on_by_default_and_can_be_switched_off() {
        assert!(SchedulerConfig::default().preemption.enabled);
        let c: SchedulerConfig = serde_norway::from_str("preemption: {enabled: false}").unwrap();
        assert!(!c.preemption.enabled);
        let c: SchedulerConfig = serde_norway::from_str("preemption: {}").unwrap();
        assert!(c.preemption.enabled);
    }

    #[test]
    fn unknown_fields_are_refused_with_their_name() {
        let e = serde_norway::from_str::<SchedulerConfig>("schedulerNmae: x").unwrap_err();
        assert!(e.to_string().contains("schedulerNmae"), "{e}");
    }
}
