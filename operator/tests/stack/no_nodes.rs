//! Node groups that select no node: `Available=False` with `NoNodesSelected` (not
//! `Available=True` with 0 nodes), until a node matches.

use crate::harness::*;
use kube::Client;
use tas_api::tas::status::condition_type::{AVAILABLE, READY};
use tas_testcluster::unique_name;

const POOL: &str = "e2e.tas.dev/pool";

pub async fn scenario(client: &Client) {
    let ns = unique_name("tas-nonodes");
    let pool = unique_name("pool");
    create(client, &with_groups(&ns, &[("empty", POOL, &pool)])).await;
    let cr = wait_condition(client, AVAILABLE, "False", Some("NoNodesSelected")).await;
    let message = &condition(&cr, AVAILABLE).unwrap().message;
    assert!(message.contains("select no node"), "{message}");
    // Ready (what GitOps tools read) says the same, in the same status write.
    let ready = condition(&cr, READY).expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NoNodesSelected")
    );
    assert!(
        ready.message.starts_with("Available=False: "),
        "{}",
        ready.message
    );

    nodes(client, "nonodes", 1, &[(POOL, &pool)]).await;
    wait_condition(client, AVAILABLE, "True", Some("AsExpected")).await;
    uninstall(client, &ns).await;
}
