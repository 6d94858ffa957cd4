//! Leader election is always on and fences every bind: the scheduler binary, alone,
//! holds a Lease; once it can no longer renew it, no bind is answered after its renew
//! deadline and the process exits non-zero.

use super::fault_proxy::FaultProxy;
use super::leader::Proc;
use super::{TIMEOUT, env};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::json;
use std::path::Path;
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

    // Renewals fail from now on; keep pods coming so binds are under way at any time.
    proxy.refuse_lease_updates();
    let cut = Instant::now();
    let mut pods = Vec::new();
    let exit = loop {
        if let Some(status) = scheduler.0.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            cut.elapsed() < Duration::from_secs(20),
            "the scheduler is still running {:?} after its lease could not be renewed",
            cut.elapsed()
        );
        if pods.len() < 100 {
            pods.push(env.pod(1).await);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let exited_at = SystemTime::now();
    assert!(
        !exit.success(),
        "losing the lease exits non-zero, got {exit}"
    );

    // The last successful lease write: its renewTime was taken right before the
    // request started, which is when the scheduler's renew deadline starts counting.
    let renewed: SystemTime = leases
        .get("fenced")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.renew_time)
        .expect("renewTime")
        .0
        .into();
    let deadline = renewed + RENEW_DEADLINE;
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
            b.answered < deadline,
            "a bind was answered {:?} after the renew deadline",
            b.answered.duration_since(deadline).unwrap_or_default()
        );
    }
    // It stopped binding at the deadline and exited soon after, before the lease
    // (3 s from the last renewal) could pass to anyone else.
    assert!(
        exited_at < renewed + LEASE + Duration::from_secs(1),
        "exited {:?} after the last renewal",
        exited_at.duration_since(renewed).unwrap_or_default()
    );
}
