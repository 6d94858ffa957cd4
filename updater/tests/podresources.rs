//! The podresources client against a fake kubelet on real unix sockets: answers, large
//! messages, a kubelet that is late, restarts, rate-limits or hangs.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use prost::Message;
use tas_nodesim::kubelet_server::{FakeKubelet, RateLimit};
use tas_updater::podresources::v1;
use tas_updater::podresources::v1::pod_resources_lister_client::PodResourcesListerClient;
use tas_updater::podresources::{
    ClientConfig, ConnectionState, ErrorKind, PodResourcesClient, PodResourcesError,
};
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(15);

/// Short backoffs so that healing tests finish quickly.
fn config(socket: &Path) -> ClientConfig {
    ClientConfig {
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(400),
        ..ClientConfig::new(socket)
    }
}

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("kubelet.sock")
}

/// Polls `check` until it yields a value, failing the test after [`DEADLINE`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn numa(ids: &[i64]) -> Option<v1::TopologyInfo> {
    Some(v1::TopologyInfo {
        nodes: ids.iter().map(|&id| v1::NumaNode { id }).collect(),
    })
}

/// Two NUMA nodes with 4 CPUs, 8 GiB and one NIC each.
fn two_node_allocatable() -> v1::AllocatableResourcesResponse {
    let gib = 1 << 30;
    v1::AllocatableResourcesResponse {
        cpu_ids: (0..8).collect(),
        memory: vec![
            v1::ContainerMemory {
                memory_type: "memory".into(),
                size: 8 * gib,
                topology: numa(&[0]),
            },
            v1::ContainerMemory {
                memory_type: "memory".into(),
                size: 8 * gib,
                topology: numa(&[1]),
            },
        ],
        devices: vec![
            v1::ContainerDevices {
                resource_name: "example.com/nic".into(),
                device_ids: vec!["nic0".into()],
                topology: numa(&[0]),
            },
            v1::ContainerDevices {
                resource_name: "example.com/nic".into(),
                device_ids: vec!["nic1".into()],
                topology: numa(&[1]),
            },
        ],
    }
}

fn pod(namespace: &str, name: &str, containers: usize, cpus_each: i64) -> v1::PodResources {
    v1::PodResources {
        name: name.into(),
        namespace: namespace.into(),
        containers: (0..containers)
            .map(|c| v1::ContainerResources {
                name: format!("container-{c}"),
                cpu_ids: (0..cpus_each).collect(),
                memory: vec![v1::ContainerMemory {
                    memory_type: "hugepages-2Mi".into(),
                    size: 2 << 20,
                    topology: numa(&[0, 1]),
                }],
                devices: vec![v1::ContainerDevices {
                    resource_name: "example.com/nic".into(),
                    device_ids: vec![format!("nic-{c}")],
                    topology: numa(&[0]),
                }],
                ..Default::default()
            })
            .collect(),
    }
}

#[tokio::test]
async fn reads_allocatable_and_pods_from_the_kubelet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = FakeKubelet::new();
    kubelet.set_allocatable(two_node_allocatable());
    kubelet.set_pods(vec![pod("team-a", "db", 2, 2), pod("team-b", "web", 1, 4)]);
    let server = kubelet.serve(socket_in(&dir)).expect("serve");

    let client = PodResourcesClient::new(config(server.path()));
    assert_eq!(client.state(), ConnectionState::Disconnected);
    assert!(!client.is_connected());

    let allocatable = client.get_allocatable().await.expect("allocatable");
    assert_eq!(allocatable, two_node_allocatable());
    let listed = client.list().await.expect("list");
    assert_eq!(listed.pod_resources, kubelet.pods());

    assert!(client.is_connected());
    assert_eq!(client.state(), ConnectionState::Connected);
    let stats = client.stats();
    assert_eq!(
        (stats.calls(), stats.connects(), stats.total_errors()),
        (2, 1, 0)
    );
    let calls = kubelet.calls();
    assert_eq!((calls.get_allocatable, calls.list), (1, 1));
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn lists_a_response_larger_than_the_grpc_default_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = FakeKubelet::new();
    let pods: Vec<_> = (0..5000)
        .map(|i| pod("load", &format!("pod-{i:05}"), 10, 16))
        .collect();
    let response = v1::ListPodResourcesResponse {
        pod_resources: pods.clone(),
    };
    let encoded = response.encoded_len();
    assert!(encoded > 4 << 20, "only {encoded} bytes: not above 4 MiB");
    kubelet.set_pods(pods);
    let server = kubelet.serve(socket_in(&dir)).expect("serve");

    let client = PodResourcesClient::new(config(server.path()));
    let listed = client.list().await.expect("list with the 16 MiB default");
    assert_eq!(listed, response);

    // The same answer is refused under gRPC's usual 4 MiB limit, and retrying won't help.
    let small = PodResourcesClient::new(ClientConfig {
        max_decoding_message_size: 4 << 20,
        ..config(server.path())
    });
    let error = small.list().await.expect_err("4 MiB limit");
    assert_eq!(error.kind(), ErrorKind::Other, "{error}");
    assert!(!error.is_transient(), "{error}");
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn missing_socket_is_transient_and_heals_when_the_kubelet_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = socket_in(&dir);
    let client = PodResourcesClient::new(config(&socket));

    let error = client.list().await.expect_err("no kubelet yet");
    assert!(
        matches!(&error, PodResourcesError::SocketMissing { path } if *path == socket),
        "{error}"
    );
    assert!(error.is_transient());
    assert!(error.to_string().contains(&socket.display().to_string()));
    assert!(matches!(client.state(), ConnectionState::BackingOff { .. }));
    assert!(!client.is_connected());

    let kubelet = FakeKubelet::new();
    kubelet.set_pods(vec![pod("default", "p", 1, 1)]);
    let server = kubelet.serve(&socket).expect("serve");

    // The next call waits out the backoff, then dials the new socket.
    let listed = client.list().await.expect("kubelet is up");
    assert_eq!(listed.pod_resources.len(), 1);
    let stats = client.stats();
    assert_eq!(stats.errors(ErrorKind::SocketMissing), 1);
    assert_eq!((stats.connects(), stats.reconnects()), (1, 0));
    assert_eq!(client.state(), ConnectionState::Connected);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn reconnects_after_a_kubelet_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = socket_in(&dir);
    let kubelet = FakeKubelet::new();
    kubelet.set_pods(vec![pod("default", "before", 1, 1)]);
    let server = kubelet.serve(&socket).expect("serve");
    let client = PodResourcesClient::new(config(&socket));
    client.list().await.expect("first kubelet");

    server.shutdown().await.expect("shutdown");
    assert!(!socket.exists(), "shutdown removes the socket");
    let error = client.list().await.expect_err("kubelet down");
    assert!(error.is_transient(), "{error}");
    assert!(!client.is_connected());

    kubelet.set_pods(vec![pod("default", "after", 1, 1)]);
    let server = kubelet.serve(&socket).expect("serve again");
    let listed = eventually("a list from the restarted kubelet", || async {
        client.list().await.ok()
    })
    .await;
    assert_eq!(listed.pod_resources[0].name, "after");
    assert!(client.is_connected());
    assert!(client.stats().reconnects() >= 1);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn rate_limited_call_backs_off_then_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = FakeKubelet::new();
    kubelet.set_rate_limit(Some(RateLimit { qps: 5.0, burst: 1 }));
    let server = kubelet.serve(socket_in(&dir)).expect("serve");
    let client = PodResourcesClient::new(ClientConfig {
        min_call_interval: Duration::ZERO,
        ..config(server.path())
    });

    client.list().await.expect("first call uses the burst");
    let error = client.list().await.expect_err("bucket empty");
    assert!(
        matches!(error, PodResourcesError::RateLimited { .. }),
        "{error}"
    );
    assert!(error.is_transient());
    assert!(matches!(client.state(), ConnectionState::BackingOff { .. }));
    assert!(client.is_connected(), "a rate limit keeps the connection");

    eventually("a call after backing off", || async {
        client.list().await.ok()
    })
    .await;
    let stats = client.stats();
    assert!(stats.errors(ErrorKind::RateLimited) >= 1);
    assert_eq!(stats.connects(), 1, "no redial for a rate limit");
    assert!(kubelet.calls().rate_limited >= 1);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn pacing_keeps_a_burst_of_calls_under_the_kubelet_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = FakeKubelet::new();
    kubelet.set_rate_limit(Some(RateLimit::KUBELET));
    let server = kubelet.serve(socket_in(&dir)).expect("serve");
    let client = PodResourcesClient::new(config(server.path()));

    // Twice the kubelet's burst, all at once.
    let calls = (0..20).map(|_| client.list());
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(kubelet.calls().list, 20);
    assert_eq!(kubelet.calls().rate_limited, 0);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn slow_kubelet_times_out_and_the_client_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = FakeKubelet::new();
    kubelet.set_allocatable(two_node_allocatable());
    kubelet.set_response_delay(Duration::from_secs(2));
    let server = kubelet.serve(socket_in(&dir)).expect("serve");
    let client = PodResourcesClient::new(ClientConfig {
        call_timeout: Duration::from_millis(200),
        ..config(server.path())
    });

    let error = client.get_allocatable().await.expect_err("too slow");
    assert!(
        matches!(error, PodResourcesError::Timeout { .. }),
        "{error}"
    );
    assert!(error.is_transient());
    assert_eq!(client.stats().errors(ErrorKind::Timeout), 1);

    kubelet.set_response_delay(Duration::ZERO);
    let allocatable = eventually("an answer once the kubelet is fast", || async {
        client.get_allocatable().await.ok()
    })
    .await;
    assert_eq!(allocatable, two_node_allocatable());
    server.shutdown().await.expect("shutdown");
}

/// A bare generated client, for the RPC [`PodResourcesClient`] does not wrap.
async fn raw_client(socket: &Path) -> PodResourcesListerClient<tonic::transport::Channel> {
    let socket = socket.to_path_buf();
    let channel = tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                tokio::net::UnixStream::connect(socket)
                    .await
                    .map(TokioIo::new)
            }
        }))
        .await
        .expect("dial fake kubelet");
    PodResourcesListerClient::new(channel)
}

#[tokio::test]
async fn fake_get_returns_the_pod_or_not_found() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubelet = FakeKubelet::new();
    kubelet.set_pods(vec![pod("team-a", "db", 1, 2)]);
    let server = kubelet.serve(socket_in(&dir)).expect("serve");
    let mut raw = raw_client(server.path()).await;

    let found = raw
        .get(v1::GetPodResourcesRequest {
            pod_name: "db".into(),
            pod_namespace: "team-a".into(),
        })
        .await
        .expect("existing pod")
        .into_inner();
    assert_eq!(found.pod_resources, Some(pod("team-a", "db", 1, 2)));

    let missing = raw
        .get(v1::GetPodResourcesRequest {
            pod_name: "db".into(),
            pod_namespace: "team-b".into(),
        })
        .await
        .expect_err("other namespace");
    assert_eq!(missing.code(), tonic::Code::NotFound);
    assert_eq!(kubelet.calls().get, 2);
    drop(raw);
    server.shutdown().await.expect("shutdown");
}
