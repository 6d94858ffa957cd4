//! Faults of the control plane itself: etcd and kube-apiserver restarted in the middle
//! of a burst. Every operand reconnects (or exits and is restarted by the runner), and
//! its watches resume or relist. The new kube-apiserver's watch cache starts at the
//! current resourceVersion, so watches resuming from an older one get 410 Gone (the
//! forced watch expiry) and relist; the scenario checks that some did.

use super::harness::{BURST, Run, Stack, Verdict};
use tas_testcluster::{Component, TestCluster};

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
            .filter(|l| l.contains("410") || l.contains("too old") || l.contains("Expired"))
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
