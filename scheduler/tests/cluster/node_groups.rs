//! A node in a TAS node group (the scheduler config's `nodeGroups`) is never trusted
//! without its NodeResourceTopology: pods with exclusive resources wait for its first
//! publish, even under the default `nodesWithoutTopology: Schedule`.

use crate::{TIMEOUT, env};
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_testcluster::wait_for;

const AGENT: &str = "sched-test.tas.dev/agent";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_group_node_takes_numa_sensitive_pods_only_once_it_publishes() {
    let mut env = env("ngroup").await;
    let grouped = env.node_with_labels(16, &[(AGENT, "on")]).await;
    let group = env.group.clone();
    env.start_scheduler(json!({
        "nodeGroups": [{"matchLabels": {AGENT: "on", crate::GROUP: group}}]
    }));

    // Before the first publish: Pending, with a reason naming the node.
    let sensitive = env.pod(2).await;
    let msg = env.failed_scheduling(&sensitive).await;
    assert!(
        msg.contains(&format!(
            "1 node(s) in a TAS node group had not published their NodeResourceTopology yet ({grouped})"
        )),
        "{msg}"
    );
    assert_eq!(env.node_of(&sensitive).await, None);

    // A pod the kubelet pins nothing of is judged by node-level fit meanwhile.
    env.create_pod("shared", json!({}), json!({})).await;
    assert_eq!(env.wait_bound("shared").await, grouped);
    assert_eq!(env.node_of(&sensitive).await, None, "still waiting");

    // The first publish makes the node eligible.
    env.nrt(&grouped, "single-numa-node", &[(8, 8), (8, 8)], None)
        .await;
    assert_eq!(env.wait_bound(&sensitive).await, grouped);

    // Deleting the object makes it ineligible again.
    let nrts: Api<NodeResourceTopology> = Api::all(env.client.clone());
    nrts.delete(&grouped, &DeleteParams::default())
        .await
        .expect("NRT deleted");
    // A probe created before the scheduler saw the deletion may still be bound there;
    // the next one is not.
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no pod stayed Pending after the deletion"
        );
        let probe = env.pod(1).await;
        let outcome = wait_for(format!("{probe} decided"), TIMEOUT, || async {
            if let Some(node) = env.node_of(&probe).await {
                return Ok::<_, kube::Error>(Some(Err(node)));
            }
            let failed = env.events(&probe, "FailedScheduling").await;
            Ok(failed.into_iter().next().map(Ok))
        })
        .await
        .expect("the probe is bound or fails");
        match outcome {
            Ok(msg) => {
                assert!(msg.contains("had not published"), "{msg}");
                assert_eq!(env.node_of(&probe).await, None);
                break;
            }
            Err(node) => assert_eq!(node, grouped),
        }
    }
}
