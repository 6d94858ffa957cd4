//! Pods for real nodes: the sandbox image is the only image a node has (no registry is
//! reachable), so test pods run it as their container too.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::config::PAUSE_IMAGE;

/// A Guaranteed pod (requests = limits, `cpus` whole CPUs, 32 MiB, one `device` if
/// given) with one container `c` running the pause image (`imagePullPolicy: Never`),
/// without a ServiceAccount token, for `scheduler` (None: the default scheduler).
pub fn guaranteed_pod(name: &str, scheduler: Option<&str>, cpus: u32, device: Option<&str>) -> Pod {
    let mut resources = json!({"cpu": cpus.to_string(), "memory": "32Mi"});
    if let Some(device) = device {
        resources[device] = json!("1");
    }
    let mut spec = json!({
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "c",
            "image": PAUSE_IMAGE,
            "imagePullPolicy": "Never",
            "resources": {"requests": resources, "limits": resources}
        }]
    });
    if let Some(s) = scheduler {
        spec["schedulerName"] = json!(s);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap_or_default()
}

/// [`guaranteed_pod`] for the default scheduler, bound to `node` by its hostname label.
pub fn guaranteed_pause_pod(name: &str, node: &str, cpus: u32) -> Pod {
    let mut pod = guaranteed_pod(name, None, cpus, None);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_selector = Some([("kubernetes.io/hostname".to_owned(), node.to_owned())].into());
    }
    pod
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

    #[test]
    fn a_device_is_requested_and_limited_and_the_scheduler_named() {
        let pod = guaranteed_pod("p", Some("tas"), 1, Some("tas.dev/nic"));
        let spec = pod.spec.unwrap();
        let res = spec.containers[0].resources.as_ref().unwrap();
        assert_eq!(res.requests, res.limits);
        assert_eq!(res.limits.as_ref().unwrap()["tas.dev/nic"].0, "1");
        assert_eq!(spec.scheduler_name.as_deref(), Some("tas"));
    }
}
