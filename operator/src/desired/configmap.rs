//! The scheduler's configuration file, in a ConfigMap mounted into its pods.
//!
//! The file is a [`SchedulerConfig`] (the contract the scheduler parses), rendered as
//! YAML under the key `config.yaml`. Its hash goes into the Deployment's pod template
//! (deployment.rs), so editing the CR rolls the scheduler onto the new file.

use super::BuildError;
use super::meta::{Component, Stack};
use super::names::SCHEDULER_CONFIG_MAP;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;
use tas_api::config::scheduler::{FILE_NAME, LeaderElection, SchedulerConfig};
use tas_api::tas::{SchedulerSpec, TopologyAwareSchedulingSpec};

/// Whether the scheduler replicas elect a leader: always, one replica too. An evicted
/// but still running pod and its replacement, or the old and new pods while `replicas`
/// changes or a rollout runs, must never bind side by side; the Lease (and its Role)
/// makes sure only one binds.
pub fn leader_election_enabled(_spec: &SchedulerSpec) -> bool {
    true
}

/// The scheduler's configuration for a spec. Settings the CR does not expose keep the
/// scheduler's own defaults.
pub fn scheduler_config(spec: &TopologyAwareSchedulingSpec) -> SchedulerConfig {
    let s = &spec.scheduler;
    SchedulerConfig {
        scheduler_name: s.scheduler_name.clone(),
        leader_election: LeaderElection {
            enabled: leader_election_enabled(s),
            // The Role granting the Lease exists in this namespace only (rbac.rs).
            lease_namespace: Some(spec.namespace.clone()),
            ..LeaderElection::default()
        },
        scoring: s.scoring.clone(),
        cache: s.cache.clone(),
        nodes_without_topology: s.nodes_without_topology,
        preemption: s.preemption.clone(),
        node_groups: node_group_selectors(spec),
        percentage_of_nodes_to_score: s.percentage_of_nodes_to_score,
        dra_alignment: s.dra_alignment,
        ..SchedulerConfig::default()
    }
}

/// The node selectors of the spec's node groups; no group means the implicit group of
/// every node (an empty selector).
pub fn node_group_selectors(spec: &TopologyAwareSchedulingSpec) -> Vec<LabelSelector> {
    if spec.node_groups.is_empty() {
        return vec![LabelSelector::default()];
    }
    spec.node_groups
        .iter()
        .map(|g| g.node_selector.clone())
        .collect()
}

/// A configuration rendered to the bytes the scheduler will read.
pub(crate) fn render(config: &SchedulerConfig) -> Result<String, BuildError> {
    serde_norway::to_string(config).map_err(BuildError::RenderConfig)
}

/// The ConfigMap holding the rendered file.
pub(crate) fn scheduler_config_map(stack: &Stack, rendered: &str) -> ConfigMap {
    ConfigMap {
        metadata: stack.namespaced_meta(SCHEDULER_CONFIG_MAP, Component::Scheduler),
        data: Some(BTreeMap::from([(
            FILE_NAME.to_owned(),
            rendered.to_owned(),
        )])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tas_api::tas::PreemptionSpec;

    #[test]
    fn preemption_follows_the_cr() {
        let mut spec: TopologyAwareSchedulingSpec =
            serde_json::from_value(serde_json::json!({})).expect("defaults");
        assert!(scheduler_config(&spec).preemption.enabled);
        spec.scheduler.preemption = PreemptionSpec { enabled: false };
        let rendered = render(&scheduler_config(&spec)).expect("renders");
        let parsed: SchedulerConfig = serde_norway::from_str(&rendered).expect("parses back");
        assert!(!parsed.preemption.enabled);
    }

    #[test]
    fn node_groups_reach_the_scheduler() {
        let mut spec: TopologyAwareSchedulingSpec =
            serde_json::from_value(serde_json::json!({})).expect("defaults");
        let rendered = render(&scheduler_config(&spec)).expect("renders");
        let parsed: SchedulerConfig = serde_norway::from_str(&rendered).expect("parses back");
        assert_eq!(
            parsed.node_groups,
            vec![LabelSelector::default()],
            "every node"
        );
        spec = serde_json::from_value(serde_json::json!({"nodeGroups": [
            {"name": "numa", "nodeSelector": {"matchLabels": {"tas": "numa"}}}
        ]}))
        .expect("groups");
        let rendered = render(&scheduler_config(&spec)).expect("renders");
        let parsed: SchedulerConfig = serde_norway::from_str(&rendered).expect("parses back");
        assert_eq!(
            parsed.node_groups,
            vec![spec.node_groups[0].node_selector.clone()]
        );
    }

    #[test]
    fn dra_alignment_reaches_the_scheduler_and_is_left_out_at_its_default() {
        let mut spec: TopologyAwareSchedulingSpec =
            serde_json::from_value(serde_json::json!({})).expect("defaults");
        let rendered = render(&scheduler_config(&spec)).expect("renders");
        assert!(!rendered.contains("draAlignment"), "{rendered}");
        spec =
            serde_json::from_value(serde_json::json!({"scheduler": {"draAlignment": "Preferred"}}))
                .expect("preferred");
        let rendered = render(&scheduler_config(&spec)).expect("renders");
        let parsed: SchedulerConfig = serde_norway::from_str(&rendered).expect("parses back");
        assert_eq!(parsed.dra_alignment, tas_api::tas::DraAlignment::Preferred);
    }
}
