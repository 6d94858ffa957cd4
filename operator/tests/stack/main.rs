//! The operator against a real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok fake nodes).
//!
//! The TopologyAwareScheduling object is a cluster-wide singleton, so the scenarios run
//! one after another inside one test, against one operator running in-process; each
//! uses its own `spec.namespace` and its own labelled nodes, and ends by deleting the
//! object and waiting for its operands to be gone.

mod adoption;
mod agents_namespace;
mod attacks;
mod binary;
mod coexistence;
mod collector;
mod harness;
mod host_paths;
mod install;
mod least_privilege;
mod network_policy;
mod no_nodes;
mod nrt_crd;
mod otlp;
mod overlap;
mod paused;
mod pods;
mod scale;
mod stale;

use std::time::Duration;
use tas_operator::telemetry::{Otlp, OtlpSettings};
use tas_testcluster::TestCluster;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

#[tokio::test]
async fn one_object_runs_and_reports_the_whole_stack() {
    // No endpoint from the environment: only the object turns export on. Short delays
    // keep the OTLP scenario quick.
    let telemetry = Otlp::new(OtlpSettings {
        service: tas_operator::telemetry::SERVICE_NAME,
        fallback_endpoint: None,
        instance: Some("stack-test".into()),
        metric_interval: Some(Duration::from_secs(1)),
        span_delay: Some(Duration::from_millis(200)),
        ..OtlpSettings::default()
    });
    let logs = EnvFilter::new(
        std::env::var("RUST_LOG").unwrap_or_else(|_| "tas_operator=info".to_owned()),
    );
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_test_writer()
                .with_filter(logs),
        )
        .with(telemetry.tracing_layer())
        .try_init()
        .expect("the only global subscriber of this test binary");
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    harness::install_tas_crd(&client).await;

    let operator = harness::start_operator(client.clone(), telemetry.clone());
    install::scenario(&client, &operator).await;
    overlap::scenario(&client).await;
    host_paths::scenario(&client).await;
    paused::scenario(&client, &operator).await;
    no_nodes::scenario(&client).await;
    stale::scenario(&client).await;
    scale::scenario(&client, &operator).await;
    pods::scenario(&client).await;
    otlp::scenario(&client, &telemetry).await;
    network_policy::scenario(&client).await;
    coexistence::scenario(&client).await;
    nrt_crd::scenario(&client).await;
    let marked_namespace = adoption::scenario(&client).await;
    operator
        .stop(harness::TIMEOUT)
        .await
        .expect("the operator stops cleanly");
    telemetry.shutdown().await;
    // An operator with a namespace for the node agents, which the installer makes.
    agents_namespace::scenario(&client).await;
    // With no object left, the binary only has to start, sync and stop.
    binary::scenario(&client, &cluster.kubeconfig_path()).await;
    // Last: the operator with its own narrow rights instead of an admin's, then its
    // token in an attacker's hands.
    least_privilege::scenario(cluster, &client).await;
    attacks::scenario(cluster, &client, &marked_namespace).await;
}
