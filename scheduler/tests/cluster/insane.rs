//! An NRT object that advertises more than its node has (available > allocatable) is
//! not believed: the node stays ineligible for NUMA-sensitive pods, the scheduler says
//! so in an Event on the object and counts it in a metric, and a sane object restores
//! the node.

use crate::{TIMEOUT, env};
use serde_json::json;
use tas_testcluster::{wait_event_note, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_an_insane_topology_stays_ineligible() {
    let mut env = env("insane").await;
    let node = env.node(16).await;
    // Zone 0 claims 12 free CPUs of 8 allocatable: a 6-CPU pod would "fit" only there.
    env.nrt(&node, "single-numa-node", &[(8, 12), (8, 2)], None)
        .await;
    env.start_scheduler(json!({}));

    let note = wait_event_note(
        &env.client,
        "default",
        &node,
        "InvalidNodeResourceTopology",
        TIMEOUT,
    )
    .await
    .expect("the scheduler reports the insane object");
    assert!(
        note.contains("available 12, allocatable 8")
            && note.contains("must be available <= allocatable <= capacity"),
        "{note}"
    );

    // Counted once per arrival of the object (a resync may see it again).
    let refused = "tas_scheduler_refused_node_topologies_total{problem=\"amounts_out_of_order\"} ";
    let text = wait_for("the refusal counted", TIMEOUT, || async {
        let text = env.metrics().await?;
        Ok::<_, String>(text.contains(refused).then_some(text))
    })
    .await
    .expect("the metric counts the refusal");
    assert!(
        text.contains("tas_scheduler_invalid_node_topologies 1"),
        "{text}"
    );

    // A pod that only the inflated zone could hold stays pending, with the reason.
    let pod = env.pod(6).await;
    let message = env.failed_scheduling(&pod).await;
    assert!(
        message.contains(tas_scheduler::cycle::INVALID_TOPOLOGY),
        "{message}"
    );
    assert_eq!(env.node_of(&pod).await, None);

    // The node agent corrects the object: the node is eligible again.
    env.nrt(&node, "single-numa-node", &[(8, 8), (8, 2)], None)
        .await;
    assert_eq!(env.wait_bound(&pod).await, node);
    let text = env.metrics().await.unwrap();
    assert!(
        text.contains("tas_scheduler_invalid_node_topologies 0"),
        "{text}"
    );
}
