//! The operator against a real control plane (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, kwok fake nodes).
//!
//! The TopologyAwareScheduling object is a cluster-wide singleton, so the scenarios run
//! one after another inside one test, against one operator running in-process; each
//! uses its own `spec.namespace` and its own labelled nodes, and ends by deleting the
//! object and waiting for its operands to be gone.

mod binary;
mod harness;
mod install;
mod overlap;
mod paused;
mod scale;

use harness::Operator;
use tas_e2e::TestCluster;

#[tokio::test]
async fn one_object_runs_and_reports_the_whole_stack() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            std::env::var("RUST_LOG").unwrap_or_else(|_| "tas_operator=info".to_owned()),
        )
        .with_test_writer()
        .try_init();
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    harness::install_tas_crd(&client).await;

    let operator = Operator::start(client.clone());
    install::scenario(&client, &operator).await;
    overlap::scenario(&client).await;
    paused::scenario(&client, &operator).await;
    scale::scenario(&client, &operator).await;
    operator.stop().await;
    // With no object left, the binary only has to start, sync and stop.
    binary::scenario(&client, &cluster.kubeconfig_path()).await;
}
