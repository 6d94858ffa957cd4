//! Faults of the control plane itself: etcd and kube-apiserver restarted in the middle
//! of a burst. Every operand reconnects (or exits and is restarted by the runner), and
//! its watches resume or relist. The new kube-apiserver's watch cache starts at the
//! current resourceVersion, so watches resuming from an older one get 410 Gone (the
//! forced watch expiry) and relist; the scenario checks that some did.

use super::harness::{BURST, LARGE, NAMESPACE, Run, Stack, TIMEOUT, Verdict};
use kube::api::{DeleteParams, ListParams};
use tas_nodesim::runner::Signal;
use tas_testcluster::{Component, TestCluster, wait_for};

/// Stops `component` (SIGTERM) half-way through a burst and starts it again; the rest
/// of the burst is created as soon as the API server takes it.
pub async fn restart(
    stack: &Stack,
    cluster: &mut TestCluster,
    component: Component,
    fault: &'static str,
) -> Verdict {
    let mut run = Run::start(stack, fault).await;
    run.create(BURST / 2, None).await;
    cluster
        .restart(component)
        .await
        .unwrap_or_else(|e| panic!("restarting {component}: {e}"));
    run.create(BURST / 2, None).await;
    stack.wait_available().await;
    let verdict = run.finish(stack).await;
    // Watches that resumed from a resourceVersion the new API server no longer has
    // (410 Gone, "too old resource version": Expired) and relisted.
    let mut expired_total = 0;
    for p in stack.runner.processes() {
        let log = stack.runner.log(&p.namespace, &p.pod).unwrap_or_default();
        let expired: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("too old resource version") || l.contains("Expired"))
            .collect();
        println!(
            "  {fault}: {} log lines on expired watches: {}",
            p.pod,
            expired.len()
        );
        for l in expired.iter().take(2) {
            println!("    {l}");
        }
        expired_total += expired.len();
    }
    if component == Component::KubeApiserver {
        assert!(
            expired_total > 0,
            "{fault}: no TAS process saw a watch expire (410) across the restart"
        );
    }
    verdict
}

/// Pods deleted while the schedulers cannot watch: both scheduler processes frozen, the
/// API server restarted, every bound pod of a full burst deleted, the schedulers
/// resumed. Their watches resume from a resourceVersion the new API server no longer
/// has (410) and relist; the relist does not return the deleted pods, and no Delete
/// ever comes for them. A burst that exactly fills the zones again must then be bound
/// in full: the reserve cache forgot the vanished pods (otherwise their nodes stay
/// pessimistic until `maxStaleness`).
pub async fn relist_after_missed_deletes(stack: &Stack, cluster: &mut TestCluster) -> Verdict {
    let schedulers = stack.schedulers(2).await;
    let full = stack.nodes().len() * 2;
    let mut before = Run::start(stack, "deletes missed by the watch (setup)").await;
    before.create_sized(full, None, LARGE).await;
    before.wait_bound(full).await;
    for s in &schedulers {
        stack
            .runner
            .signal(NAMESPACE, s, Signal::Freeze)
            .await
            .expect("scheduler frozen");
    }
    cluster
        .restart(Component::KubeApiserver)
        .await
        .expect("kube-apiserver restarted");
    let gone = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    wait_for("the burst deleted", TIMEOUT, || async {
        before
            .pods
            .delete_collection(&gone, &ListParams::default())
            .await?;
        let left = before.pods.list(&ListParams::default()).await?.items.len();
        Ok::<_, kube::Error>((left == 0).then_some(()))
    })
    .await
    .expect("pods deleted");
    for s in &schedulers {
        // A process the runner restarted meanwhile has nothing to resume.
        let _ = stack.runner.signal(NAMESPACE, s, Signal::Resume).await;
    }
    let now = stack.schedulers(2).await;
    stack.leader(&now).await;
    stack.wait_available().await;
    let mut run = Run::start(stack, "relist after deletes the watch missed").await;
    run.create_sized(full, None, LARGE).await;
    let verdict = run.finish(stack).await;
    assert_eq!(
        verdict.outcome.placements.len(),
        full,
        "the zones freed while the watch was away are used again: {:?}",
        verdict.outcome
    );
    verdict
}
