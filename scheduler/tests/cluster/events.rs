//! FailedScheduling Events of a pod that stays unschedulable while its node's NRT keeps
//! changing: one Event, however many attempts and whatever amounts the message names.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use tas_testcluster::{unique_name, wait_for};

use super::{GROUP, TIMEOUT, env};

/// `tas_scheduler_schedule_attempts_total{result="unschedulable"}` in a `/metrics` body.
fn unschedulable_attempts(metrics: &str) -> Option<u64> {
    metrics
        .lines()
        .find(|l| l.starts_with("tas_scheduler_schedule_attempts_total{result=\"unschedulable\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_unschedulable_through_20_nrt_updates_gets_one_event() {
    let mut env = env("events").await;
    let n = env.node(16).await;
    env.nrt(&n, "single-numa-node", &[(8, 6), (8, 6)], None)
        .await;
    env.start_scheduler(json!({"backoff": {"initial": "200ms", "max": "1s"}}));
    // Tolerates every taint, so the other tests' nodes (not ready, cordoned, coming
    // and going) only ever fail it for its node selector: the reasons stay the same.
    let pod = unique_name("g");
    let spec: Pod = serde_json::from_value(json!({
        "metadata": {"name": pod},
        "spec": {
            "schedulerName": env.scheduler,
            "nodeSelector": {GROUP: env.group},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "app", "image": "app", "resources": {
                "requests": {"cpu": "8", "memory": "1Gi"},
                "limits": {"cpu": "8", "memory": "1Gi"}}}]
        }
    }))
    .expect("pod");
    Api::<Pod>::namespaced(env.client.clone(), &env.ns)
        .create(&PostParams::default(), &spec)
        .await
        .expect("pod created");
    let first = env.failed_scheduling(&pod).await;
    assert!(first.contains("largest free zone 6"), "{first}");

    // Every update changes the free amount the message names; each one accepted wakes
    // the pod (it passes every node-level filter on n), which fails again.
    for i in 0..20u32 {
        let free = 6 - i % 3;
        env.nrt(&n, "single-numa-node", &[(8, free), (8, free)], None)
            .await;
        // Pacing, so the updates spread over several back-off periods.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let attempts = wait_for("several failed attempts", TIMEOUT, || async {
        let body = env.metrics().await?;
        Ok::<_, String>(unschedulable_attempts(&body).filter(|&a| a >= 6))
    })
    .await
    .expect("attempts");

    let events = env.events(&pod, "FailedScheduling").await;
    let api: Api<Event> = Api::namespaced(env.client.clone(), &env.ns);
    // Each Event counts once, plus every repeat patched into its series.
    let occurrences: i32 = api
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod.as_str())
        })
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    println!(
        "{attempts} failed attempts, {} FailedScheduling Event(s), {occurrences} sent",
        events.len()
    );
    assert_eq!(
        events.len(),
        1,
        "identical failures aggregate into one Event: {events:#?}"
    );
    assert_eq!(events[0], first, "the Event keeps the first wording");
    assert_eq!(
        occurrences, 1,
        "a failure whose reasons did not change is not sent again"
    );
}
