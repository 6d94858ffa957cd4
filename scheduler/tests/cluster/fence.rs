//! Leader election is always on and fences every bind: the scheduler binary, alone,
//! holds a Lease; once it can no longer renew it, no bind is sent after its renew
//! deadline, none is applied after a successor took the Lease, and the process exits
//! non-zero.

use super::fault_proxy::FaultProxy;
use super::leader::Proc;
use super::{TIMEOUT, env};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tas_testcluster::{TestCluster, wait_for};
use tokio::time::Instant;

fn start(config: &Path, kubeconfig: &Path, identity: &str, namespace: &str) -> Proc {
    Proc::start_scheduler(config, kubeconfig, identity, Some(namespace))
}

async fn holder(leases: &Api<Lease>, name: &str) -> Result<Option<String>, kube::Error> {
    Ok(leases
        .get_opt(name)
        .await?
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty()))
}

#[tokio::test]
async fn a_single_scheduler_with_the_default_config_holds_a_lease() {
    let env = env("lease-one").await;
    let cluster = TestCluster::shared().expect("cluster");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    // Nothing about leader election: the defaults, as one replica runs them. The Lease
    // namespace comes from --namespace (the pod's namespace in a cluster).
    let yaml = serde_norway::to_string(&json!({"schedulerName": env.scheduler})).unwrap();
    std::fs::write(&config, yaml).unwrap();
    let _scheduler = start(&config, &cluster.kubeconfig_path(), "only", &env.ns);

    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    let held = wait_for("the default Lease held", TIMEOUT, || async {
        holder(&leases, "tas-scheduler").await
    })
    .await
    .unwrap();
    assert_eq!(held, "only");

    let node = env.node(8).await;
    env.nrt(&node, "single-numa-node", &[(4, 4), (4, 4)], None)
        .await;
    let pod = env.pod(1).await;
    assert_eq!(env.wait_bound(&pod).await, node, "the leader binds");
}

/// The Lease as a second candidate finds it expired and takes it.
struct Takeover {
    /// The `renewTime` of the record it took over: the holder's last renewal.
    renewed: SystemTime,
    /// The resourceVersion the API server gave the takeover.
    resource_version: u64,
}

/// A second candidate, behaving as client-go's elector and TAS's own: it takes the
/// Lease once it has seen the same record (resourceVersion) for a whole lease duration
/// by its own clock, with the record's resourceVersion as precondition. Load can only
/// make it later, as it would a real candidate.
async fn take_over_when_expired(leases: &Api<Lease>, name: &str, lease: Duration) -> Takeover {
    let mut seen: Option<(String, Instant)> = None;
    loop {
        let current = leases.get(name).await.expect("the Lease");
        let version = current
            .metadata
            .resource_version
            .clone()
            .expect("a version");
        match &seen {
            Some((v, since)) if *v == version => {
                if since.elapsed() > lease {
                    let renewed = current
                        .spec
                        .as_ref()
                        .and_then(|s| s.renew_time.clone())
                        .expect("renewTime")
                        .0
                        .into();
                    let mut taken = current.clone();
                    let spec = taken.spec.get_or_insert_with(Default::default);
                    spec.holder_identity = Some("successor".into());
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                    if let Ok(written) = leases.replace(name, &PostParams::default(), &taken).await
                    {
                        let resource_version = written
                            .metadata
                            .resource_version
                            .and_then(|v| v.parse().ok())
                            .expect("an etcd revision");
                        return Takeover {
                            renewed,
                            resource_version,
                        };
                    }
                }
            }
            _ => seen = Some((version, Instant::now())),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records, per pod, the resourceVersion at which the API server first showed it bound
/// (the binding's own revision), from a watch started at `from`.
fn watch_bindings(pods: Api<Pod>, from: String) -> Arc<Mutex<BTreeMap<String, u64>>> {
    let bound = Arc::new(Mutex::new(BTreeMap::new()));
    let seen = bound.clone();
    tokio::spawn(async move {
        let mut events = pods
            .watch(&WatchParams::default(), &from)
            .await
            .expect("a pod watch")
            .boxed();
        while let Ok(Some(event)) = events.try_next().await {
            let (WatchEvent::Added(pod) | WatchEvent::Modified(pod)) = event else {
                continue;
            };
            let on_node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some();
            let version = pod
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok());
            if let (true, Some(version)) = (on_node, version) {
                let mut bound = seen.lock().unwrap();
                bound.entry(pod.name_any()).or_insert(version);
            }
            if pod.name_any() == WATCH_END {
                seen.lock().unwrap().insert(WATCH_END.into(), 0);
                return;
            }
        }
    });
    bound
}

/// A pod created last: once the watch shows it, it has shown every change before.
const WATCH_END: &str = "watch-end";

/// Once the scheduler can no longer renew its Lease it stops binding and exits
/// non-zero, and no two leaders act at once. The safety check compares what the API
/// server recorded, not the test's clock: a second candidate takes the Lease over as
/// soon as it may (seen unchanged for a lease duration), and every binding the API
/// server applied (its resourceVersion, from a pod watch) comes before that takeover's
/// resourceVersion (one etcd: revisions are totally ordered across kinds). Load can
/// only delay the takeover, never make the check fail wrongly. The renew deadline is
/// checked on when each bind was sent (reached the proxy): at least the write margin
/// before the deadline the last successful renewal set.
#[tokio::test]
async fn no_bind_is_answered_after_the_renew_deadline_and_the_process_exits() {
    const LEASE: Duration = Duration::from_secs(3);
    const RENEW_DEADLINE: Duration = Duration::from_secs(2); // two thirds of LEASE
    // Under the 500 ms write timeout (a sixth of LEASE), so binds still succeed, but
    // long enough that a bind started just before the deadline ends after it.
    const BIND_DELAY: Duration = Duration::from_millis(300);

    let env = env("lease-fence").await;
    let proxy = FaultProxy::start(env.client.clone(), BIND_DELAY).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, proxy.kubeconfig()).unwrap();
    let config = dir.path().join("config.yaml");
    let yaml = serde_norway::to_string(&json!({
        "schedulerName": env.scheduler,
        "leaderElection": {"leaseName": "fenced", "leaseDuration": "3s", "renewPeriod": "1s"},
    }))
    .unwrap();
    std::fs::write(&config, yaml).unwrap();
    let mut scheduler = start(&config, &kubeconfig, "fenced", &env.ns);

    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    wait_for("the Lease held", TIMEOUT, || async {
        holder(&leases, "fenced").await
    })
    .await
    .unwrap();
    let node = env.node(128).await;
    env.nrt(&node, "single-numa-node", &[(64, 64), (64, 64)], None)
        .await;
    let first = env.pod(1).await;
    env.wait_bound(&first).await;

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let from = pods
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .expect("a list version");
    let bound = watch_bindings(pods.clone(), from);

    // Renewals fail from now on; keep pods coming so binds are under way at any time.
    proxy.refuse_lease_updates();
    let cut = Instant::now();
    let successor = {
        let leases = leases.clone();
        tokio::spawn(async move { take_over_when_expired(&leases, "fenced", LEASE).await })
    };
    let mut created = Vec::new();
    let exit = loop {
        if let Some(status) = scheduler.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            cut.elapsed() < Duration::from_secs(20),
            "the scheduler is still running {:?} after its lease could not be renewed",
            cut.elapsed()
        );
        if created.len() < 100 {
            created.push(env.pod(1).await);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        !exit.success(),
        "losing the lease exits non-zero, got {exit}"
    );
    let takeover = tokio::time::timeout(TIMEOUT, successor)
        .await
        .expect("the successor takes the expired Lease")
        .unwrap();
    // Every binding made before the takeover has reached the watch once the pod created
    // after it has.
    let end: Pod = serde_json::from_value(json!({
        "metadata": {"name": WATCH_END},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "c"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &end).await.unwrap();
    wait_for("the watch reaches the last pod", TIMEOUT, || async {
        Ok::<_, String>(bound.lock().unwrap().contains_key(WATCH_END).then_some(()))
    })
    .await
    .unwrap();

    let bound = bound.lock().unwrap().clone();
    let after: Vec<_> = bound
        .iter()
        .filter(|(pod, version)| *pod != WATCH_END && **version > takeover.resource_version)
        .collect();
    assert!(
        after.is_empty(),
        "bound after the successor took the Lease at resourceVersion {}: {after:?}",
        takeover.resource_version
    );
    assert!(
        created.iter().any(|p| bound.contains_key(p)),
        "pods created after the cut were bound until the fence closed: {bound:?}"
    );

    // The renew deadline the last successful renewal set (its renewTime was taken right
    // before the request, on the clock the test shares), as an instant of the proxy's.
    let deadline = takeover.renewed + RENEW_DEADLINE;
    let since_deadline = SystemTime::now()
        .duration_since(deadline)
        .expect("the deadline has passed: the scheduler exited");
    let deadline = Instant::now() - since_deadline;
    let record = proxy.record();
    let accepted: Vec<_> = record
        .binds
        .iter()
        .filter(|b| b.status.is_success())
        .collect();
    assert!(
        accepted.iter().any(|b| b.arrived > cut),
        "binds went on after the cut until the fence (accepted: {accepted:?})"
    );
    for b in &accepted {
        assert!(
            b.arrived < deadline,
            "a bind was sent {:?} after the renew deadline",
            b.arrived.duration_since(deadline)
        );
    }
}
