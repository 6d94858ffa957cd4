//! Faults of the scheduler processes: the leader killed or frozen in the middle of a
//! burst, and `replicas` changed while pods arrive.

use super::harness::{BURST, NAMESPACE, Run, Stack, TIMEOUT, Verdict};
use std::time::SystemTime;
use tas_nodesim::runner::Signal;
use tas_testcluster::wait_for;

/// SIGKILL the leading scheduler (of two) half-way through a burst that overfills the
/// zones: the standby (or the restarted process) takes over from what the API server
/// says, and counts no zone twice.
pub async fn kill_leader(stack: &Stack) -> Verdict {
    let schedulers = stack.schedulers(2).await;
    let leader = stack.leader(&schedulers).await;
    let mut run = Run::start(stack, "SIGKILL the leader mid-burst").await;
    run.create(BURST / 2, None).await;
    stack
        .runner
        .signal(NAMESPACE, &leader, Signal::Kill)
        .await
        .expect("leader killed");
    run.create(BURST / 2, None).await;
    run.finish(stack).await
}

/// SIGSTOP the leading scheduler (of two) during a burst, until the standby holds the
/// Lease, then SIGCONT it while the new leader binds: the old process must not bind
/// again (its writes are fenced by its own deadline), and it exits and restarts as a
/// candidate.
pub async fn freeze_leader(stack: &Stack) -> Verdict {
    let schedulers = stack.schedulers(2).await;
    let leader = stack.leader(&schedulers).await;
    let standby: Vec<String> = schedulers
        .iter()
        .filter(|s| **s != leader)
        .cloned()
        .collect();
    let old_pid = stack.runner.pid(NAMESPACE, &leader).expect("leader pid");
    let mut run = Run::start(stack, "SIGSTOP the leader past its lease, SIGCONT").await;
    run.create(BURST / 2, None).await;
    stack
        .runner
        .signal(NAMESPACE, &leader, Signal::Freeze)
        .await
        .expect("leader frozen");
    run.create(2, None).await;
    let successor = stack.leader(&standby).await;
    // The new leader binds; the old one wakes up in the middle of that.
    run.create(BURST / 2, None).await;
    let resumed = SystemTime::now();
    // The runner restarts a process whose liveness probe failed (30 s); if it did
    // already, there is nothing left to resume and the check below still holds.
    let _ = stack
        .runner
        .signal(NAMESPACE, &leader, Signal::Resume)
        .await;
    run.create(1, None).await;
    wait_for(
        "the old leader's process to exit and restart",
        TIMEOUT,
        || async {
            Ok::<_, std::convert::Infallible>(
                stack
                    .runner
                    .pid(NAMESPACE, &leader)
                    .filter(|pid| *pid != old_pid),
            )
        },
    )
    .await
    .expect("the resumed process exits on its lost lease");
    let verdict = run.finish(stack).await;
    let late = verdict.accepted_from_after(&leader, resumed);
    assert!(
        late.is_empty(),
        "the old leader {leader} bound after SIGCONT while {successor} led: {late:?}"
    );
    assert!(
        verdict
            .bindings
            .iter()
            .any(|b| b.sender_pod.as_deref() == Some(successor.as_str())),
        "{successor} took over and bound: {:?}",
        verdict.bindings
    );
    verdict
}

/// `replicas` 1 → 2 → 1 while a burst arrives in three parts: the old and the new pods
/// never bind side by side.
pub async fn scale_replicas(stack: &Stack) -> Verdict {
    stack.schedulers(1).await;
    let mut run = Run::start(stack, "replicas 1->2->1 during a burst").await;
    run.create(3, None).await;
    stack.set_replicas(2).await;
    run.create(2, None).await;
    stack.schedulers(2).await;
    stack.set_replicas(1).await;
    run.create(3, None).await;
    stack.schedulers(1).await;
    run.finish(stack).await
}
