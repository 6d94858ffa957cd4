//! What tests read off a pod's status.

use k8s_openapi::api::core::v1::Pod;

/// `PodScheduled=False` with reason `Unschedulable`: the scheduler tried and found no
/// node.
pub fn is_marked_unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

/// Waits until pod `name` in `pods`' namespace is in phase `Running`.
pub async fn wait_pod_running(
    pods: &kube::Api<Pod>,
    name: &str,
    timeout: std::time::Duration,
) -> Result<(), crate::Error> {
    crate::wait_for(format!("pod {name} to be Running"), timeout, || async {
        let pod = pods.get(name).await?;
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        Ok::<_, kube::Error>((phase == "Running").then_some(()))
    })
    .await
}
