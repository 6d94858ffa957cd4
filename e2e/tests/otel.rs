//! OpenTelemetry from every component, into a real OpenTelemetry Collector (built from Go
//! modules: the OTLP receiver and the file exporter; `TAS_OTELCOL_BIN`). The stack is
//! installed from `config/default` and every component runs as a process from its pod
//! spec (the pod runner); the TopologyAwareScheduling object names the collector as
//! `spec.observability.otlpEndpoint`, a name each pod resolves to its gateway where the
//! runner forwards the connection to the collector, as a cluster Service would. Spans
//! of the operator (reconcile), the updaters (publish) and the scheduler (a scheduling
//! attempt with its phases, a bind) arrive; then every process is stopped with SIGTERM
//! and the metrics they flush on the way out arrive from all three. Twice: over
//! OTLP/gRPC (the default) and over OTLP/HTTP with protobuf bodies
//! (`spec.observability.otlpProtocol: http/protobuf`, the collector's HTTP receiver).
//! Also: the NetworkPolicies the operator renders for its operands, and its own from
//! config/network-policies, let them reach the endpoint's port.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use std::path::PathBuf;
use std::time::Duration;
use tas_api::tas::OtlpProtocol;
use tas_e2e::otelcol::{Collector, Received, ReceivedSpan};
use tas_e2e::stack::{self, Operands, apply_cr, start_nodes, wait_operands, wait_operator_pods};
use tas_nodesim::runner::{HostService, Signal};
use tas_testcluster::{ClusterOptions, TestCluster, unique_namespace, wait_for};

const NAMESPACE: &str = "tas-system";
const SCHEDULER: &str = "topology-aware-scheduler";
const TIMEOUT: Duration = Duration::from_secs(120);
/// The collector's name and ports as the object gives them (the port the operands'
/// NetworkPolicies, rendered by the operator, open).
const COLLECTOR_HOST: &str = "otel-collector.monitoring";
const OTLP_PORT: u16 = 4317;
const OTLP_HTTP_PORT: u16 = 4318;
const SERVICES: [&str; 3] = ["tas-operator", "tas-updater", "tas-scheduler"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `schedule` span of pod `name`, once there is one with `result`.
fn attempt<'a>(r: &'a Received, name: &str, result: &str) -> Option<&'a ReceivedSpan> {
    r.spans_of("tas-scheduler", "schedule").find(|s| {
        s.string("k8s.pod.name") == Some(name) && s.string("tas.scheduler.result") == Some(result)
    })
}

fn children<'a>(r: &'a Received, parent: &ReceivedSpan) -> Vec<&'a str> {
    r.spans
        .iter()
        .filter(|s| s.trace_id == parent.trace_id && s.parent_span_id == parent.span_id)
        .map(|s| s.name.as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_component_exports_spans_and_metrics_to_the_collector() {
    export_to_collector(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_component_exports_over_otlp_http() {
    export_to_collector(Some(OtlpProtocol::HttpProtobuf)).await;
}

/// The two stacks one after the other: each takes the machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The whole check with the object's `otlpProtocol` (gRPC when `None`).
async fn export_to_collector(protocol: Option<OtlpProtocol>) {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::start(ClusterOptions::full()).expect("control plane");
    let client = cluster.client().await.expect("client");
    let collector = Collector::start(Some(&cluster.watchdog_pids_file()))
        .await
        .expect("the collector (TAS_OTELCOL_BIN)");
    stack::install_default(&cluster).expect("installed from config/default");

    let scenario = stack::two_zone_nodes("otel")
        .expect("scenario")
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE);
    let work = tempfile::tempdir().expect("work dir");
    // The collector's receiver for the protocol, behind the port the object names.
    let (port, target) = match protocol {
        None | Some(OtlpProtocol::Grpc) => (OTLP_PORT, collector.address()),
        Some(OtlpProtocol::HttpProtobuf) => (OTLP_HTTP_PORT, collector.http_address()),
    };
    let service = HostService {
        name: COLLECTOR_HOST.to_owned(),
        port,
        target,
    };
    let (_sim, runner) = start_nodes(&cluster, &client, &scenario, work.path(), vec![service])
        .await
        .expect("simulated nodes and the pod runner");
    let pod_logs = runner.log_guard();
    let operators = wait_operator_pods(&client, &runner, NAMESPACE, TIMEOUT)
        .await
        .expect("the operator's pods run");

    let mut cr = stack::sample_cr().expect("sample CR");
    cr.spec.observability.otlp_endpoint = Some(format!("http://{COLLECTOR_HOST}:{port}"));
    cr.spec.observability.otlp_protocol = protocol;
    apply_cr(&client, &cr).await.expect("CR applied");
    let nodes = scenario.nodes().len();
    let Operands {
        updaters,
        schedulers,
    } = wait_operands(&client, &runner, NAMESPACE, nodes, TIMEOUT)
        .await
        .expect("an updater per node, Available with fresh NRTs, the scheduler running");
    // The operator rendered its operands' policies with the endpoint's port.
    // In the scheduler's namespace and the node agents' own.
    let rendered = Api::<NetworkPolicy>::all(client.clone())
        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=tas-operator"))
        .await
        .expect("NetworkPolicies listed");
    let mut seen = Vec::new();
    policies_allowing_otlp(rendered.items, port, &mut seen);
    seen.sort();
    assert_eq!(seen, ["tas-scheduler", "tas-updater"]);
    // One pod that fits a zone, one that fits a node's total but no zone.
    let ns = unique_namespace(&client, "otel").await.unwrap();
    stack::create_fits_and_no_zone(&client, &ns, SCHEDULER)
        .await
        .expect("pods created");

    let spans = wait_for(
        "spans of all three components at the collector",
        TIMEOUT,
        || async {
            let r = collector.received();
            let done = attempt(&r, "fits", "scheduled").is_some()
                && attempt(&r, "no-zone", "unschedulable").is_some()
                && r.spans_of("tas-scheduler", "bind").next().is_some()
                && r.spans_of("tas-updater", "publish").next().is_some()
                && r.spans_of("tas-operator", "reconcile").next().is_some();
            Ok::<_, std::convert::Infallible>(done.then_some(r))
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; received: {:?}; collector log:\n{}",
            collector.received().spans,
            collector.log()
        )
    });

    let scheduled = attempt(&spans, "fits", "scheduled").unwrap();
    let node = scheduled.string("k8s.node.name").expect("the chosen node");
    assert!(node.starts_with("otel"), "{scheduled:?}");
    assert_eq!(scheduled.string("k8s.namespace.name"), Some(ns.as_str()));
    let zones = scheduled
        .value("tas.numa.zones")
        .and_then(|v| v["arrayValue"]["values"].as_array())
        .expect("the zones");
    assert_eq!(zones.len(), 1, "one zone under single-numa-node: {zones:?}");
    let phases = children(&spans, scheduled);
    for phase in ["snapshot", "prefilter", "filter", "score", "bind"] {
        assert!(
            phases.contains(&phase),
            "{phase} under the attempt: {phases:?}"
        );
    }
    let bind = spans
        .spans_of("tas-scheduler", "bind")
        .find(|s| s.parent_span_id == scheduled.span_id)
        .expect("the bind of the attempt");
    assert_eq!(bind.string("k8s.node.name"), Some(node));
    assert_eq!(bind.string("tas.scheduler.result"), Some("bound"));
    // The scheduler's own record of the attempt (`kubectl tas decisions`, through the
    // service proxy) carries the span's trace id, to find the spans from it. Polled:
    // the Service may answer from a replica that does not lead.
    let pod = format!("{ns}/fits");
    let recorded = wait_for("the leader's record of the attempt", TIMEOUT, || async {
        let out = stack::kubectl_tas(&cluster, &["decisions", "--pod", &pod, "-o", "json"]).await?;
        let v: serde_json::Value =
            serde_json::from_str(&out).map_err(stack::StackError::ctx("kubectl tas decisions"))?;
        let bound = v["decisions"]
            .as_array()
            .and_then(|d| d.iter().find(|r| r["outcome"] == "bound"))
            .cloned();
        Ok::<_, stack::StackError>(bound)
    })
    .await
    .expect("the attempt in the scheduler's decisions");
    assert_eq!(
        recorded["traceId"].as_str(),
        Some(scheduled.trace_id.as_str()),
        "{recorded:#}"
    );
    assert_eq!(recorded["node"].as_str(), Some(node), "{recorded:#}");

    let unschedulable = attempt(&spans, "no-zone", "unschedulable").unwrap();
    let reason = unschedulable
        .string("tas.scheduler.unschedulable_reason")
        .unwrap_or_default();
    assert!(reason.contains("NUMA"), "{unschedulable:?}");
    assert!(
        children(&spans, unschedulable).contains(&"preempt"),
        "{unschedulable:?}"
    );

    let publish = spans
        .spans_of("tas-updater", "publish")
        .find(|s| s.string("result") == Some("applied"))
        .expect("a publish that wrote");
    assert!(publish.string("trigger").is_some(), "{publish:?}");
    assert!(publish.value("write_seconds").is_some(), "{publish:?}");
    assert!(
        children(&spans, publish).contains(&"apply"),
        "the write as a child span: {publish:?}"
    );

    // Metrics go out every minute and on shutdown: SIGTERM flushes them now.
    for (pods, _) in [
        (&operators, "tas-operator"),
        (&updaters, "tas-updater"),
        (&schedulers, "tas-scheduler"),
    ] {
        for p in pods {
            let name = p.metadata.name.clone().unwrap_or_default();
            let namespace = p.metadata.namespace.clone().unwrap_or_default();
            runner
                .signal(&namespace, &name, Signal::Terminate)
                .await
                .expect("SIGTERM sent");
        }
    }
    let wanted = [
        ("tas-operator", "tas_operator.reconciles"),
        ("tas-updater", "tas_updater.publishes"),
        ("tas-updater", "tas_updater.publish_duration"),
        ("tas-scheduler", "tas_scheduler.schedule_attempts"),
        ("tas-scheduler", "tas_scheduler.decision_duration"),
        ("tas-scheduler", "tas_scheduler.pod_scheduling_duration"),
    ];
    wait_for(
        "metrics of all three components at the collector",
        TIMEOUT,
        || async {
            let r = collector.received();
            Ok::<_, std::convert::Infallible>(
                wanted
                    .iter()
                    .all(|(service, metric)| r.has_metric(service, metric))
                    .then_some(()),
            )
        },
    )
    .await
    .unwrap_or_else(|e| {
        let r = collector.received();
        let got: Vec<_> = r.metrics.iter().map(|m| (&m.service, &m.name)).collect();
        panic!("{e}; received metrics: {got:?}")
    });
    let r = collector.received();
    for service in SERVICES {
        assert!(
            r.spans.iter().any(|s| s.service == service),
            "spans of {service}"
        );
        assert!(
            r.metrics.iter().any(|m| m.service == service),
            "metrics of {service}"
        );
    }
    drop(pod_logs);
    runner.shutdown().await;
    collector.stop().await;
}

/// The operator's NetworkPolicy of config/network-policies lets it reach the OTLP
/// ports, those the tests above export to (the operands' policies are the operator's
/// to render: checked live above).
#[test]
fn the_operators_network_policy_allows_the_otlp_port() {
    let text = std::fs::read_to_string(repo().join("config/network-policies/operator.yaml"))
        .expect("the policy file");
    let policies: Vec<NetworkPolicy> = serde_norway::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("a NetworkPolicy"))
        .collect();
    for port in [OTLP_PORT, OTLP_HTTP_PORT] {
        let mut seen = Vec::new();
        policies_allowing_otlp(policies.clone(), port, &mut seen);
        assert_eq!(seen, ["tas-operator"]);
    }
}

/// Checks every policy allows egress to TCP `port` anywhere; adds their names to
/// `seen`.
fn policies_allowing_otlp(policies: Vec<NetworkPolicy>, port: u16, seen: &mut Vec<String>) {
    for policy in policies {
        let name = policy.metadata.name.clone().unwrap_or_default();
        let spec = policy.spec.expect("spec");
        let allowed = spec.egress.iter().flatten().any(|rule| {
            rule.to.is_none()
                && rule.ports.iter().flatten().any(|p| {
                    p.protocol.as_deref() == Some("TCP")
                        && p.port
                            == Some(
                                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(
                                    i32::from(port),
                                ),
                            )
                })
        });
        assert!(allowed, "{name} allows egress to TCP {port}");
        seen.push(name);
    }
}
