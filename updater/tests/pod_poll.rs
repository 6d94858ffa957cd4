//! The agent's poll of the pods on its node ([`triggers::poll_pods`]) with the real
//! podresources client and a fake kubelet on a real unix socket: it signals when what
//! the kubelet lists changes, stays quiet while it does not, and goes on through a
//! kubelet restart.

use std::sync::Arc;
use std::time::Duration;

use tas_nodesim::kubelet_server::FakeKubelet;
use tas_updater::metrics::Metrics;
use tas_updater::podresources::v1::{ContainerResources, PodResources};
use tas_updater::podresources::{ClientConfig, PodResourcesClient};
use tas_updater::triggers;
use tokio::sync::mpsc;

/// Far longer than a poll: a signal that does not come within it is a failure.
const SIGNAL_WITHIN: Duration = Duration::from_secs(15);

fn guaranteed(name: &str, cpus: &[i64]) -> PodResources {
    PodResources {
        name: name.into(),
        namespace: "default".into(),
        containers: vec![ContainerResources {
            name: "main".into(),
            cpu_ids: cpus.to_vec(),
            ..Default::default()
        }],
    }
}

/// `tas_updater_pod_polls_total{result}`.
fn polls(metrics: &Metrics, result: &str) -> u64 {
    let prefix = format!("tas_updater_pod_polls_total{{result=\"{result}\"}} ");
    metrics
        .render()
        .expect("metrics render")
        .lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until `metrics` counts `n` polls of `result`.
async fn polled(metrics: &Metrics, result: &str, n: u64) {
    let counted = async {
        while polls(metrics, result) < n {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(SIGNAL_WITHIN, counted)
        .await
        .unwrap_or_else(|_| panic!("fewer than {n} polls {result}"));
}

async fn next_signal(raw: &mut mpsc::Receiver<()>, what: &str) {
    tokio::time::timeout(SIGNAL_WITHIN, raw.recv())
        .await
        .unwrap_or_else(|_| panic!("no signal for {what}"))
        .expect("the poll runs");
}

#[tokio::test]
async fn signals_each_change_the_kubelet_lists_and_survives_its_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("kubelet.sock");
    let kubelet = FakeKubelet::new();
    kubelet.set_pods(vec![guaranteed("a", &[2, 3])]);
    let server = kubelet.serve(&socket).expect("serve");
    let client = Arc::new(PodResourcesClient::new(ClientConfig {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        ..ClientConfig::new(&socket)
    }));
    let metrics = Arc::new(Metrics::new());
    let (raw_tx, mut raw) = mpsc::channel(16);
    let list = move || {
        let client = Arc::clone(&client);
        async move { client.list().await }
    };
    let poll = tokio::spawn(triggers::poll_pods(
        list,
        Duration::from_millis(100),
        metrics.clone(),
        raw_tx,
    ));

    next_signal(&mut raw, "the first answer").await;
    // Unchanged answers: polls go on, no signal. Waiting for three of them (counted
    // before the next poll can signal) shows the poll saw the same list again.
    polled(&metrics, "unchanged", 3).await;
    assert!(raw.try_recv().is_err(), "no change, no signal");

    kubelet.upsert_pod(guaranteed("b", &[4]));
    next_signal(&mut raw, "a pod admitted").await;
    kubelet.set_pods(vec![guaranteed("a", &[2, 3]), guaranteed("b", &[5])]);
    next_signal(&mut raw, "a pod's CPUs reassigned").await;

    server.shutdown().await.expect("shutdown");
    polled(&metrics, "error", 2).await;
    assert!(!poll.is_finished(), "errors do not stop the poll");
    kubelet.remove_pod("default", "a");
    let server = kubelet.serve(&socket).expect("serve again");
    next_signal(&mut raw, "a pod removed while the kubelet was down").await;
    poll.abort();
    server.shutdown().await.expect("shutdown");
}
