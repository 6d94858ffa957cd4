//! The fault proxy in front of the shared cluster's kube-apiserver: a client through it
//! sees the real API server, or the fault set, and only where the fault applies.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use tas_testcluster::fault_proxy::{Fault, FaultProxy};
use tas_testcluster::unique_namespace;

use super::shared;

async fn client_through(proxy: &FaultProxy) -> Client {
    let path = shared().kubeconfig_path();
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    config.cluster_url = format!("https://{}", proxy.addr()).parse().unwrap();
    // Every answer as the proxy gave it (kube retries 429 and 503 by default).
    config.default_retry = false;
    Client::try_from(config).expect("client through the proxy")
}

fn api_code(result: Result<impl std::fmt::Debug, kube::Error>) -> Option<u16> {
    match result {
        Err(kube::Error::Api(status)) => Some(status.code),
        _ => None,
    }
}

#[tokio::test]
async fn answers_errors_and_stalls_only_where_told_then_heals() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "fault-proxy").await.unwrap();
    let proxy = FaultProxy::start(cluster).await.expect("proxy");
    let through = client_through(&proxy).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(through.clone(), &ns);

    // Passing: the real API server answers (TLS verified against the cluster's CA).
    assert!(configmaps.get_opt("none").await.unwrap().is_none());
    assert!(proxy.forwarded() > 0);

    proxy.set(Fault::Answer {
        code: 429,
        retry_after: Some(1),
    });
    assert_eq!(api_code(configmaps.get_opt("none").await), Some(429));
    proxy.set(Fault::Answer {
        code: 503,
        retry_after: None,
    });
    assert_eq!(api_code(configmaps.get_opt("none").await), Some(503));
    assert_eq!(proxy.answered(), 2);

    // Only Lease requests stall; ConfigMaps still pass.
    proxy.set_for("/leases", Fault::Stall);
    assert!(configmaps.get_opt("none").await.unwrap().is_none());
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(through.clone(), &ns);
    let held = tokio::time::timeout(Duration::from_secs(1), leases.get_opt("none")).await;
    assert!(held.is_err(), "a stalled request was answered: {held:?}");
    assert_eq!(proxy.stalled(), 1);

    // A request held when the stall ends is cut, never forwarded late.
    let held = tokio::spawn(async move { leases.get_opt("none").await });
    tas_testcluster::wait_for(
        "the request to be held",
        Duration::from_secs(10),
        || async { Ok::<_, std::convert::Infallible>((proxy.stalled() == 2).then_some(())) },
    )
    .await
    .unwrap();
    proxy.set(Fault::Pass);
    let cut = tokio::time::timeout(Duration::from_secs(10), held)
        .await
        .expect("the held request ends with the stall")
        .unwrap();
    assert!(cut.is_err(), "a held request was forwarded late: {cut:?}");
    assert!(configmaps.get_opt("none").await.unwrap().is_none());
}
