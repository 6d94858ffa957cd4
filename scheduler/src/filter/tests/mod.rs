//! Table and property tests of the node filters. Fixtures are written as JSON
//! manifests so each case reads like the pod and node it stands for.

mod affinity_cases;
mod combined_cases;
mod node_info_cases;
mod ports_cases;
mod resources_cases;
mod taint_cases;
mod volume_cases;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{NodeInfo, PodFilterInput};

/// Parses a manifest of `kind`, filling in `apiVersion` and `kind`.
fn object<T: serde::de::DeserializeOwned>(kind: &str, mut manifest: Value) -> T {
    manifest["apiVersion"] = json!("v1");
    manifest["kind"] = json!(kind);
    serde_json::from_value(manifest).expect("valid manifest")
}

/// A pod with uid `uid` and this `spec` (no containers unless given).
pub(super) fn pod(uid: &str, mut spec: Value) -> Pod {
    if spec.get("containers").is_none() {
        spec["containers"] = json!([]);
    }
    object(
        "Pod",
        json!({ "metadata": { "name": uid, "uid": uid }, "spec": spec }),
    )
}

/// A container named `name` requesting `requests` (`{"cpu": "1"}`).
pub(super) fn container(name: &str, requests: Value) -> Value {
    json!({ "name": name, "image": "app", "resources": { "requests": requests } })
}

/// A pod with one app container requesting `requests`.
pub(super) fn pod_requesting(uid: &str, requests: Value) -> Pod {
    pod(uid, json!({ "containers": [container("app", requests)] }))
}

/// A node manifest named `name` made of `fields` (`{"spec": {...}}`,
/// `{"metadata": {"labels": {...}}}`).
pub(super) fn node(name: &str, mut fields: Value) -> Node {
    fields["metadata"]["name"] = json!(name);
    object("Node", fields)
}

/// A node with `allocatable` and nothing else of interest.
pub(super) fn node_with_allocatable(name: &str, allocatable: Value) -> Node {
    node(name, json!({ "status": { "allocatable": allocatable } }))
}

pub(super) fn input(pod: &Pod) -> PodFilterInput {
    PodFilterInput::new(pod).expect("valid pod")
}

pub(super) fn info(node: &Node) -> NodeInfo {
    NodeInfo::new(node).expect("valid node")
}

/// A roomy node: plenty of every native resource and pod slots.
pub(super) fn roomy(name: &str) -> Node {
    node_with_allocatable(
        name,
        json!({ "cpu": "64", "memory": "256Gi", "ephemeral-storage": "1Ti", "pods": "110" }),
    )
}

/// `filter_node` rendered for table comparisons: `Ok(())` or the reason string.
pub(super) fn verdict(pod: &Pod, node: &NodeInfo) -> Result<(), String> {
    super::filter_node(&input(pod), node).map_err(|r| r.to_string())
}
