//! What the node agent's poll of the pods on its node costs, on a large busy node
//! ([`busy_node`]: 200 pods with their CPUs, memory and devices): the digest of one
//! `List` answer, and one whole poll (`List` over a unix socket from a fake kubelet,
//! then the digest) on a single-threaded runtime, as the agent runs. The fake kubelet
//! serves from the same thread, so the poll's figure includes the server's encoding:
//! an upper bound of the agent's own CPU per poll. Times its polls per second (2 with
//! the default `--pod-poll-interval` of 500 ms), it is what the agent spends idle.

// The accounting bench uses the rest of the node (its allocatable resources).
#[allow(dead_code)]
mod busy_node;

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use tas_nodesim::kubelet_server::FakeKubelet;
use tas_updater::podresources::v1::ListPodResourcesResponse;
use tas_updater::podresources::{ClientConfig, ListDigest, PodResourcesClient};

fn bench_pod_poll(c: &mut Criterion) {
    let pods = busy_node::pods(&busy_node::topology());
    let answer = ListPodResourcesResponse {
        pod_resources: pods.clone(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a directory for the socket");
    let kubelet = FakeKubelet::new();
    kubelet.set_pods(pods);
    let _server = runtime
        .block_on(async { kubelet.serve(dir.path().join("kubelet.sock")) })
        .expect("the fake kubelet serves");
    // No pacing: the bench times the call, not the agent's spacing of calls.
    let client = PodResourcesClient::new(ClientConfig {
        min_call_interval: Duration::ZERO,
        ..ClientConfig::new(dir.path().join("kubelet.sock"))
    });
    let polled = runtime
        .block_on(client.list())
        .expect("the fake kubelet answers");
    assert_eq!(ListDigest::of(&polled), ListDigest::of(&answer));

    let mut group = c.benchmark_group("updater");
    group.bench_function("pod-poll-digest/200pods", |b| {
        b.iter(|| ListDigest::of(black_box(&answer)));
    });
    group.bench_function("pod-poll/200pods", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let answer = client.list().await.expect("the fake kubelet answers");
                ListDigest::of(&answer)
            })
        });
    });
    group.finish();
}

// Sample size and timings come from the command line (`make bench` sets them).
criterion_group!(benches, bench_pod_poll);
criterion_main!(benches);
