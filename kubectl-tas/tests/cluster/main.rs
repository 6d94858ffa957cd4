//! `kubectl tas` against a real API server: `status` on a stack object, and `nodes` /
//! `explain` against a running scheduler whose reservations are read through the API
//! server's service proxy.

mod env;
mod flags;
mod gather;
mod stack_object;

use env::{Env, PORT_NAME, SERVICE, TIMEOUT, env};
use kubectl_tas::connect::BearerToken;
use kubectl_tas::proxy::SchedulerService;
use serde_json::{Value, json};
use tas_scheduler::debug::ReservationsReport;
use tas_testcluster::{wait_event_note, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_conditions_node_groups_and_stale_nodes() {
    let env = env("status").await;
    let _stack = stack_object::STACK.lock().await;
    let status = json!({
        "observedGeneration": 1,
        "conditions": [
            {"type": "Available", "status": "False", "reason": "NodesStale", "message": "1 of 3 nodes has no fresh NodeResourceTopology", "lastTransitionTime": "2026-01-02T03:04:05Z"},
            {"type": "Degraded", "status": "True", "reason": "NRTStale", "message": "node worker-2 has not refreshed its NodeResourceTopology", "lastTransitionTime": "2026-01-02T03:04:05Z"}
        ],
        "nodeGroups": [{"name": "gpu", "desiredNodes": 3, "readyNodes": 3, "nodesWithFreshNRT": 2, "staleNodes": ["worker-2"]}],
        "desiredNodes": 3, "nodesWithFreshNRT": 2,
        "scheduler": {"schedulerName": "topology-aware-scheduler", "replicas": 1, "readyReplicas": 1}
    });
    stack_object::fresh_stack(&env.client, json!({}), status).await;

    let text = env.kubectl_tas(&["status"]);
    for want in [
        "Degraded",
        "NRTStale",
        "node worker-2 has not refreshed",
        "topology-aware-scheduler (1/1 replicas ready)",
        "3 selected, 2 with a fresh NodeResourceTopology",
    ] {
        assert!(text.contains(want), "{want:?} in:\n{text}");
    }
    let group = text
        .lines()
        .find(|l| l.starts_with("gpu "))
        .unwrap_or_else(|| panic!("a row for group gpu:\n{text}"));
    let cells: Vec<&str> = group.split_whitespace().collect();
    assert_eq!(cells, ["gpu", "3", "3", "2", "worker-2"], "{text}");

    let json: Value = serde_json::from_str(&env.kubectl_tas(&["status", "-o", "json"])).unwrap();
    assert_eq!(json["found"], true);
    assert_eq!(json["nodeGroups"][0]["staleNodes"], json!(["worker-2"]));
    assert_eq!(json["conditions"][1]["reason"], "NRTStale");
}

/// `GET path` on the scheduler's own port, over TLS with `token`: status and body.
async fn get_direct(port: u16, path: &str, token: &str) -> (u16, String) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    tas_testcluster::https_get(addr, path, Some(token))
        .await
        .expect("an HTTPS answer")
}

/// The scheduler's Service, shown `token` (the kubeconfig user's, as `kubectl tas`
/// does).
fn service(env: &Env, token: Option<String>) -> SchedulerService {
    SchedulerService {
        namespace: env.ns.clone(),
        name: SERVICE.into(),
        port: PORT_NAME.into(),
        scheme: "https".into(),
        token: token.map(BearerToken),
    }
}

fn node<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["node"] == name))
        .unwrap_or_else(|| panic!("{name} in {report:#}"))
}

async fn failed_scheduling(env: &Env, pod: &str) -> String {
    wait_event_note(&env.client, &env.ns, pod, "FailedScheduling", TIMEOUT)
        .await
        .expect("event")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_and_explain_see_the_reservations_the_scheduler_holds() {
    let mut env = env("explain").await;
    let a = env.node(16).await;
    let b = env.node(16).await;
    env.nrt(&a, &[(8, 6), (8, 6)]).await;
    env.nrt(&b, &[(4, 4), (4, 4)]).await;
    env.start_scheduler();
    env.scheduler_service().await;

    // 6 CPUs fit only a's zones; the scheduler then holds 6 CPUs on every zone of a
    // until the node's NRT fingerprint vouches for the pod (never, here).
    let big = env.pod(6, &env.scheduler).await;
    assert_eq!(env.wait_bound(&big).await, a);

    // The debug endpoint through the API server's service proxy: refused without a
    // token (the proxy sends no credentials of its own), answered to the admin's token
    // carried in the proxy-safe header.
    let client = env.client.clone();
    let admin_token = env.cluster.admin_token().expect("the admin token");
    let anonymous = service(&env, None).reservations(&client).await;
    assert!(
        anonymous
            .as_ref()
            .is_err_and(|e| e.to_string().contains("401")),
        "{anonymous:?}"
    );
    let svc = service(&env, Some(admin_token.clone()));
    let report: ReservationsReport =
        wait_for("the reservation on a, via the proxy", TIMEOUT, || async {
            let r = svc.reservations(&client).await?;
            Ok::<_, kubectl_tas::Error>(Some(r).filter(|r| {
                r.node(&a)
                    .is_some_and(|n| n.reservations.iter().any(|r| r.name == big))
            }))
        })
        .await
        .expect("reservations through the service proxy");
    assert_eq!(report.scheduler_name, env.scheduler);
    assert!(report.leader);
    let on_a = report.node(&a).unwrap();
    assert!(!on_a.confirmed, "{on_a:?}");
    assert_eq!(
        on_a.reservations[0].amounts.get("cpu"),
        Some(&6000),
        "{on_a:?}"
    );
    assert_eq!(on_a.reservations[0].zones, None, "every zone: {on_a:?}");
    let free: Vec<i64> = on_a.zones.iter().map(|z| z.available["cpu"]).collect();
    assert_eq!(
        free,
        [0, 0],
        "6 of 6 free CPUs held on every zone: {on_a:?}"
    );
    // The same answer on the scheduler's own port.
    let (code, body) = get_direct(env.http_port, "/debug/reservations", &admin_token).await;
    assert_eq!(code, 200, "{body}");
    let direct: ReservationsReport = serde_json::from_str(&body).unwrap();
    let held = |r: &ReservationsReport| {
        let n = r.node(&a).unwrap();
        (
            n.reservations
                .iter()
                .map(|r| (r.uid.clone(), r.amounts.clone()))
                .collect::<Vec<_>>(),
            n.zones.clone(),
        )
    };
    assert_eq!(held(&direct), held(&report));

    // 5 CPUs: a's view has none free, b's zones hold 4 at most. The Event names both.
    let pending = env.pod(5, &env.scheduler).await;
    let msg = failed_scheduling(&env, &pending).await;
    assert!(
        msg.contains(&format!("(cpu: need 5, largest free zone 0) ({a})")),
        "names a: {msg}"
    );
    assert!(
        msg.contains(&format!("(cpu: need 5, largest zone 4) ({b})")),
        "names b: {msg}"
    );

    // decisions, live: the pending pod's newest attempt, with the Event's reasons per
    // node count; the big pod's, bound to a.
    let live: Value =
        serde_json::from_str(&env.kubectl_tas(&["decisions", "--pod", &pending, "-o", "json"]))
            .unwrap();
    let newest = &live["decisions"][0];
    assert_eq!(newest["outcome"], "unschedulable", "{live:#}");
    assert_eq!(newest["feasibleNodes"], 0, "{live:#}");
    let message = newest["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("0/") && message.contains(&format!("({a})")),
        "{live:#}"
    );
    // Every node evaluated gives one reason (other tests' nodes share the cluster).
    let reasons = newest["reasons"].as_array().unwrap();
    let counted: u64 = reasons.iter().filter_map(|r| r["nodes"].as_u64()).sum();
    assert_eq!(Some(counted), newest["nodesEvaluated"].as_u64(), "{live:#}");
    for (node, reason) in [(&a, "largest free zone 0"), (&b, "largest zone 4")] {
        let r = reasons
            .iter()
            .find(|r| {
                r["named"]
                    .as_array()
                    .is_some_and(|n| n.contains(&json!(node)))
            })
            .unwrap_or_else(|| panic!("a reason naming {node}: {live:#}"));
        assert!(
            r["reason"].as_str().unwrap_or_default().contains(reason),
            "{r}"
        );
        assert_eq!(r["nodes"], 1, "{r}");
    }
    let big_attempt: Value = serde_json::from_str(&env.kubectl_tas(&[
        "decisions",
        "--pod",
        &format!("{}/{big}", env.ns),
        "--limit",
        "1",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(big_attempt["decisions"][0]["outcome"], "bound");
    assert_eq!(big_attempt["decisions"][0]["node"], a.as_str());
    let text = env.kubectl_tas(&["decisions"]);
    assert!(
        text.lines()
            .any(|l| l.contains(&format!("/{pending}")) && l.contains("unschedulable")),
        "{text}"
    );
    assert!(
        text.contains(&format!("/{pending}: 0/")),
        "the why line: {text}"
    );

    // nodes: once kwok runs the pod, a's NRT (fingerprint of no pod) no longer matches
    // the scheduler's pods; b's does.
    let nodes: Value = wait_for("a's fingerprint mismatch", TIMEOUT, || async {
        let v: Value = serde_json::from_str(&env.kubectl_tas(&["nodes", "-o", "json"])).unwrap();
        Ok::<_, std::convert::Infallible>((node(&v, &a)["fingerprint"] == "mismatch").then_some(v))
    })
    .await
    .expect("mismatch");
    assert_eq!(node(&nodes, &b)["fingerprint"], "match", "{nodes:#}");
    // Without --scheduler-token-file the plugin shows the scheduler nothing, although the
    // kubeconfig holds a token (the admin's): the scheduler refuses, the report says so.
    let plain: Value =
        serde_json::from_str(&env.kubectl_tas_plain(&["nodes", "-o", "json"])).unwrap();
    let error = plain["schedulerError"].as_str().unwrap_or_default();
    assert!(error.contains("401"), "{plain:#}");
    assert_eq!(node(&plain, &a)["reservations"], 0, "{plain:#}");
    assert_eq!(node(&nodes, &b)["confirmed"], true);
    assert_eq!(node(&nodes, &a)["confirmed"], false);
    assert_eq!(node(&nodes, &a)["reservations"], 1);
    let zone0 = &node(&nodes, &a)["zones"][0];
    assert_eq!(zone0["zone"], "node-0");
    assert_eq!(zone0["resources"][0]["resource"], "cpu");
    assert_eq!(zone0["resources"][0]["free"], 6000);
    assert_eq!(zone0["resources"][0]["allocatable"], 8000);
    assert_eq!(zone0["resources"][0]["schedulerFree"], 0);
    let text = env.kubectl_tas(&["nodes"]);
    eprintln!("kubectl tas nodes:\n{text}");
    let a_line = text
        .lines()
        .find(|l| l.starts_with(&a))
        .unwrap_or_else(|| panic!("a line for {a}:\n{text}"));
    // 6 of 8 free: 15 of 20 cells; the scheduler's view: 0.
    let bar = format!("[{}{}]", "#".repeat(15), ".".repeat(5));
    for want in [
        "single-numa-node/container",
        "mismatch",
        "1 reserved",
        "node-0",
        "cpu",
        &bar,
    ] {
        assert!(a_line.contains(want), "{want:?} in {a_line:?}\n{text}");
    }
    assert!(
        a_line.trim_end().ends_with(" 0"),
        "scheduler free 0: {a_line:?}"
    );
    let b_line = text.lines().find(|l| l.starts_with(&b)).unwrap();
    assert!(
        b_line.contains("match") && b_line.contains("confirmed"),
        "{b_line}"
    );
    assert!(
        b_line.contains(&format!("[{}]", "#".repeat(20))),
        "{b_line}"
    );

    // explain the Pending pod: judged on the scheduler's view, not the NRT alone (which
    // has 6 free on a).
    let text = env.kubectl_tas(&["explain", &pending]);
    eprintln!("kubectl tas explain {pending}:\n{text}");
    for want in [
        format!(
            "{a}: does not fit: cannot align container app to one NUMA zone (cpu: need 5, largest free zone 0)"
        ),
        format!(
            "{b}: does not fit: cannot align container app to one NUMA zone (cpu: need 5, largest zone 4)"
        ),
        "topology manager single-numa-node, scope container".to_owned(),
        format!("reserved for {}/{big}: cpu 6", env.ns),
        "0/".to_owned(),
    ] {
        assert!(text.contains(&want), "{want:?} in:\n{text}");
    }
    let json: Value =
        serde_json::from_str(&env.kubectl_tas(&["explain", &pending, "-o", "json"])).unwrap();
    let on_a = node(&json, &a);
    assert_eq!(on_a["fits"], false);
    assert_eq!(
        on_a["zones"][0]["summary"],
        "node-0: cpu 0 free < 5 needed (short 5); memory 15Gi free >= 1Gi needed",
        "{on_a:#}"
    );
    assert_eq!(
        node(&json, &b)["zones"][1]["summary"],
        "node-1: cpu 4 free < 5 needed (short 1); memory 16Gi free >= 1Gi needed"
    );

    // A pod that fits: 2 CPUs (for a scheduler nobody runs, so it stays put) fit b.
    let small = env.pod(2, "nobody").await;
    let json: Value =
        serde_json::from_str(&env.kubectl_tas(&["explain", &small, "-o", "json"])).unwrap();
    assert_eq!(node(&json, &b)["fits"], true, "{json:#}");
    assert_eq!(
        node(&json, &b)["zones"][0]["summary"],
        "node-0: cpu 4 free >= 2 needed; memory 16Gi free >= 1Gi needed"
    );
    assert_eq!(node(&json, &a)["fits"], false);
    let text = env.kubectl_tas(&["explain", &small]);
    assert!(text.contains(&format!("{b}: fits")), "{text}");
}
