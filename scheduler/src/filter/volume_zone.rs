//! `VolumeZone`: a pod's bound PersistentVolumes carry zone and region labels, and the
//! node must be in one of their zones (and regions).
//!
//! The labels read are `topology.kubernetes.io/zone` and `.../region` and their
//! deprecated `failure-domain.beta.kubernetes.io/` forms; a value may list several zones
//! separated by `__`. As in kube-scheduler:
//!
//! - a node with none of the four labels passes (nothing to compare with);
//! - otherwise every label of every volume must be on the node with one of the listed
//!   values; a deprecated key missing on the node is looked up under its GA name.

use std::collections::BTreeMap;

use super::node::NodeInfo;
use super::pod::PodFilterInput;
use super::reason::FilterReason;

/// `topology.kubernetes.io/zone`.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION: &str = "topology.kubernetes.io/region";
/// The deprecated zone label.
pub const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// The deprecated region label.
pub const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";

/// Every label `VolumeZone` compares.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

/// One zone or region label of a volume: the node's value of `key` must be one of
/// `values`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneLabel {
    /// One of the four topology labels.
    pub key: String,
    /// The allowed values (the label's value split on `__`).
    pub values: Vec<String>,
}

impl ZoneLabel {
    /// The topology labels among a volume's `labels`.
    pub fn from_labels(labels: Option<&BTreeMap<String, String>>) -> Vec<Self> {
        let Some(labels) = labels else {
            return Vec::new();
        };
        TOPOLOGY_LABELS
            .iter()
            .filter_map(|key| {
                let value = labels.get(*key)?;
                let values: Vec<String> = value
                    .split("__")
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
                    .collect();
                (!values.is_empty()).then(|| Self {
                    key: (*key).to_owned(),
                    values,
                })
            })
            .collect()
    }

    /// Whether a node with `labels` is in one of the allowed zones.
    pub fn allows(&self, labels: &BTreeMap<String, String>) -> bool {
        labels
            .get(&self.key)
            .or_else(|| labels.get(ga_key(&self.key)))
            .is_some_and(|v| self.values.contains(v))
    }
}

/// The GA name of a deprecated topology label (other keys unchanged).
fn ga_key(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

/// The filter; see the module documentation.
pub fn filter(pod: &PodFilterInput, node: &NodeInfo) -> Result<(), FilterReason> {
    let volumes = &pod.volumes().volumes;
    if volumes.iter().all(|v| v.zones.is_empty()) {
        return Ok(());
    }
    let labels = node.labels();
    if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
        return Ok(());
    }
    if volumes
        .iter()
        .flat_map(|v| &v.zones)
        .all(|z| z.allows(labels))
    {
        Ok(())
    } else {
        Err(FilterReason::VolumeZoneConflict)
    }
}
