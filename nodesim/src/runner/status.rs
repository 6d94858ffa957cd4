//! What the runner knows about a pod's containers, and the pod status it writes from
//! that, shaped as the kubelet's (phase, IPs, conditions, container states with
//! `lastState` and `restartCount`).

use std::net::Ipv4Addr;
use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

/// A container's state.
#[derive(Debug, Clone)]
pub enum State {
    /// Not running: `reason` (`ContainerCreating`, `CrashLoopBackOff`,
    /// `CreateContainerConfigError`, `ErrImagePull`, ...) and a message.
    Waiting { reason: String, message: String },
    /// Running since.
    Running { since: Time },
    /// Finished.
    Terminated(Terminated),
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Terminated {
    /// Exit code (128 + signal when killed by one).
    pub exit_code: i32,
    /// Signal number, if killed by one.
    pub signal: Option<i32>,
    /// `Completed` or `Error`.
    pub reason: String,
    /// When it started.
    pub started: Time,
    /// When it ended.
    pub finished: Time,
}

/// One container, as the runner sees it.
#[derive(Debug, Clone)]
pub struct ContainerView {
    /// Container name.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// The running process.
    pub pid: Option<u32>,
    /// Its stdout + stderr, across restarts.
    pub log: PathBuf,
    /// Restarts so far.
    pub restarts: u32,
    /// Readiness probe result (true without a probe once running).
    pub ready: bool,
    /// Current state.
    pub state: State,
    /// The previous run.
    pub last: Option<Terminated>,
    /// The binary it runs.
    pub binary: Option<PathBuf>,
}

/// One pod.
#[derive(Debug, Clone)]
pub struct PodView {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Node.
    pub node: String,
    /// The pod's IP (unspecified until its network is up).
    pub ip: Ipv4Addr,
    /// Its gateway (the host side of its veth pair), reported as the host IP.
    pub gateway: Ipv4Addr,
    /// Its network namespace.
    pub netns: Option<std::path::PathBuf>,
    /// Containers in spec order.
    pub containers: Vec<ContainerView>,
    /// When the runner took it.
    pub start_time: Time,
    /// Set once every container finished for good.
    pub phase: Option<&'static str>,
}

fn terminated_json(t: &Terminated) -> Value {
    json!({"exitCode": t.exit_code, "signal": t.signal, "reason": t.reason,
           "startedAt": t.started, "finishedAt": t.finished})
}

impl PodView {
    /// The `status` to write.
    pub fn status(&self) -> Value {
        let running = self
            .containers
            .iter()
            .any(|c| matches!(c.state, State::Running { .. }));
        let all_ready = self.containers.iter().all(|c| c.ready);
        let phase = self.phase.unwrap_or(
            if running || self.containers.iter().any(|c| c.restarts > 0) {
                "Running"
            } else {
                "Pending"
            },
        );
        let cond = |type_: &str, ok: bool| json!({"type": type_, "status": if ok { "True" } else { "False" }});
        let containers: Vec<Value> = self
            .containers
            .iter()
            .map(|c| {
                let state = match &c.state {
                    State::Waiting { reason, message } => json!({"waiting": {"reason": reason, "message": message}}),
                    State::Running { since } => json!({"running": {"startedAt": since}}),
                    State::Terminated(t) => json!({"terminated": terminated_json(t)}),
                };
                let last = c.last.as_ref().map(|t| json!({"terminated": terminated_json(t)}));
                json!({
                    "name": c.name, "image": c.image,
                    "imageID": format!("tas-nodesim://{}", super::images::image_name(&c.image)),
                    "containerID": c.pid.map(|p| format!("tas-nodesim://{p}")),
                    "ready": c.ready, "started": matches!(c.state, State::Running { .. }),
                    "restartCount": c.restarts, "state": state, "lastState": last.unwrap_or(json!({})),
                })
            })
            .collect();
        let (ip, host) = if self.ip.is_unspecified() {
            (None, None)
        } else {
            (Some(self.ip.to_string()), Some(self.gateway.to_string()))
        };
        json!({"status": {
            "phase": phase,
            "hostIP": host, "hostIPs": host.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
            "podIP": ip, "podIPs": ip.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
            "startTime": self.start_time,
            "conditions": [
                cond("PodReadyToStartContainers", true),
                cond("Initialized", true),
                cond("ContainersReady", all_ready),
                cond("Ready", all_ready),
                cond("PodScheduled", true),
            ],
            "containerStatuses": containers,
        }})
    }
}
