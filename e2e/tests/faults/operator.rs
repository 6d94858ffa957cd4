//! Faults of the operator: the CR edited again while the updaters roll onto an earlier
//! edit, and the leading operator process killed in the middle of that rollout, while
//! pods keep arriving.

use super::harness::{BURST, NAMESPACE, Run, Stack, TIMEOUT, Verdict};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tas_api::tas::TopologyAwareScheduling;
use tas_e2e::stack::AGENTS_NAMESPACE;
use tas_e2e::stack::{cmdline, wait_ready_pods};
use tas_nodesim::runner::Signal;
use tas_testcluster::wait_for;

async fn set_period(stack: &Stack, period: &str) {
    let api: Api<TopologyAwareScheduling> = Api::all(stack.client.clone());
    api.patch(
        "default",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"updater": {"refresh": {"period": period}}}})),
    )
    .await
    .expect("CR edited");
}

/// How many Ready updater processes run with `--...=<period>` (of all Ready ones).
async fn updaters_with(stack: &Stack, period: &str) -> (usize, usize) {
    let nodes = stack.nodes().len();
    let pods = wait_ready_pods(
        &stack.client,
        &stack.runner,
        AGENTS_NAMESPACE,
        "tas-updater",
        nodes,
        std::time::Duration::from_secs(2),
    )
    .await
    .unwrap_or_default();
    let with = pods
        .iter()
        .filter(|p| {
            stack
                .runner
                .pid(AGENTS_NAMESPACE, &p.name_any())
                .is_some_and(|pid| cmdline(pid).iter().any(|a| a.ends_with(period)))
        })
        .count();
    (with, pods.len())
}

/// Edit the updater period; once the first updater runs with it, edit it again and
/// SIGKILL the leading operator; pods arrive throughout. The rollout ends on the last
/// edit, every NRT fresh.
pub async fn edit_and_kill_mid_rollout(stack: &Stack) -> Verdict {
    let nodes = stack.nodes().len();
    let operators: Vec<String> = wait_ready_pods(
        &stack.client,
        &stack.runner,
        NAMESPACE,
        "tas-operator",
        2,
        TIMEOUT,
    )
    .await
    .expect("the operator runs")
    .iter()
    .map(ResourceExt::name_any)
    .collect();
    let leader = stack.lease_holder("tas-operator", &operators).await;
    let mut run = Run::start(stack, "CR edited and operator killed mid-rollout").await;
    run.create(BURST / 2, None).await;
    set_period(stack, "7s").await;
    wait_for("the first updater on the new period", TIMEOUT, || async {
        let (with, _) = updaters_with(stack, "7s").await;
        Ok::<_, std::convert::Infallible>((with >= 1).then_some(()))
    })
    .await
    .expect("the rollout started");
    set_period(stack, "9s").await;
    stack
        .runner
        .signal(NAMESPACE, &leader, Signal::Kill)
        .await
        .expect("operator killed");
    run.create(BURST / 2, None).await;
    wait_for(
        "every updater on the last period",
        std::time::Duration::from_secs(240),
        || async {
            let (with, all) = updaters_with(stack, "9s").await;
            Ok::<_, std::convert::Infallible>((with == nodes && all == nodes).then_some(()))
        },
    )
    .await
    .expect("the rollout ends on the last edit");
    stack.wait_available().await;
    run.finish(stack).await
}
