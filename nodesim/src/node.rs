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
    /// Admitted pods → the zones their exclusive resources are on, and whether any of
    /// its containers (init containers included) holds exclusive CPUs.
    pods: Mutex<BTreeMap<PodKey, (BTreeSet<u32>, bool)>>,
    status: NodeStatus,
    /// Every CPU of the machine.
    cpus: BTreeSet<u32>,
    /// Where the shared pool is written for the node's containers
    /// ([`crate::sysfs::shared_pool_status_path`]); `None`: not written.
    shared_pool: Option<PathBuf>,
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
            cpus: machine
                .zones
                .iter()
                .flat_map(|z| z.cpus.iter().copied())
                .collect(),
            shared_pool: None,
        })
    }

    /// Keeps the node's shared CPU pool written at `path` (see
    /// [`crate::sysfs::shared_pool_status_path`]), now and after every admission and
    /// release.
    pub async fn with_shared_pool(mut self, path: PathBuf) -> Self {
        self.shared_pool = Some(path);
        self.write_shared_pool().await;
        self
    }

    /// Writes the shared pool: every CPU the CPU manager has not handed out
    /// exclusively (init containers' included), the reserved ones with them. Written
    /// in place, so a bind mount of the file shows the new content.
    async fn write_shared_pool(&self) {
        let Some(path) = &self.shared_pool else {
            return;
        };
        let state = match self.referee.state(&self.name).await {
            Ok(state) => state,
            Err(error) => {
                tracing::warn!(node = %self.name, %error, "referee: state failed; shared pool not written");
                return;
            }
        };
        let mut pool = self.cpus.clone();
        for zone in &state.zones {
            for cpu in &zone.allocatable_cpus {
                if !zone.free_cpus.contains(cpu) {
                    pool.remove(cpu);
                }
            }
        }
        let text = format!(
            "Name:\tsimulated\nCpus_allowed_list:\t{}\n",
            crate::sysfs::format_cpulist(pool)
        );
        if let Err(error) = std::fs::write(path, text) {
            tracing::warn!(node = %self.name, path = %path.display(), %error, "writing the shared pool");
        }
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
                let cpus = verdict.containers.iter().any(|c| !c.cpus.is_empty());
                lock(&self.pods).insert(key.clone(), (zones, cpus));
                // Only exclusive CPUs change the shared pool.
                if cpus {
                    self.write_shared_pool().await;
                }
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
        let Some((_, cpus)) = lock(&self.pods).remove(pod) else {
            return false;
        };
        if let Err(error) = self.referee.remove(&self.name, &pod.uid).await {
            tracing::warn!(node = %self.name, pod = %pod.name, %error, "referee: remove failed");
        }
        if cpus {
            self.write_shared_pool().await;
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
        lock(&self.pods)
            .get(pod)
            .map(|(zones, _)| zones.clone())
            .unwrap_or_default()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
