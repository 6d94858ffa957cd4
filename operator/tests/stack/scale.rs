//! Measurements on 10 fake nodes, printed, never asserted: time from creating the
//! object to `Available=True`, and reconciles during ~20 s of idleness afterwards
//! (node heartbeats keep arriving; the goal is zero).

use crate::harness::*;
use kube::Client;
use std::time::{Duration, Instant};
use tas_api::tas::status::condition_type::{AVAILABLE, PROGRESSING};
use tas_operator::InProcess;
use tas_testcluster::unique_name;

const POOL: &str = "e2e.tas.dev/pool";
const NODES: usize = 10;
const IDLE: Duration = Duration::from_secs(20);
/// No reconcile for this long: the install's trailing events are processed.
const QUIET: Duration = Duration::from_secs(1);

pub async fn scenario(client: &Client, operator: &InProcess) {
    let ns = unique_name("tas-scale");
    let pool = unique_name("pool");
    let workers = nodes(client, "scale", NODES, &[(POOL, &pool)]).await;
    for node in &workers {
        publish_nrt(client, node).await;
    }

    let at_start = operator.metrics.reconcile_count();
    let started = Instant::now();
    create(client, &with_groups(&ns, &[("scale", POOL, &pool)])).await;
    wait_condition(client, AVAILABLE, "True", None).await;
    let to_available = started.elapsed();
    let cr = wait_status(client, "all nodes fresh, rollout complete", |cr| {
        cr.status.as_ref().unwrap().nodes_with_fresh_nrt == Some(NODES as i32)
            && condition(cr, PROGRESSING).is_some_and(|c| c.status == "False")
    })
    .await;
    let settled = started.elapsed();
    assert_eq!(cr.status.unwrap().desired_nodes, Some(NODES as i32));

    // The last rollout events may still sit in the controller's debounce window when
    // the status already shows the end state: let those run before measuring idleness.
    let at_settled = operator.metrics.reconcile_count();
    let mut before = at_settled;
    for _ in 0..10 {
        tokio::time::sleep(QUIET).await;
        let now = operator.metrics.reconcile_count();
        if now == before {
            break;
        }
        before = now;
    }
    // A measurement window, not a readiness wait.
    tokio::time::sleep(IDLE).await;
    let idle_reconciles = operator.metrics.reconcile_count() - before;
    println!(
        "MEASURED: {NODES} kwok nodes: CR created → Available=True in {:.2} s \
         (all {NODES} NRT fresh and rolled out in {:.2} s, {} reconcile(s) in total, \
         {} trailing); {idle_reconciles} reconcile(s) during {} s of idleness afterwards",
        to_available.as_secs_f64(),
        settled.as_secs_f64(),
        before - at_start,
        before - at_settled,
        IDLE.as_secs()
    );

    uninstall(client, &ns).await;
}
