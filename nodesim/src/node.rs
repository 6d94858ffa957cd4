//! One simulated node, judged by the kubelet's own managers in the referee.
//!
//! The referee holds the node's managers and serves its podresources API; this side
//! remembers which pods it admitted (to release them when they finish or go away) and
//! where their exclusive resources landed (for reports).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::Pod;

use crate::machine::{KubeletSettings, Machine};
use crate::referee::{AddNode, NodeStatus, Referee, RefereeError, convert};
use crate::request::PodKey;
use crate::verdict::{Admission, Rejection, UNEXPECTED_ADMISSION_ERROR};

/// A simulated node in the referee.
#[derive(Debug)]
pub struct SimNode {
    name: String,
    referee: Arc<Referee>,
    /// The zone of every CPU (`cpu/<id>`) and device (`device/<id>`).
    zone_of: BTreeMap<String, u32>,
    /// Admitted pods → the zones their exclusive resources are on.
    pods: Mutex<BTreeMap<PodKey, BTreeSet<u32>>>,
    status: NodeStatus,
}

impl SimNode {
    /// Adds a node to `referee`, which serves its podresources API on
    /// `<pod_resources_dir>/kubelet.sock`. `labels` are the Node's (the kubelet checks a
    /// pod's node selector and affinity against them).
    pub async fn with_referee(
        referee: Arc<Referee>,
        name: impl Into<String>,
        machine: &Machine,
        settings: KubeletSettings,
        labels: BTreeMap<String, String>,
        pod_resources_dir: PathBuf,
    ) -> Result<Self, RefereeError> {
        let name = name.into();
        let status = referee
            .add_node(&AddNode {
                node: name.clone(),
                pod_resources_dir: Some(pod_resources_dir),
                labels,
                machine: convert::machine(machine),
                kubelet: convert::kubelet_config(machine, &settings),
                ..AddNode::default()
            })
            .await?;
        let mut zone_of = BTreeMap::new();
        for zone in &machine.zones {
            zone_of.extend(zone.cpus.iter().map(|cpu| (format!("cpu/{cpu}"), zone.id)));
            for ids in zone.devices.values() {
                zone_of.extend(ids.iter().map(|id| (format!("device/{id}"), zone.id)));
            }
        }
        Ok(Self {
            name,
            referee,
            zone_of,
            pods: Mutex::default(),
            status,
        })
    }

    /// The node name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the node's kubelet publishes in the Node status.
    pub fn status(&self) -> &NodeStatus {
        &self.status
    }

    /// The kubelet's verdict on `pod`. A referee that cannot answer is reported as the
    /// kubelet reports a failing manager (`UnexpectedAdmissionError`).
    pub async fn admit(&self, pod: &Pod, key: &PodKey) -> Admission {
        match self.referee.admit(&self.name, pod).await {
            Ok(verdict) if verdict.admit => {
                let zones = verdict
                    .containers
                    .iter()
                    .flat_map(|c| {
                        let cpus = c.cpus.iter().map(|cpu| format!("cpu/{cpu}"));
                        let devices = c
                            .devices
                            .iter()
                            .flat_map(|d| d.ids.iter().map(|id| format!("device/{id}")));
                        let pinned = cpus
                            .chain(devices)
                            .filter_map(|key| self.zone_of.get(&key).copied());
                        let memory = c.memory.iter().flat_map(|m| m.numa_nodes.iter().copied());
                        pinned.chain(memory).collect::<Vec<_>>()
                    })
                    .collect();
                lock(&self.pods).insert(key.clone(), zones);
                Admission::Admitted
            }
            Ok(verdict) => Admission::Rejected(Rejection {
                reason: verdict.reason,
                message: verdict.message,
            }),
            Err(error) => Admission::Rejected(Rejection {
                reason: UNEXPECTED_ADMISSION_ERROR.into(),
                message: format!("the referee failed: {error}"),
            }),
        }
    }

    /// Releases `pod`'s resources; returns whether it was admitted.
    pub async fn release(&self, pod: &PodKey) -> bool {
        if lock(&self.pods).remove(pod).is_none() {
            return false;
        }
        if let Err(error) = self.referee.remove(&self.name, &pod.uid).await {
            tracing::warn!(node = %self.name, pod = %pod.name, %error, "referee: remove failed");
        }
        true
    }

    /// Whether `pod` is admitted here.
    pub fn is_admitted(&self, pod: &PodKey) -> bool {
        lock(&self.pods).contains_key(pod)
    }

    /// Keys of the admitted pods.
    pub fn admitted(&self) -> Vec<PodKey> {
        lock(&self.pods).keys().cloned().collect()
    }

    /// The zones holding `pod`'s exclusive CPUs, pinned memory and devices.
    pub fn pod_zones(&self, pod: &PodKey) -> BTreeSet<u32> {
        lock(&self.pods).get(pod).cloned().unwrap_or_default()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
