//! The ring (bound, order, filters, settling), queries and records of attempts.

use super::*;

fn record(ns: &str, pod: &str) -> DecisionRecord {
    let who = (ns.into(), pod.into(), format!("uid-{pod}"));
    let mut r = DecisionRecord::new(
        rfc3339(SystemTime::UNIX_EPOCH),
        who,
        DecisionOutcome::Binding,
    );
    r.node = Some("n".into());
    r.nodes_evaluated = 1;
    r.feasible_nodes = 1;
    r
}

fn pods(records: &[DecisionRecord]) -> Vec<&str> {
    records.iter().map(|r| r.pod.as_str()).collect()
}

#[test]
fn keeps_the_newest_up_to_its_capacity_newest_first() {
    let log = DecisionLog::new(3);
    for p in ["a", "b", "c", "d", "e"] {
        log.record(record("ns", p));
    }
    let all = log.query(&DecisionQuery::default());
    assert_eq!(pods(&all), ["e", "d", "c"]);
    assert_eq!(
        all.iter().map(|r| r.id).collect::<Vec<_>>(),
        [4, 3, 2],
        "ids ascend with time"
    );
    assert_eq!(log.recorded(), 5);
    assert_eq!(log.capacity(), 3);
}

#[test]
fn a_log_of_no_capacity_keeps_nothing_but_counts() {
    let log = DecisionLog::new(0);
    assert!(!log.is_on());
    log.record(record("ns", "a"));
    assert!(log.query(&DecisionQuery::default()).is_empty());
    assert_eq!(log.recorded(), 1);
}

#[test]
fn filters_by_namespace_and_pod_then_limits() {
    let log = DecisionLog::new(10);
    for (ns, p) in [("a", "x"), ("b", "x"), ("a", "y"), ("a", "x"), ("a", "z")] {
        log.record(record(ns, p));
    }
    let q = |namespace: Option<&str>, pod: Option<&str>, limit| DecisionQuery {
        namespace: namespace.map(Into::into),
        pod: pod.map(Into::into),
        limit,
    };
    let in_a = log.query(&q(Some("a"), None, None));
    assert_eq!(pods(&in_a), ["z", "x", "y", "x"]);
    let x_in_a = log.query(&q(Some("a"), Some("x"), None));
    assert_eq!(
        x_in_a.iter().map(|r| r.id).collect::<Vec<_>>(),
        [3, 0],
        "both attempts of a/x, newest first"
    );
    let x_anywhere = log.query(&q(None, Some("x"), None));
    assert_eq!(x_anywhere.len(), 3);
    let newest_two = log.query(&q(Some("a"), None, Some(2)));
    assert_eq!(pods(&newest_two), ["z", "x"]);
    assert!(log.query(&q(Some("c"), None, None)).is_empty());
}

#[test]
fn settling_changes_the_outcome_of_a_kept_record_only() {
    let log = DecisionLog::new(2);
    let first = log.record(record("ns", "a"));
    let second = log.record(record("ns", "b"));
    log.settle(
        second,
        DecisionOutcome::Bound,
        None,
        Some(Duration::from_millis(3)),
    );
    let third = log.record(record("ns", "c"));
    // `a` fell out: settling it changes nothing and does not fail.
    log.settle(
        first,
        DecisionOutcome::BindFailed,
        Some("gone".into()),
        None,
    );
    log.settle(
        third,
        DecisionOutcome::BindFailed,
        Some("conflict".into()),
        None,
    );
    let all = log.query(&DecisionQuery::default());
    assert_eq!(pods(&all), ["c", "b"]);
    assert_eq!(all[0].outcome, DecisionOutcome::BindFailed);
    assert_eq!(all[0].message.as_deref(), Some("conflict"));
    assert_eq!(all[1].outcome, DecisionOutcome::Bound);
    assert_eq!(all[1].phases[0].name, "bind");
}

#[test]
fn bad_queries_say_what_is_wrong() {
    let zero = DecisionQuery {
        limit: Some(0),
        ..DecisionQuery::default()
    };
    assert_eq!(
        zero.validate().unwrap_err().to_string(),
        "limit must be at least 1"
    );
    let empty = DecisionQuery {
        pod: Some(String::new()),
        ..DecisionQuery::default()
    };
    assert!(
        empty
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("pod "),
        "names the parameter"
    );
    assert_eq!(DecisionQuery::default().validate(), Ok(()));
}

#[test]
fn records_are_camel_case_json_without_empty_fields() {
    let mut r = record("ns", "p");
    r.outcome = DecisionOutcome::BindFailed;
    r.set_phases(&[("filter", Duration::from_millis(2))]);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["outcome"], "bindFailed");
    assert_eq!(json["nodesEvaluated"], 1);
    assert_eq!(json["phases"][0]["seconds"], 0.002);
    assert_eq!(json["time"], "1970-01-01T00:00:00Z");
    assert!(json.get("traceId").is_none() && json.get("reasons").is_none());
    assert_eq!(
        DecisionOutcome::BindFailed.as_str(),
        json["outcome"].as_str().unwrap()
    );
}

#[test]
fn an_attempt_becomes_a_record_with_its_trace_id_and_devices() {
    use crate::cycle::dra::{DraChoice, DraOutcome};
    use crate::dra::DeviceId;
    use crate::dra::result::{AllocatedDevice, Allocation, ClaimAllocation};
    use crate::telemetry::Telemetry;
    use tas_runtime::telemetry::{Otlp, OtlpSettings};

    let pod = crate::test_support::pod_in("team", "web", &[], serde_json::json!({}));
    let choice = DraChoice {
        allocation: Allocation {
            claims: vec![ClaimAllocation {
                claim: "gpu".into(),
                result: None,
                devices: vec![AllocatedDevice {
                    request: "gpu".into(),
                    id: DeviceId::new("gpu.example.com", "n", "gpu-0"),
                    zones: None,
                }],
            }],
            aligned: true,
        },
        outcome: DraOutcome::Aligned,
        zones: None,
    };
    let phases = [("filter", Duration::from_millis(1))];
    let attempt = AttemptRecord {
        pod: &pod,
        started: SystemTime::UNIX_EPOCH,
        phases: &phases,
        decision: Some(Duration::from_millis(1)),
        nodes: 3,
        feasible: 2,
        outcome: AttemptOutcome::Scheduled {
            node: "n",
            zones: Some(vec![1]),
            score: 70,
            dra: Some(&choice),
        },
    };
    // Spans made (export off: no endpoint), so the record carries the trace id.
    let otlp = Otlp::new(OtlpSettings {
        service: crate::telemetry::SERVICE_NAME,
        ..OtlpSettings::default()
    });
    let telemetry = Telemetry::new(&otlp, &crate::metrics::Metrics::new());
    let span = telemetry.attempt(&attempt);
    let r = from_attempt(&attempt, span.as_ref());
    assert_eq!(r.key(), "team/web");
    assert_eq!(r.uid, "uid-web");
    assert_eq!(r.outcome, DecisionOutcome::Binding);
    assert_eq!(r.node.as_deref(), Some("n"));
    assert_eq!(r.zones, Some(vec![1]));
    assert_eq!(r.score, Some(70));
    assert_eq!((r.nodes_evaluated, r.feasible_nodes), (3, 2));
    assert_eq!(r.phases[0].name, "filter");
    let dra = r.dra.expect("the devices");
    assert!(dra.aligned && dra.outcome == "aligned", "{dra:?}");
    assert_eq!(dra.devices.len(), 1);
    assert!(dra.devices[0].contains("gpu-0"), "{dra:?}");
    let trace = r.trace_id.expect("a trace id");
    assert_eq!(trace.len(), 32);
    assert!(trace.chars().all(|c| c.is_ascii_hexdigit()), "{trace}");

    let unschedulable = AttemptRecord {
        outcome: AttemptOutcome::Unschedulable {
            reason: "0/3 nodes are available.",
        },
        ..attempt
    };
    let r = from_attempt(&unschedulable, None);
    assert_eq!(r.outcome, DecisionOutcome::Unschedulable);
    assert_eq!(r.message.as_deref(), Some("0/3 nodes are available."));
    assert!(r.node.is_none() && r.trace_id.is_none() && r.dra.is_none());
}
