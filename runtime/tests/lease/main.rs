//! Leader election against a real kube-apiserver (the tas-testcluster shared cluster), each
//! test on a Lease in a namespace of its own, with short periods: a 2 s lease renewed
//! every 500 ms (renew deadline 1.33 s), candidates checking every 200 ms.
//!
//! Every handover test samples both electors' `is_leader()` throughout and fails if
//! they ever overlap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client};
use tas_runtime::lease::{FenceError, LeaderElection, LeaderElector, LeaderStatus, LeaseConfig};
use tas_testcluster::fault_proxy::{Fault, FaultProxy};
use tas_testcluster::{TestCluster, unique_namespace};
use tokio::task::JoinHandle;
use tokio::time::Instant;

const LEASE: &str = "tas-test-leader";
const TIMEOUT: Duration = Duration::from_secs(20);

fn shared() -> &'static TestCluster {
    TestCluster::shared().expect("the shared test cluster starts")
}

fn config(namespace: &str, identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(2),
        renew_period: Duration::from_millis(500),
        retry_period: Duration::from_millis(200),
        ..LeaseConfig::new(namespace, LEASE, identity)
    }
}

fn start(client: &Client, config: LeaseConfig) -> LeaderElection {
    LeaderElector::new(client.clone(), config)
        .expect("valid config")
        .run()
}

/// Polls `check` every 5 ms until it holds and returns how long that took. Tighter
/// than `wait_for`'s backoff because these tests compare handover times.
async fn poll_until(what: &str, check: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

async fn wait_leader(what: &str, election: &LeaderElection) -> Duration {
    let status = election.status();
    poll_until(what, || status.is_leader()).await
}

/// A fault proxy in front of the cluster's kube-apiserver, and an admin client
/// through it.
async fn through_proxy(cluster: &TestCluster) -> (FaultProxy, Client) {
    let proxy = FaultProxy::start(cluster).await.expect("fault proxy");
    let mut proxied = tas_runtime::client::load_config(Some(&cluster.kubeconfig_path()))
        .await
        .expect("kubeconfig loads");
    proxied.cluster_url = format!("https://{}", proxy.addr()).parse().unwrap();
    let client = Client::try_from(proxied).expect("client through the proxy");
    (proxy, client)
}

async fn lease_spec(client: &Client, namespace: &str) -> LeaseSpec {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let lease = leases.get(LEASE).await.expect("the lease exists");
    lease.spec.expect("the lease has a spec")
}

/// Samples two electors' leadership every millisecond until finished, counting the
/// samples in which both were leader. Reads go a, b, a, b: an overlap needs one side
/// to be leader on both sides of a read of the other, so a leadership that ends
/// between two reads is not mistaken for one.
struct OverlapWatch {
    done: Arc<AtomicBool>,
    task: JoinHandle<(u64, u64)>,
}

impl OverlapWatch {
    fn start(a: LeaderStatus, b: LeaderStatus) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let task = tokio::spawn(async move {
            let (mut samples, mut overlaps) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                let [a0, b1, a2, b3] = [a.is_leader(), b.is_leader(), a.is_leader(), b.is_leader()];
                // Both lead if the middle pair does and one side is confirmed around it.
                if b1 && a2 && (a0 || b3) {
                    overlaps += 1;
                }
                samples += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (samples, overlaps)
        });
        Self { done, task }
    }

    async fn assert_never_overlapped(self) {
        self.done.store(true, Ordering::Relaxed);
        let (samples, overlaps) = self.task.await.expect("sampler ran");
        assert!(samples > 100, "only {samples} samples taken");
        assert_eq!(
            overlaps, 0,
            "two leaders at once in {overlaps} of {samples} samples"
        );
    }
}

#[tokio::test]
async fn of_two_candidates_exactly_one_leads() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-one-leader").await.unwrap();

    let a = start(&client, config(&ns, "a"));
    let b = start(&client, config(&ns, "b"));
    let status = (a.status(), b.status());
    poll_until("a leader", || status.0.is_leader() || status.1.is_leader()).await;

    // Several renewals and candidate checks later there is still exactly one.
    let watch = OverlapWatch::start(a.status(), b.status());
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(a.is_leader() || b.is_leader(), "the leader dropped out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    watch.assert_never_overlapped().await;

    let leader = if a.is_leader() { "a" } else { "b" };
    let spec = lease_spec(&client, &ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some(leader));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
}

#[tokio::test]
async fn stepping_down_hands_over_without_waiting_for_expiry() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-step-down").await.unwrap();

    let a = start(&client, config(&ns, "a"));
    wait_leader("a to lead", &a).await;
    let b = start(&client, config(&ns, "b"));
    let watch = OverlapWatch::start(a.status(), b.status());
    // b has seen a's record by now and is waiting for it to expire.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!b.is_leader());

    let stepped_down = Instant::now();
    a.step_down().await.expect("a releases the lease");
    wait_leader("b to take over", &b).await;
    let handover = stepped_down.elapsed();
    watch.assert_never_overlapped().await;

    // A released lease is free at once: b only had to notice (one retry period), not
    // to wait out the 2 s lease.
    assert!(
        handover < Duration::from_secs(2),
        "handover took {handover:?}"
    );
    let spec = lease_spec(&client, &ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test]
async fn a_crashed_leader_is_replaced_once_its_lease_expires() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-crash").await.unwrap();

    let a = start(&client, config(&ns, "a"));
    wait_leader("a to lead", &a).await;
    let b = start(&client, config(&ns, "b"));
    let a_status = a.status();
    let watch = OverlapWatch::start(a.status(), b.status());

    let crashed = Instant::now();
    a.abort();
    wait_leader("b to take over", &b).await;
    let takeover = crashed.elapsed();
    watch.assert_never_overlapped().await;
    assert!(!a_status.is_leader(), "a crashed leader stays leader");

    // b waits out the 2 s lease from the last renewal it saw (at most one renew period
    // before the crash), then takes over on its next check.
    assert!(
        takeover > Duration::from_millis(1000),
        "took over after {takeover:?}"
    );
    assert!(
        takeover < Duration::from_secs(5),
        "took over after {takeover:?}"
    );
    let spec = lease_spec(&client, &ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
}

#[tokio::test]
async fn a_leader_cut_off_from_the_api_server_stops_before_another_takes_over() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-partition").await.unwrap();

    // a talks to kube-apiserver through a proxy that can stall.
    let (proxy, partitioned) = through_proxy(cluster).await;
    let a = start(&partitioned, config(&ns, "a"));
    wait_leader("a to lead", &a).await;
    let b = start(&client, config(&ns, "b"));
    let a_status = a.status();
    let watch = OverlapWatch::start(a.status(), b.status());

    let cut = Instant::now();
    proxy.set(Fault::Stall);
    poll_until("a to stop leading", || !a_status.is_leader()).await;
    let a_stopped = cut.elapsed();
    wait_leader("b to take over", &b).await;
    let b_leads = cut.elapsed();
    watch.assert_never_overlapped().await;

    // a gives up at its renew deadline (1.33 s after its last renewal, which started
    // before the cut), before the 2 s lease could expire for b.
    assert!(
        a_stopped < Duration::from_secs(2),
        "a stopped after {a_stopped:?}"
    );
    assert!(
        a_stopped < b_leads,
        "a stopped {a_stopped:?}, b led at {b_leads:?}"
    );
    assert_eq!(
        lease_spec(&client, &ns).await.holder_identity.as_deref(),
        Some("b")
    );
}

#[tokio::test]
async fn a_leader_whose_lease_was_taken_stops_at_its_next_renewal() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-taken").await.unwrap();

    // A long lease, so stopping at the next renewal is clearly not the deadline (4 s).
    let a = start(
        &client,
        LeaseConfig {
            lease_duration: Duration::from_secs(6),
            ..config(&ns, "a")
        },
    );
    wait_leader("a to lead", &a).await;

    // Another holder writes itself in (as a candidate with a stale view would).
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let mut lease = leases.get(LEASE).await.unwrap();
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some("intruder".into());
    spec.lease_duration_seconds = Some(2);
    leases
        .replace(LEASE, &PostParams::default(), &lease)
        .await
        .unwrap();
    let taken = Instant::now();

    let status = a.status();
    poll_until("a to stop leading", || !status.is_leader()).await;
    let stopped = taken.elapsed();
    assert!(
        stopped < Duration::from_secs(2),
        "a stopped after {stopped:?}"
    );

    // The intruder never renews: a takes the lease back once it expires.
    wait_leader("a to take the lease back", &a).await;
    let spec = lease_spec(&client, &ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_transitions, Some(1));
    a.step_down().await.unwrap();
    assert_eq!(lease_spec(&client, &ns).await.holder_identity, None);
}

#[tokio::test]
async fn an_invalid_config_is_refused() {
    let cluster = shared();
    let client = cluster.client().await.unwrap();
    let bad = LeaseConfig {
        renew_period: Duration::from_secs(10),
        ..config("default", "a")
    };
    let err = LeaderElector::new(client, bad).err().expect("refused");
    assert!(!err.is_transient());
}

/// A container restarted in the same pod keeps the pod name, so the new process has
/// the identity the Lease names. It must still wait the lease out: the crashed process
/// may have writes on the way to the API server (seen as a kubelet rejection when a
/// restarted scheduler placed a pod next to one its predecessor bound a moment before).
#[tokio::test]
async fn a_restarted_process_waits_out_the_lease_its_predecessor_held() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-restart").await.unwrap();

    let before = start(&client, config(&ns, "pod-a"));
    wait_leader("the first process to lead", &before).await;
    let crashed = Instant::now();
    before.abort();
    let after = start(&client, config(&ns, "pod-a"));
    wait_leader("the restarted process to lead", &after).await;
    let takeover = crashed.elapsed();
    // The 2 s lease from the last renewal seen, at most one renew period before the
    // crash.
    assert!(
        takeover > Duration::from_millis(1400),
        "the restarted process led {takeover:?} after the crash"
    );
    let spec = lease_spec(&client, &ns).await;
    assert_eq!(spec.holder_identity.as_deref(), Some("pod-a"));
}

#[tokio::test]
async fn writes_stop_a_margin_before_a_leader_that_cannot_renew_stops_leading() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let client = cluster.client().await.unwrap();
    let ns = unique_namespace(&client, "lease-fence").await.unwrap();

    // a's Lease requests go through a proxy that will stall them; its other writes
    // (ConfigMaps here, binds in the scheduler) still reach the API server.
    let (proxy, proxied) = through_proxy(cluster).await;
    let lease_config = config(&ns, "a");
    let margin = lease_config.write_margin();
    assert!(margin > Duration::from_millis(300), "margin {margin:?}");
    let a = start(&proxied, lease_config);
    wait_leader("a to lead", &a).await;
    let (status, fence) = (a.status(), a.fence());
    assert_eq!(fence.margin(), margin);
    let configmaps: Api<ConfigMap> = Api::namespaced(proxied.clone(), &ns);
    let named = |name: &str| -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap()
    };
    fence
        .write(configmaps.create(&PostParams::default(), &named("while-leading")))
        .await
        .expect("a leader's write goes through");

    proxy.set_for("/leases/", Fault::Stall);
    poll_until("the fence to close", || !fence.is_open()).await;
    let closed = Instant::now();
    // Still leader, but not for long enough to start a write bounded by the margin.
    assert!(
        status.is_leader(),
        "the fence closed only when leadership ended: no margin"
    );
    let inside = fence
        .write(configmaps.create(&PostParams::default(), &named("inside-the-margin")))
        .await;
    assert!(
        matches!(inside, Err(FenceError::Closed(_))),
        "a write inside the margin was sent: {inside:?}"
    );
    poll_until("a to stop leading", || !status.is_leader()).await;
    let gap = closed.elapsed();
    assert!(
        gap >= margin * 3 / 4 && gap < margin * 2,
        "leadership ended {gap:?} after the fence closed (margin {margin:?})"
    );
    assert!(proxy.stalled() > 0, "no Lease request was stalled");
    let direct: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    assert!(direct.get_opt("while-leading").await.unwrap().is_some());
    assert!(
        direct.get_opt("inside-the-margin").await.unwrap().is_none(),
        "the write inside the margin reached the API server"
    );
    proxy.set(Fault::Pass);
    a.abort();
}
