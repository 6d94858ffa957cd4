//! Tests of scenario nodes as the referee runs them — the kubelet's own managers on the
//! machines and settings a scenario describes: the worked cases of the Topology Manager
//! reference, scopes, init containers, node-level fit — and of the scenario files,
//! including the claim of the default scenario. Tests that need the referee are skipped
//! with a note when `TAS_REFEREE_BIN` is unset, as outside `make test`.

mod admission;
mod scenarios;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::node::SimNode;
use super::referee::{Referee, RefereeError};
use super::request::PodKey;
use super::scenario::Scenario;
use super::verdict::Admission;

pub(super) const NIC: &str = "example.com/nic";

/// The referee, or `None` (with a note) when it is not configured.
pub(super) fn referee() -> Option<Arc<Referee>> {
    match Referee::start() {
        Ok(referee) => Some(Arc::new(referee)),
        Err(RefereeError::NotConfigured) => {
            eprintln!("skipped: {}", RefereeError::NotConfigured);
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// A scenario node in the referee, as the simulator adds it (its podresources socket in
/// a directory of its own).
pub(super) struct Node {
    pub(super) node: SimNode,
    _dir: tempfile::TempDir,
}

/// Node `name` of the scenario format: `settings` are its kubelet lines (e.g.
/// `topologyManagerPolicy: restricted`, one per line), `zones` its zone list.
pub(super) async fn node(referee: &Arc<Referee>, name: &str, settings: &str, zones: &str) -> Node {
    let settings: String = settings
        .lines()
        .map(|line| format!("  {}\n", line.trim()))
        .collect();
    let yaml = format!("nodes:\n- name: {name}\n{settings}  zones: {zones}\n");
    let scenario = Scenario::from_yaml(&yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
    let spec = &scenario.nodes()[0];
    let machine = super::referee::convert::with_cpu_reservation(&spec.machine, &spec.settings);
    let dir = tempfile::tempdir().unwrap();
    let node = SimNode::with_referee(
        referee.clone(),
        name,
        &machine,
        spec.settings,
        spec.fake_node().labels,
        dir.path().to_owned(),
    )
    .await
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    Node { node, _dir: dir }
}

impl Node {
    /// The kubelet's verdict on `pod`, bound to this node: `Admitted` or the reason.
    pub(super) async fn admit(&self, pod: &Pod) -> String {
        outcome(&self.verdict(pod).await).to_owned()
    }

    /// The kubelet's verdict on `pod`, bound to this node.
    pub(super) async fn verdict(&self, pod: &Pod) -> Admission {
        let mut pod = pod.clone();
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(self.node.name().to_owned());
        }
        self.node.admit(&pod, &PodKey::of(&pod)).await
    }

    /// The zones of the exclusive CPUs, pinned memory and devices of admitted `pod`.
    pub(super) fn zones(&self, pod: &str) -> Vec<u32> {
        self.node.pod_zones(&key(pod)).into_iter().collect()
    }

    /// Removes `pod`; whether it was admitted.
    pub(super) async fn release(&self, pod: &str) -> bool {
        self.node.release(&key(pod)).await
    }
}

/// The reason of a rejection, or `"Admitted"`.
pub(super) fn outcome(admission: &Admission) -> &str {
    match admission {
        Admission::Admitted => "Admitted",
        Admission::Rejected(rejection) => &rejection.reason,
    }
}

/// The key of test pod `name` (namespace `ns`, uid = name).
pub(super) fn key(name: &str) -> PodKey {
    PodKey {
        namespace: "ns".into(),
        name: name.into(),
        uid: name.into(),
    }
}

/// A container asking for `amounts` as requests and limits alike (a Guaranteed pod's).
pub(super) fn fixed(name: &str, amounts: &[(&str, &str)]) -> Value {
    let amounts: serde_json::Map<String, Value> = amounts
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({"name": name, "resources": {"requests": amounts, "limits": amounts}})
}

/// A container asking for `amounts` as requests only (a Burstable pod's).
pub(super) fn requests(name: &str, amounts: &[(&str, &str)]) -> Value {
    let amounts: serde_json::Map<String, Value> = amounts
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({"name": name, "resources": {"requests": amounts}})
}

/// `container` as a sidecar: an init container that keeps running.
pub(super) fn sidecar(mut container: Value) -> Value {
    container["restartPolicy"] = json!("Always");
    container
}

/// Pod `name` with init containers `init` (sidecars among them) and app containers `apps`.
pub(super) fn pod(name: &str, init: &[Value], apps: &[Value]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"initContainers": init, "containers": apps},
    }))
    .unwrap()
}

/// A Guaranteed pod of one container `c` with `cpus` CPUs and `memory_gi` GiB.
pub(super) fn guaranteed(name: &str, cpus: u32, memory_gi: u32) -> Pod {
    let (cpus, memory) = (cpus.to_string(), format!("{memory_gi}Gi"));
    pod(
        name,
        &[],
        &[fixed("c", &[("cpu", &cpus), ("memory", &memory)])],
    )
}
