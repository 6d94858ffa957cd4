//! Two scheduler processes with leader election: only the leader binds; when it is
//! killed, the other takes over and no pod is bound twice.

use super::{TIMEOUT, env};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use tas_testcluster::{TestCluster, wait_for};

pub(super) struct Proc(pub(super) Child);

impl Proc {
    /// The `tas-scheduler` binary with `config`, against the cluster of `kubeconfig`, as
    /// `identity`, in pod namespace `namespace` when given; HTTP on a free loopback
    /// port, warnings only on stderr.
    pub(super) fn start_scheduler(
        config: &Path,
        kubeconfig: &Path,
        identity: &str,
        namespace: Option<&str>,
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tas-scheduler"));
        command
            .arg(format!("--config={}", config.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--http-address=127.0.0.1:0")
            .arg(format!("--identity={identity}"));
        if let Some(namespace) = namespace {
            command.arg(format!("--namespace={namespace}"));
        }
        command
            .arg("--log-level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map(Proc)
            .expect("scheduler starts")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_standby_takes_over_when_the_leader_dies_and_nothing_is_bound_twice() {
    let env = env("leader").await;
    let cluster = TestCluster::shared().expect("cluster");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    let yaml = serde_norway::to_string(&json!({
        "schedulerName": env.scheduler,
        "leaderElection": {"enabled": true, "leaseName": "sched", "leaseNamespace": env.ns,
                           "leaseDuration": "3s", "renewPeriod": "1s"},
    }))
    .unwrap();
    std::fs::write(&config, yaml).unwrap();
    let kubeconfig = cluster.kubeconfig_path();
    let start = |identity: &str| Proc::start_scheduler(&config, &kubeconfig, identity, None);
    let mut procs = vec![("a", start("a")), ("b", start("b"))];

    let mut nodes = Vec::new();
    for _ in 0..2 {
        let n = env.node(64).await;
        env.nrt(&n, "single-numa-node", &[(32, 32), (32, 32)], None)
            .await;
        nodes.push(n);
    }
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    let leader = wait_for("a leader", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            leases
                .get_opt("sched")
                .await?
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty()),
        )
    })
    .await
    .unwrap();
    let mut pods = Vec::new();
    for _ in 0..10 {
        pods.push(env.pod(1).await);
    }
    for p in &pods {
        env.wait_bound(p).await;
    }

    // Kill the leader without letting it release the lease.
    let idx = procs
        .iter()
        .position(|(id, _)| *id == leader)
        .expect("leader is one of ours");
    let (_, mut dead) = procs.remove(idx);
    dead.0.kill().expect("kill");
    let _ = dead.0.wait();
    let survivor = procs[0].0;
    let mut more = Vec::new();
    for _ in 0..10 {
        more.push(env.pod(1).await);
    }
    for p in &more {
        env.wait_bound(p).await;
    }
    let holder = leases
        .get("sched")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(
        holder.as_deref(),
        Some(survivor),
        "the survivor holds the lease"
    );
    for p in pods.iter().chain(&more) {
        let scheduled = env.events(p, "Scheduled").await.len();
        assert!(scheduled <= 1, "{p} has {scheduled} Scheduled events");
    }
}
