//! Pods for real nodes: the sandbox image is the only image a node has (no registry is
//! reachable), so test pods run it as their container too.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::config::PAUSE_IMAGE;

/// A Guaranteed pod (requests = limits, `cpus` whole CPUs, 32 MiB) with one container
/// `c` running the pause image (`imagePullPolicy: Never`), bound to `node` by its
/// hostname label and without a ServiceAccount token.
pub fn guaranteed_pause_pod(name: &str, node: &str, cpus: u32) -> Pod {
    let resources = json!({"cpu": cpus.to_string(), "memory": "32Mi"});
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "automountServiceAccountToken": false,
            "containers": [{
                "name": "c",
                "image": PAUSE_IMAGE,
                "imagePullPolicy": "Never",
                "resources": {"requests": resources, "limits": resources}
            }]
        }
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_is_guaranteed_on_the_node() {
        let pod = guaranteed_pause_pod("p", "n1", 1);
        let spec = pod.spec.unwrap();
        let c = &spec.containers[0];
        let res = c.resources.as_ref().unwrap();
        assert_eq!(res.requests, res.limits);
        assert_eq!(c.image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(spec.node_selector.unwrap()["kubernetes.io/hostname"], "n1");
    }
}
