//! The node agent of one node down (frozen: no NRT refresh) while pods pinned to that
//! node keep arriving, then killed and restarted by the runner.

use super::harness::{LARGE, Run, SMALL, Stack, TIMEOUT, Verdict};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use std::collections::BTreeSet;
use tas_e2e::stack::AGENTS_NAMESPACE;
use tas_e2e::stack::{NAME_LABEL, is_ready};
use tas_nodesim::runner::Signal;
use tas_testcluster::wait_for;

/// The updater pod on `node`.
async fn updater_on(stack: &Stack, node: &str) -> String {
    let api: Api<Pod> = Api::namespaced(stack.client.clone(), AGENTS_NAMESPACE);
    let lp = ListParams::default().labels(&format!("{NAME_LABEL}=tas-updater"));
    wait_for(
        format!("a Ready updater pod on {node}"),
        TIMEOUT,
        || async {
            Ok::<_, kube::Error>(
                api.list(&lp)
                    .await?
                    .items
                    .into_iter()
                    .find(|p| {
                        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
                            && is_ready(p)
                            && stack.runner.pid(AGENTS_NAMESPACE, &p.name_any()).is_some()
                    })
                    .map(|p| p.name_any()),
            )
        },
    )
    .await
    .expect("the node's updater")
}

/// Waits until `n` pods of the run have a FailedScheduling Event.
pub async fn wait_explained(stack: &Stack, run: &Run, n: usize) {
    let events: Api<Event> = Api::namespaced(stack.client.clone(), &run.ns);
    wait_for(
        format!("{n} pods explained as Pending"),
        TIMEOUT,
        || async {
            let pods: BTreeSet<String> = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .filter_map(|e| e.regarding?.name)
                .collect();
            Ok::<_, kube::Error>((pods.len() >= n).then_some(()))
        },
    )
    .await
    .expect("Pending pods explained");
}

/// The updater of one node frozen: its NRT stops changing (it shows the node empty).
/// Two large pods pinned to the node take a zone each on the scheduler's reservations;
/// two small ones, which fit the node but no zone, must stay Pending rather than trust
/// the stale NRT. Then the updater is killed (the runner restarts it), publishes the
/// truth, and one more small pinned pod arrives.
///
/// With `stale_after` (the scheduler's `cache.maxStaleness` set to it first), the
/// updater stays frozen past it before the small pods arrive: an NRT whose writer
/// stopped must still not be trusted over the reservations of pods bound after it.
pub async fn updater_down(
    stack: &Stack,
    fault: &'static str,
    stale_after: Option<std::time::Duration>,
) -> Verdict {
    if let Some(stale) = stale_after {
        set_max_staleness(stack, stale).await;
    }
    let node = stack.nodes()[0].clone();
    let updater = updater_on(stack, &node).await;
    let old_pid = stack.runner.pid(AGENTS_NAMESPACE, &updater).expect("pid");
    let mut run = Run::start(stack, fault).await;
    stack
        .runner
        .signal(AGENTS_NAMESPACE, &updater, Signal::Freeze)
        .await
        .expect("updater frozen");
    let per_node = 2;
    run.create_sized(per_node, Some(&node), LARGE).await;
    run.wait_bound(per_node).await;
    if let Some(stale) = stale_after {
        // The fault's length, not a readiness wait: the NRT must outlive maxStaleness.
        tokio::time::sleep(stale * 2).await;
    }
    run.create_sized(2, Some(&node), SMALL).await;
    wait_explained(stack, &run, 2).await;
    stack
        .runner
        .signal(AGENTS_NAMESPACE, &updater, Signal::Kill)
        .await
        .expect("updater killed");
    wait_for("the updater restarted", TIMEOUT, || async {
        Ok::<_, std::convert::Infallible>(
            stack
                .runner
                .pid(AGENTS_NAMESPACE, &updater)
                .filter(|pid| *pid != old_pid),
        )
    })
    .await
    .expect("the runner restarts the updater");
    stack.wait_available().await;
    run.create_sized(1, Some(&node), SMALL).await;
    let verdict = run.finish(stack).await;
    assert_eq!(
        verdict.outcome.placements.len(),
        per_node,
        "the node's zones hold {per_node} pods: {:?}",
        verdict.outcome
    );
    verdict
}

/// Sets `cache.maxStaleness` (and a 1 s resync period) and waits until the scheduler
/// pods rolled onto it and one of the new ones leads.
async fn set_max_staleness(stack: &Stack, stale: std::time::Duration) {
    use kube::api::{Patch, PatchParams};
    let before = stack.schedulers(2).await;
    let api: Api<tas_api::tas::TopologyAwareScheduling> = Api::all(stack.client.clone());
    let cache =
        serde_json::json!({"resyncPeriod": "1s", "maxStaleness": format!("{}s", stale.as_secs())});
    api.patch(
        "default",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"scheduler": {"cache": cache}}})),
    )
    .await
    .expect("maxStaleness set");
    let rolled = wait_for("the scheduler pods rolled", TIMEOUT, || async {
        let now = stack.schedulers(2).await;
        Ok::<_, std::convert::Infallible>(now.iter().all(|p| !before.contains(p)).then_some(now))
    })
    .await
    .expect("scheduler rolled onto the new cache settings");
    stack.leader(&rolled).await;
}
