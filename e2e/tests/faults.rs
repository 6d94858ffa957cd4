//! Faults on real processes (issue 18, item 6): one control plane (with kube-apiserver's
//! audit log of binding creates) and one TAS stack — the operator from
//! `config/default`, its updaters and schedulers, every one a process the node
//! simulator's pod runner started from the pod spec the operator rendered — and a
//! fault per scenario, each in the middle of a burst of pods on tight NUMA zones
//! (harness.rs). Each scenario ends with every pod bound and admitted by the kubelet
//! referee or Pending with the scheduler's explanation, no TopologyAffinityError or
//! other kubelet rejection, and no pod whose binding the API server accepted twice
//! (counted from the audit log); it prints one line with those figures.

#[path = "faults/api.rs"]
mod api;
#[path = "faults/control_plane.rs"]
mod control_plane;
#[path = "faults/harness.rs"]
mod harness;
#[path = "faults/nodes.rs"]
mod nodes;
#[path = "faults/operator.rs"]
mod operator;
#[path = "faults/scheduler.rs"]
mod scheduler;
#[path = "faults/updater.rs"]
mod updater;

use harness::{NAMESPACE, NODES_YAML, Stack, TIMEOUT};
use std::collections::BTreeMap;
use tas_e2e::stack::{
    self, NAME_LABEL, apply_cr, start_runner_with, start_simulator, wait_ready_pods,
};
use tas_nodesim::Scenario;
use tas_nodesim::runner::ApiRoute;
use tas_testcluster::fault_proxy::FaultProxy;
use tas_testcluster::{ClusterOptions, Component, TestCluster};

/// `TAS_FAULTS=kill,freeze` runs only those scenarios (replicas, kill, freeze,
/// terminate, apifaults, fence, updater, etcd, apiserver, relist, rollout,
/// node-recreate, node-add, stale-updater), in that order; unset, all of them.
const ONLY_ENV: &str = "TAS_FAULTS";

fn wanted(key: &str) -> bool {
    std::env::var(ONLY_ENV).is_err() || only(key)
}

/// Whether `TAS_FAULTS` names `key`.
fn only(key: &str) -> bool {
    std::env::var(ONLY_ENV).is_ok_and(|v| v.split(',').any(|k| k.trim() == key))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_ends_with_pods_admitted_or_explained() {
    let mut cluster = TestCluster::start(ClusterOptions {
        audit_bindings: true,
        ..ClusterOptions::full()
    })
    .expect("control plane");
    let client = cluster.client().await.expect("client");
    stack::install_default(&cluster).expect("installed from config/default");
    let scenario = Scenario::from_yaml(NODES_YAML)
        .expect("scenario")
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE);
    let work = tempfile::tempdir().expect("work dir");
    let sim = start_simulator(&client, &scenario, work.path())
        .await
        .expect("simulated nodes");
    // The scheduler pods reach kube-apiserver through the fault proxy (passing
    // everything unless a scenario says otherwise).
    let proxy = FaultProxy::start(&cluster).await.expect("fault proxy");
    let schedulers = ApiRoute {
        labels: BTreeMap::from([(NAME_LABEL.to_owned(), "tas-scheduler".to_owned())]),
        target: proxy.addr(),
    };
    let runner = start_runner_with(&cluster, &client, &sim, Vec::new(), vec![schedulers])
        .await
        .expect("pod runner");
    let stack = Stack {
        client: client.clone(),
        audit_log: cluster.audit_log_path().expect("the audit log is written"),
        scenario,
        sim,
        runner,
        proxy,
    };
    let _logs = stack.runner.log_guard();
    wait_ready_pods(
        &client,
        &stack.runner,
        NAMESPACE,
        "tas-operator",
        2,
        TIMEOUT,
    )
    .await
    .expect("the operator runs");
    apply_cr(&client, &stack::sample_cr().expect("sample CR"))
        .await
        .expect("CR applied");
    stack.wait_available().await;

    let mut verdicts = Vec::new();
    if wanted("replicas") {
        verdicts.push(scheduler::scale_replicas(&stack).await);
    }
    let two = [
        "kill",
        "freeze",
        "terminate",
        "apifaults",
        "fence",
        "relist",
    ];
    if two.into_iter().any(wanted) || wanted("stale-updater") {
        stack.set_replicas(2).await;
    }
    if wanted("kill") {
        verdicts.push(scheduler::kill_leader(&stack).await);
    }
    if wanted("freeze") {
        verdicts.push(scheduler::freeze_leader(&stack).await);
    }
    if wanted("terminate") {
        verdicts.push(api::terminate_leader(&stack).await);
    }
    if wanted("apifaults") {
        verdicts.push(api::errors_then_stall(&stack).await);
    }
    if wanted("fence") {
        verdicts.push(api::renewals_stalled(&stack).await);
    }
    if wanted("updater") {
        let fault = "updater down, pinned pods arrive";
        verdicts.push(updater::updater_down(&stack, fault, None).await);
    }
    if wanted("etcd") {
        let fault = "etcd restart mid-burst";
        verdicts.push(control_plane::restart(&stack, &mut cluster, Component::Etcd, fault).await);
    }
    if wanted("apiserver") {
        let fault = "kube-apiserver restart mid-burst";
        let apiserver = Component::KubeApiserver;
        verdicts.push(control_plane::restart(&stack, &mut cluster, apiserver, fault).await);
    }
    if wanted("relist") {
        verdicts.push(control_plane::relist_after_missed_deletes(&stack, &mut cluster).await);
    }
    if wanted("rollout") {
        verdicts.push(operator::edit_and_kill_mid_rollout(&stack).await);
    }
    if wanted("node-recreate") {
        verdicts.push(nodes::recreate(&stack).await);
    }
    if wanted("node-add") {
        verdicts.push(nodes::add_while_pending(&stack).await);
    }
    // Frozen past maxStaleness, before its heartbeat says it stopped: the pods bound
    // after its last object keep their reservations when the node is forced clean.
    if wanted("stale-updater") {
        let fault = "updater down past maxStaleness";
        let stale = Some(std::time::Duration::from_secs(4));
        verdicts.push(updater::updater_down(&stack, fault, stale).await);
    }
    println!("== faults ==");
    for v in &verdicts {
        println!("{}", v.line());
    }
    drop(_logs);
    stack.runner.shutdown().await;
}
