//! Nodes that leave and join: a node deleted and created again under its name on a
//! smaller machine while pods pinned to it arrive, and a node added while pods that
//! fit nowhere wait.
//!
//! A node leaves as a machine does: the runner kills its processes (its updater among
//! them), the simulator stops its kubelet (the referee drops its managers' state) and
//! deletes its Node. It joins in two steps, so that the time between the Node's
//! registration and its first NodeResourceTopology is as long as the test needs: the
//! simulator creates the Node with a fresh kubelet, and only then does the runner start
//! its pods (the updater DaemonSet's pod among them), as a slow image pull would.

use super::harness::{Run, SMALL, Stack, TIMEOUT, Verdict, workload_pod};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::SystemTime;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_e2e::stack;
use tas_nodesim::{NodeSpec, Scenario};
use tas_scheduler::cycle::UNPUBLISHED_TOPOLOGY;
use tas_testcluster::wait_for;

/// A node like the scenario's (single-numa-node at pod scope, in the sample CR's node
/// group) named `name`, with the zones of scenario line `zones`.
fn node_spec(name: &str, zones: &str) -> NodeSpec {
    let yaml = format!(
        "nodes:\n- name: {name}\n  topologyManagerPolicy: single-numa-node\n  topologyManagerScope: pod\n  zones:\n  - {zones}\n"
    );
    Scenario::from_yaml(&yaml)
        .expect("a node scenario")
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE)
        .nodes()[0]
        .clone()
}

/// The scenario node to take away: one running no scheduler process (losing the only
/// scheduler would stall the scenario until the node is back, which the kill scenario
/// covers), preferably no operator either.
fn node_to_remove(stack: &Stack) -> String {
    let processes = stack.runner.processes();
    let runs = |node: &str, component: &str| {
        processes
            .iter()
            .any(|p| p.node == node && p.pod.starts_with(component))
    };
    let nodes = stack.nodes();
    let free = |n: &&String| !runs(n, "tas-scheduler-");
    nodes
        .iter()
        .rev()
        .filter(free)
        .find(|n| !runs(n, "tas-operator-"))
        .or_else(|| nodes.iter().rev().find(free))
        .cloned()
        .expect("a node without a scheduler (3 nodes, at most 2 replicas)")
}

/// The machine of node `name` goes: its processes die, its kubelet stops, its Node is
/// deleted.
async fn remove(stack: &Stack, name: &str) {
    stack.runner.remove_node(name).await;
    stack.sim.remove_node(name).await.expect("node removed");
}

/// A machine registers as node `spec`: its Node is created, its kubelet handles the
/// pods bound to its name. Its own pods (the updater) do not run yet: see
/// [`start_pods`]. Returns the new Node's uid.
async fn register(stack: &Stack, spec: &NodeSpec) -> String {
    stack.sim.add_node(spec).await.expect("node added");
    let nodes: Api<Node> = Api::all(stack.client.clone());
    nodes
        .get(&spec.name)
        .await
        .expect("the new Node")
        .metadata
        .uid
        .expect("a uid")
}

/// The runner starts the pods of node `name`: the updater publishes its NRT.
async fn start_pods(stack: &Stack, name: &str) {
    stack
        .runner
        .add_node(name, &stack.sim.node_dir(name))
        .await
        .expect("the runner takes the node");
}

fn nrts(stack: &Stack) -> Api<NodeResourceTopology> {
    Api::all(stack.client.clone())
}

/// The NRT is owned by its Node: the garbage collector deletes it with the Node.
async fn wait_nrt_gone(stack: &Stack, name: &str) {
    let api = nrts(stack);
    wait_for(
        format!("the NodeResourceTopology of deleted node {name} garbage-collected"),
        TIMEOUT,
        || async { Ok::<_, kube::Error>(api.get_opt(name).await?.is_none().then_some(())) },
    )
    .await
    .expect("the NRT goes with its Node");
}

/// Waits for the NRT of node `name` published for the Node of `uid`; returns when it
/// was created.
async fn wait_nrt_for(stack: &Stack, name: &str, uid: &str) -> SystemTime {
    let api = nrts(stack);
    wait_for(
        format!("the first NodeResourceTopology of the new node {name}"),
        TIMEOUT,
        || async {
            let Some(nrt) = api.get_opt(name).await? else {
                return Ok::<_, kube::Error>(None);
            };
            let owned = nrt
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Node" && o.uid == uid);
            let created = nrt.metadata.creation_timestamp.clone();
            Ok(created
                .filter(|_| owned && !nrt.zones.is_empty())
                .map(|t| SystemTime::from(t.0)))
        },
    )
    .await
    .expect("the new node's updater publishes")
}

/// Waits until the scheduler says, in a FailedScheduling Event of the run, that a node
/// had not published its NRT yet — or binds a pod of the run not in `exempt`
/// meanwhile; asserts it did not.
async fn assert_unpublished_holds(stack: &Stack, run: &Run, exempt: &BTreeSet<String>) {
    let events: Api<Event> = Api::namespaced(stack.client.clone(), &run.ns);
    let early = wait_for(
        format!(
            "the scheduler to say in {} that a node had no NRT yet",
            run.ns
        ),
        TIMEOUT,
        || async {
            let early: Vec<String> = bound(run).await.difference(exempt).cloned().collect();
            let said = events
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("FailedScheduling")
                        && e.note
                            .as_deref()
                            .is_some_and(|n| n.contains(UNPUBLISHED_TOPOLOGY))
                });
            Ok::<_, kube::Error>((said || !early.is_empty()).then_some(early))
        },
    )
    .await
    .expect("the scheduler explains");
    assert!(
        early.is_empty(),
        "{}: NUMA-sensitive pods bound before the node's first NRT: {early:?}",
        run.fault
    );
}

/// The run's pods bound so far, by name.
async fn bound(run: &Run) -> BTreeSet<String> {
    run.pods
        .list(&ListParams::default())
        .await
        .expect("pods listed")
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// A Burstable pod for TAS requesting `cpus` CPUs (no exclusive CPU: not
/// NUMA-sensitive), on `node` only.
fn burstable_pod(node: &str, cpus: u32) -> Pod {
    let mut pod = workload_pod("burstable", Some(node), cpus);
    let spec = pod.spec.as_mut().expect("a spec");
    spec.containers[0].resources = serde_json::from_value(json!({
        "requests": {"cpu": cpus.to_string(), "memory": "1Gi"}
    }))
    .expect("resources");
    pod
}

/// Every binding the API server accepted for the run's pods not in `exempt` reached
/// it at or after `since` (the NRT's creation, to the second).
fn assert_bound_after(verdict: &Verdict, exempt: &BTreeSet<String>, since: SystemTime) {
    // creationTimestamp has whole seconds.
    let since_second = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(d.as_secs()))
        .unwrap_or(since);
    for b in verdict.bindings.iter().filter(|b| b.accepted()) {
        if exempt.contains(&b.pod) {
            continue;
        }
        assert!(
            b.received >= since_second,
            "{}: {} was bound at {:?}, before the node's first NRT ({since:?})",
            verdict.fault,
            b.pod,
            b.received
        );
    }
}

/// A node of the scenario (one without a scheduler) holds two pods of 3 CPUs; its machine goes (Node deleted,
/// the NRT garbage-collected with it) and comes back at once under the same name with
/// zones of 5 CPUs instead of 6 (10 allocatable). The two pods are still bound to its
/// name (the pod garbage collector deletes a deleted node's pods only after 40 s) and
/// its new kubelet runs them again, a zone each, as Kubernetes does. Pinned to it
/// meanwhile: a Burstable pod of 5 CPUs (fits the node only if those pods are
/// forgotten: the kubelet refuses it, OutOfcpu), a Guaranteed pod of 3 CPUs (fits a
/// zone only by the old machine's NRT) and two of 1 CPU. Nothing is bound to the node
/// before its first NRT; then the pods of 1 CPU are, the other two stay Pending with
/// the reason. Afterwards the node gets its machine back.
pub async fn recreate(stack: &Stack) -> Verdict {
    let name = node_to_remove(stack);
    let original = stack
        .scenario
        .nodes()
        .iter()
        .find(|n| n.name == name)
        .cloned()
        .expect("the node's spec");
    let mut run = Run::start(stack, "node deleted and recreated, smaller").await;
    run.create_sized(2, Some(&name), SMALL).await;
    run.wait_bound(2).await;
    let before = bound(&run).await;
    remove(stack, &name).await;
    wait_nrt_gone(stack, &name).await;

    let uid = register(
        stack,
        &node_spec(&name, "{ count: 2, cpus: 5, memory: 10Gi }"),
    )
    .await;
    // Not NUMA-sensitive, so it may be bound before the NRT: the node's CPUs decide.
    let burstable = format!("p-{}", before.len());
    run.create_pod(burstable_pod(&name, 5)).await;
    run.create_sized(1, Some(&name), SMALL).await;
    run.create_sized(2, Some(&name), 1).await;
    let mut exempt = before.clone();
    exempt.insert(burstable);
    assert_unpublished_holds(stack, &run, &exempt).await;
    start_pods(stack, &name).await;
    let published = wait_nrt_for(stack, &name, &uid).await;
    let verdict = run.finish(stack).await;
    assert_bound_after(&verdict, &exempt, published);
    assert_eq!(
        verdict.outcome.placements.len(),
        4,
        "{}: the two pods bound to the name and the two of 1 CPU run: {:?}",
        verdict.fault,
        verdict.outcome
    );
    assert!(verdict.outcome.placements.iter().all(|p| p.node == name));

    // The machine as it was, for the scenarios that follow.
    remove(stack, &name).await;
    wait_nrt_gone(stack, &name).await;
    let uid = register(stack, &original).await;
    start_pods(stack, &name).await;
    wait_nrt_for(stack, &name, &uid).await;
    stack.wait_available().await;
    verdict
}

/// Three pods of 7 CPUs, more than any zone of the scenario holds, wait Pending with
/// the reason. A node of two 8-CPU zones joins the node group: until its updater has
/// published, the scheduler says so and binds nothing to it; then two of the pods go
/// there (a zone each) and the third stays Pending (16 CPUs hold two). The node leaves
/// again afterwards.
pub async fn add_while_pending(stack: &Stack) -> Verdict {
    let name = format!("{}-joined", stack.nodes()[0]);
    let mut run = Run::start(stack, "node added while pods wait").await;
    run.create_sized(3, None, 7).await;
    super::updater::wait_explained(stack, &run, 3).await;
    assert!(bound(&run).await.is_empty(), "7 CPUs fit no zone");

    let uid = register(
        stack,
        &node_spec(&name, "{ count: 2, cpus: 8, memory: 12Gi }"),
    )
    .await;
    assert_unpublished_holds(stack, &run, &BTreeSet::new()).await;
    start_pods(stack, &name).await;
    let published = wait_nrt_for(stack, &name, &uid).await;
    let verdict = run.finish(stack).await;
    assert_bound_after(&verdict, &BTreeSet::new(), published);
    assert_eq!(
        verdict.outcome.placements.len(),
        2,
        "{}: a pod per zone of the new node: {:?}",
        verdict.fault,
        verdict.outcome
    );
    assert!(verdict.outcome.placements.iter().all(|p| p.node == name));

    remove(stack, &name).await;
    wait_nrt_gone(stack, &name).await;
    verdict
}
