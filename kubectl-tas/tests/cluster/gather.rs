//! `kubectl tas gather` on a real API server with a running scheduler: the bundle holds
//! the stack object, its Events, the NRTs, the kubelet settings the agents published,
//! the scheduler's reservations and decisions and the operand namespace's objects;
//! a Secret's value (in the namespace, and copied into an env var, an annotation and a
//! ConfigMap) appears nowhere in it; what could not be read is in the manifest; and
//! `status` / `nodes` / `decisions --from-bundle` read it back (the scheduler's attempt
//! for the pod it just placed among the decisions).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use kube::Api;
use kube::api::PostParams;
use kubectl_tas::bundle::Bundle;
use kubectl_tas::gather::manifest::{MANIFEST, Manifest, Outcome};
use kubectl_tas::gather::redact::REDACTED;
use serde_json::{Value, json};

use crate::env::env;
use crate::stack_object::{STACK, fresh_stack};

fn yaml(bundle: &Bundle, path: &str) -> Value {
    bundle
        .yaml(path)
        .expect("valid YAML")
        .unwrap_or_else(|| panic!("{path} in the bundle: {:?}", bundle.files.keys()))
}

async fn create<K>(client: &kube::Client, ns: &str, object: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).expect("object");
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .expect("created")
}

/// A deployment like the operator renders, carrying `secret` where careless
/// configuration puts credentials.
fn deployment(secret: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "tas-scheduler",
            "labels": {"app.kubernetes.io/managed-by": "tas-operator", "tas.dev/stack": "default"},
            "annotations": {"example.com/api-token": secret}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "s"}},
            "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [{
                "name": "scheduler", "image": "scheduler",
                "args": [format!("--otlp-token={secret}"), "--v=2"],
                "env": [
                    {"name": "API_TOKEN", "value": secret},
                    {"name": "LOG_LEVEL", "value": "info"},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "tas-test", "key": "value"}}}
                ]}]}}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_writes_a_bundle_without_secrets_that_status_and_nodes_read_back() {
    let mut env = env("gather").await;
    let _stack = STACK.lock().await;
    let a = env.node(16).await;
    env.nrt(&a, &[(8, 6), (8, 6)]).await;
    env.start_scheduler();
    env.scheduler_service().await;
    let pod = env.pod(2, &env.scheduler).await;
    assert_eq!(env.wait_bound(&pod).await, a);

    fresh_stack(
        &env.client,
        json!({"namespace": env.ns}),
        json!({
            "observedGeneration": 1,
            "conditions": [{"type": "Degraded", "status": "True", "reason": "KubeletConfigUnreadable",
                "message": "gather test", "lastTransitionTime": "2026-01-02T03:04:05Z"}],
            "nodeGroups": [{"name": "g", "desiredNodes": 1, "readyNodes": 1, "nodesWithFreshNRT": 1,
                "kubeletConfigIssues": [{"node": a, "reason": "Unreadable", "path": "/var/lib/kubelet/config.yaml", "message": "gather test issue"}]}],
            "relatedObjects": [{"group": "apps", "kind": "Deployment", "namespace": env.ns, "name": "tas-scheduler"}]
        }),
    )
    .await;

    let secret = format!("s3cret-{}", env.ns);
    create::<Secret>(
        &env.client,
        &env.ns,
        json!({"metadata": {"name": "tas-test"}, "stringData": {"value": secret}}),
    )
    .await;
    create::<Deployment>(&env.client, &env.ns, deployment(&secret)).await;
    create::<ConfigMap>(
        &env.client,
        &env.ns,
        json!({"metadata": {"name": "tas-scheduler-config"}, "data": {"password": secret, "config.yaml": "schedulerName: x\n"}}),
    )
    .await;
    // Events about a cluster-scoped object live in `default`.
    create::<Event>(
        &env.client,
        "default",
        json!({"metadata": {"name": format!("{}-stack-event", env.ns)}, "reason": "GatherTestReason", "message": "about the stack",
            "type": "Normal", "source": {"component": "tas-operator"},
            "involvedObject": {"apiVersion": "tas.dev/v1alpha1", "kind": "TopologyAwareScheduling", "name": "default"}}),
    )
    .await;

    let dir = tempfile::tempdir().expect("a directory");
    let archive = dir.path().join("bundle.tar.gz");
    let archive_arg = archive.to_string_lossy().into_owned();
    let text = env.kubectl_tas(&["gather", "--dest", &archive_arg, "--log-bytes", "4096"]);
    eprintln!("kubectl tas gather:\n{text}");
    assert!(
        text.starts_with(&format!("wrote {archive_arg}: ")),
        "{text}"
    );

    let bundle = Bundle::read(&archive).expect("the archive reads back");
    // No Secret, and the Secret's value nowhere, whatever the file.
    for (path, content) in &bundle.files {
        assert!(!path.contains("secret"), "a file of Secrets: {path}");
        let text = String::from_utf8_lossy(content);
        assert!(
            !text.contains(&secret),
            "the Secret's value in {path}:\n{text}"
        );
    }
    let manifest: Manifest = bundle.yaml(MANIFEST).unwrap().expect("a manifest");
    assert_eq!(manifest.namespaces, [env.ns.clone()]);
    let collected = |path: &str| {
        let e = manifest
            .entry(path)
            .unwrap_or_else(|| panic!("{path} in {manifest:#?}"));
        assert_eq!(e.outcome, Outcome::Collected, "{e:?}");
        e.items.unwrap_or_default()
    };
    for path in [
        "topologyawarescheduling.yaml",
        "events/topologyawarescheduling.yaml",
        "cluster/nodes.yaml",
        "cluster/noderesourcetopologies.yaml",
        "cluster/kubelet-configs.yaml",
        "scheduler/reservations.json",
        "scheduler/events.yaml",
    ] {
        assert!(collected(path) >= 1, "{path} has items: {manifest:#?}");
    }
    let ns_file = |f: &str| format!("namespaces/{}/{f}", env.ns);
    assert_eq!(collected(&ns_file("deployments.yaml")), 1);
    assert!(collected(&ns_file("pods.yaml")) >= 2);
    // Every pod's log is either in the bundle or recorded with why not (the simulated
    // nodes serve no logs).
    let logs: Vec<_> = manifest
        .entries
        .iter()
        .filter(|e| e.path.as_deref().is_some_and(|p| p.contains("/logs/")))
        .collect();
    assert!(
        logs.iter().any(|e| e
            .path
            .as_deref()
            .is_some_and(|p| p.contains(&format!("/logs/{pod}/app")))),
        "{logs:#?}"
    );
    for e in &logs {
        match e.outcome {
            Outcome::Collected => assert!(bundle.files.contains_key(e.path.as_deref().unwrap())),
            _ => assert!(e.reason.as_deref().is_some_and(|r| !r.is_empty()), "{e:?}"),
        }
    }
    assert!(
        collected("scheduler/decisions.json") >= 1,
        "the scheduler's attempts: {manifest:#?}"
    );
    assert!(
        manifest
            .entries
            .iter()
            .all(|e| e.outcome != Outcome::Skipped),
        "nothing skipped: {manifest:#?}"
    );

    // The contents.
    let stack = yaml(&bundle, "topologyawarescheduling.yaml");
    assert_eq!(
        stack["status"]["conditions"][0]["reason"],
        "KubeletConfigUnreadable"
    );
    let cr_events = yaml(&bundle, "events/topologyawarescheduling.yaml");
    assert!(
        cr_events.to_string().contains("GatherTestReason"),
        "{cr_events}"
    );
    let decisions = yaml(&bundle, "scheduler/events.yaml").to_string();
    assert!(
        decisions.contains(&pod) && decisions.contains("Scheduled"),
        "{decisions}"
    );
    let kubelet: Vec<Value> = bundle
        .yaml("cluster/kubelet-configs.yaml")
        .unwrap()
        .unwrap();
    let on_a = kubelet
        .iter()
        .find(|k| k["node"] == a.as_str())
        .expect("node a");
    assert_eq!(
        on_a["attributes"]["topologyManagerPolicy"], "single-numa-node",
        "{on_a}"
    );
    assert_eq!(
        on_a["operatorIssues"][0]["message"], "gather test issue",
        "{on_a}"
    );
    let nodes = yaml(&bundle, "cluster/nodes.yaml");
    let node_a = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["metadata"]["name"] == a.as_str())
        .unwrap();
    assert_eq!(node_a["status"]["allocatable"]["cpu"], "16", "{node_a}");
    assert!(
        node_a["spec"].is_null() && node_a["status"].get("addresses").is_none(),
        "labels and capacity only: {node_a}"
    );
    let deployments = yaml(&bundle, &ns_file("deployments.yaml"));
    let d = &deployments["items"][0];
    assert_eq!(
        d["metadata"]["annotations"]["example.com/api-token"],
        REDACTED
    );
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    let env_values: BTreeMap<&str, &Value> = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), &e["value"]))
        .collect();
    assert_eq!(env_values["API_TOKEN"], REDACTED);
    assert_eq!(env_values["LOG_LEVEL"], "info");
    assert_eq!(container["args"], json!(["--otlp-token=REDACTED", "--v=2"]));
    let configmaps = yaml(&bundle, &ns_file("configmaps.yaml")).to_string();
    assert!(configmaps.contains("schedulerName: x"), "{configmaps}");

    // Read back: status and nodes from the archive, as from the cluster.
    let status = env.kubectl_tas(&["status", "--from-bundle", &archive_arg]);
    assert!(
        status.contains("KubeletConfigUnreadable") && status.contains("gather test"),
        "{status}"
    );
    let nodes: Value = serde_json::from_str(&env.kubectl_tas(&[
        "nodes",
        "-o",
        "json",
        "--from-bundle",
        &archive_arg,
    ]))
    .unwrap();
    let on_a = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == a.as_str())
        .expect("a in nodes");
    assert_eq!(
        on_a["reservations"], 1,
        "the scheduler's reservation, from the bundle: {nodes:#}"
    );
    assert!(nodes.get("schedulerError").is_none(), "{nodes:#}");
    let text = env.kubectl_tas(&["nodes", "--from-bundle", &archive_arg]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&a) && l.contains("1 reserved")),
        "{text}"
    );

    // The scheduler's attempt for the pod, from the bundle: bound to a, on one of its
    // zones (2 CPUs fit either), every node evaluated.
    let from_bundle: Value = serde_json::from_str(&env.kubectl_tas(&[
        "decisions",
        "--pod",
        &format!("{}/{pod}", env.ns),
        "-o",
        "json",
        "--from-bundle",
        &archive_arg,
    ]))
    .unwrap();
    assert_eq!(from_bundle["schedulerName"], env.scheduler.as_str());
    assert_eq!(from_bundle["leader"], true, "{from_bundle:#}");
    let attempts = from_bundle["decisions"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "one attempt of {pod}: {from_bundle:#}");
    let attempt = &attempts[0];
    assert_eq!(attempt["pod"], pod.as_str());
    assert_eq!(attempt["namespace"], env.ns.as_str());
    assert_eq!(attempt["outcome"], "bound", "{attempt:#}");
    assert_eq!(attempt["node"], a.as_str());
    assert_eq!(
        attempt["zones"].as_array().map(Vec::len),
        Some(1),
        "{attempt:#}"
    );
    assert!(attempt["nodesEvaluated"].as_u64() >= Some(1), "{attempt:#}");
    assert_eq!(attempt["feasibleNodes"], 1, "{attempt:#}");
    let phases: Vec<&str> = attempt["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(
        phases,
        ["snapshot", "prefilter", "filter", "score", "bind"],
        "{attempt:#}"
    );
    let text = env.kubectl_tas(&["decisions", "--pod", &pod, "--from-bundle", &archive_arg]);
    let row = text
        .lines()
        .find(|l| l.contains(&format!("{}/{pod}", env.ns)))
        .unwrap_or_else(|| panic!("a row for {pod}:\n{text}"));
    assert!(row.contains("bound") && row.contains(&a), "{row}\n{text}");
    // Another pod's name selects nothing.
    let none: Value = serde_json::from_str(&env.kubectl_tas(&[
        "decisions",
        "--pod",
        "no-such-pod",
        "-o",
        "json",
        "--from-bundle",
        &archive_arg,
    ]))
    .unwrap();
    assert_eq!(none["decisions"], json!([]), "{none:#}");

    // A directory works the same; a user who may read nothing still gets a bundle
    // whose manifest says, per item, that the API server refused.
    let plain = dir.path().join("as-nobody");
    let plain_arg = plain.to_string_lossy().into_owned();
    env.kubectl_tas(&["gather", "--dest", &plain_arg, "--as", "gather-nobody"]);
    let bundle = Bundle::read(&plain).expect("a directory bundle");
    let manifest: Manifest = bundle.yaml(MANIFEST).unwrap().unwrap();
    let nrt = manifest
        .entry("cluster/noderesourcetopologies.yaml")
        .unwrap();
    assert_eq!(nrt.outcome, Outcome::Failed);
    assert!(
        nrt.reason
            .as_deref()
            .unwrap_or_default()
            .contains("gather-nobody"),
        "{nrt:?}"
    );
    assert!(
        !bundle
            .files
            .contains_key("cluster/noderesourcetopologies.yaml")
    );
    let decisions = manifest.entry("scheduler/decisions.json").unwrap();
    assert_eq!(decisions.outcome, Outcome::Failed, "{decisions:?}");
    let refused = env.kubectl_tas_fails(&["decisions", "--from-bundle", &plain_arg]);
    assert!(
        refused.contains("the scheduler's decisions were not gathered"),
        "{refused}"
    );
    let refused = env.kubectl_tas_fails(&["status", "--from-bundle", &plain_arg]);
    assert!(
        refused.contains("the stack object was not gathered") && refused.contains("gather-nobody"),
        "{refused}"
    );
}
