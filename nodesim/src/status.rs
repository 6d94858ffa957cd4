//! Pod status patches: what the kubelet (here, the simulator in kwok's place) writes.
//!
//! Both are JSON merge patches of the status subresource. An admitted pod becomes
//! `Running` with every condition `True`, init containers terminated (`Completed`),
//! sidecars and app containers running. A rejected pod becomes `Failed` with the
//! rejection's reason and the message `Pod was rejected: <message>`, as the kubelet
//! writes it; its other status fields are left alone.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{Timestamp, Unit};
use serde_json::{Value, json};

use crate::verdict::{REJECTED_PREFIX, Rejection};

/// Conditions of a running pod.
const CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "PodScheduled",
];

/// The current time as Kubernetes writes it (RFC 3339, whole seconds).
pub fn now() -> String {
    Timestamp::now()
        .round(Unit::Second)
        .unwrap_or_else(|_| Timestamp::now())
        .to_string()
}

/// What the kubelet agreed to allocate for container `c` (its requests), as it writes
/// it in the container status: the resource managers read it back, instead of the
/// spec, when they admit a pod that is running already (a kubelet restart, a node
/// registering again).
fn allocated(c: &k8s_openapi::api::core::v1::Container) -> Value {
    json!(
        c.resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default()
    )
}

/// The patch that makes `pod` Running, started at `started` (an RFC 3339 time).
pub fn running(pod: &Pod, started: &str) -> Value {
    let spec = pod.spec.clone().unwrap_or_default();
    let conditions: Vec<Value> = CONDITIONS
        .iter()
        .map(|kind| json!({ "type": kind, "status": "True", "lastTransitionTime": started }))
        .collect();
    let running = json!({ "running": { "startedAt": started } });
    let init: Vec<Value> = spec
        .init_containers
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let sidecar = c.restart_policy.as_deref() == Some("Always");
            let state = if sidecar {
                running.clone()
            } else {
                json!({ "terminated": {
                    "exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started,
                } })
            };
            json!({
                "name": c.name, "image": c.image, "imageID": "", "ready": sidecar, "started": sidecar,
                "restartCount": 0, "state": state, "allocatedResources": allocated(c),
            })
        })
        .collect();
    let apps: Vec<Value> = spec
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image, "imageID": "", "ready": true, "started": true,
                "restartCount": 0, "state": running, "allocatedResources": allocated(c),
            })
        })
        .collect();
    json!({ "status": {
        "phase": "Running",
        "startTime": started,
        "conditions": conditions,
        "initContainerStatuses": init,
        "containerStatuses": apps,
    } })
}

/// The patch that makes a pod Failed for `rejection`.
pub fn rejected(rejection: &Rejection) -> Value {
    json!({ "status": {
        "phase": "Failed",
        "reason": rejection.reason,
        "message": format!("{REJECTED_PREFIX}{}", rejection.message),
    } })
}
