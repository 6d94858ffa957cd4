//! What the values do, checked on `helm template`'s output: the schema refuses bad
//! values naming the field; values.yaml, the schema and the full values file name the
//! same keys; another release namespace moves every object; the operator pod's settings
//! and the monitoring labels reach the objects.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};
use tas_e2e::chart::{CHART_DIR, documents};
use tas_e2e::real_node::{helm, helm_output};

use super::{FULL_VALUES, MONITORING_ON, RELEASE, repo};

/// `helm <args>` in the repository; (success, stdout, stderr).
fn helm_result(home: &Path, args: &[&str]) -> (bool, String, String) {
    let output = helm_output(home, args);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `helm template` in `namespace` with `more` arguments, as objects.
fn template(home: &Path, namespace: &str, more: &[&str]) -> Vec<Value> {
    let mut args = vec!["template", RELEASE, CHART_DIR, "--namespace", namespace];
    args.extend(more);
    documents(&helm(home, &args)).expect("helm renders YAML")
}

/// The value of env var `name` of `container`.
fn env_value(container: &Value, name: &str) -> Option<Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| e["value"].clone())
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// Each bad value is refused by `helm template` (the schema, as at install), with a
/// message naming the field.
#[test]
fn the_schema_refuses_bad_values_naming_the_field() {
    let home = tempfile::tempdir().unwrap();
    let cases = [
        ("operator.replicas=two", "/operator/replicas"),
        ("operator.replicas=0", "/operator/replicas"),
        ("image.digest=latest", "/image/digest"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("image.registry=registry.example/", "/image/registry"),
        ("operator.replicaCount=2", "/operator"),
        ("operandNamespace=Not_A_Namespace", "/operandNamespace"),
        ("updaterNamespace=-node", "/updaterNamespace"),
        ("crds.keep=sometimes", "/crds/keep"),
        (
            "monitoring.labels.app\\.kubernetes\\.io/name=x",
            "/monitoring/labels/app.kubernetes.io~1name",
        ),
        (
            "operator.podLabels.helm\\.sh/chart=x",
            "/operator/podLabels/helm.sh~1chart",
        ),
        (
            "operator.extraEnv[0].name=TAS_UPDATER_IMAGE",
            "/operator/extraEnv/0/name",
        ),
        (
            "operator.imagePullSecrets[0].secret=x",
            "/operator/imagePullSecrets/0",
        ),
        (
            "uninstallHook.timeoutSeconds=1",
            "/uninstallHook/timeoutSeconds",
        ),
        (
            "topologyAwareScheduling.create=yes",
            "/topologyAwareScheduling/create",
        ),
    ];
    let mut wrong = Vec::new();
    for (set, field) in cases {
        let (ok, _, stderr) =
            helm_result(home.path(), &["template", RELEASE, CHART_DIR, "--set", set]);
        if ok || !stderr.contains(field) {
            wrong.push(format!(
                "--set {set}: want refused naming {field}; {}",
                if ok { "accepted".to_owned() } else { stderr }
            ));
        } else {
            let line = stderr
                .lines()
                .find(|l| l.contains(field))
                .unwrap_or_default();
            eprintln!("--set {set}: {}", line.trim());
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Values holding Kubernetes types or free-form maps: a path ends there.
const FREE: [&str; 9] = [
    "resources",
    "nodeSelector",
    "affinity",
    "podLabels",
    "podAnnotations",
    "labels",
    "spec",
    "tolerations",
    "extraEnv",
];

fn is_free(path: &str) -> bool {
    FREE.iter().any(|f| path.ends_with(&format!(".{f}")))
}

/// Leaf keys of a values tree.
fn keys(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value.as_object() {
        Some(map) if !is_free(path) => {
            for (k, v) in map {
                keys(v, &format!("{path}.{k}"), out);
            }
        }
        _ => {
            out.insert(path.to_owned());
        }
    }
}

/// Leaf keys of a JSON schema's properties.
fn schema_keys(schema: &Value, path: &str, out: &mut BTreeSet<String>) {
    match schema["properties"].as_object() {
        Some(properties) if schema["additionalProperties"] == json!(false) && !is_free(path) => {
            for (k, v) in properties {
                schema_keys(v, &format!("{path}.{k}"), out);
            }
        }
        _ => {
            out.insert(path.to_owned());
        }
    }
}

#[test]
fn values_the_schema_and_the_full_values_file_name_the_same_keys() {
    let read = |path: &str| -> Value {
        let text = std::fs::read_to_string(repo().join(path)).expect(path);
        serde_norway::from_str(&text).expect(path)
    };
    let (mut defaults, mut full, mut schema) = Default::default();
    keys(
        &read(&format!("{CHART_DIR}/values.yaml")),
        "",
        &mut defaults,
    );
    keys(&read(FULL_VALUES), "", &mut full);
    let schema_text =
        std::fs::read_to_string(repo().join(CHART_DIR).join("values.schema.json")).unwrap();
    let schema_value: Value = serde_json::from_str(&schema_text).expect("JSON");
    assert_eq!(
        schema_value["$schema"],
        "http://json-schema.org/draft-07/schema#"
    );
    schema_keys(&schema_value, "", &mut schema);
    assert_eq!(defaults, schema, "values.yaml vs values.schema.json");
    assert_eq!(defaults, full, "values.yaml vs {FULL_VALUES}");
    eprintln!(
        "{} value keys, in values.yaml, the schema and {FULL_VALUES}",
        defaults.len()
    );
}

/// Every string of `value` that names `tas-system` or `tas-node` as a whole, or as a
/// CEL literal; the paths where it does.
fn fixed_namespaces(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            let fixed = ["tas-system", "tas-node"]
                .iter()
                .any(|ns| s == ns || s.contains(&format!("'{ns}'")));
            if fixed {
                out.push(format!("{path}: {s}"));
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                fixed_namespaces(v, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                fixed_namespaces(v, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// `helm template -n other` with every switch on: no object names `tas-system` or
/// `tas-node`; the namespaced ones are in `other`, the node agents' in `other-node`,
/// the scheduler's ServiceMonitor and the object's spec.namespace `other`.
#[test]
fn every_object_follows_the_release_namespace() {
    let home = tempfile::tempdir().unwrap();
    let objects = template(
        home.path(),
        "other",
        &[
            "--set",
            MONITORING_ON,
            "--set",
            "topologyAwareScheduling.create=true",
            "--set",
            "monitoring.prometheusServiceAccount.name=prometheus",
        ],
    );
    let mut fixed = Vec::new();
    for object in &objects {
        fixed_namespaces(object, &super::object_name(object), &mut fixed);
    }
    assert!(fixed.is_empty(), "fixed namespaces:\n{}", fixed.join("\n"));
    let mut namespaces = BTreeSet::new();
    for object in &objects {
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            namespaces.insert(ns.to_owned());
        }
    }
    assert_eq!(
        namespaces,
        BTreeSet::from(["other".to_owned(), "other-node".to_owned()])
    );
    assert_eq!(
        find(&objects, "Namespace", "other-node")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
    let monitor = find(&objects, "ServiceMonitor", "tas-scheduler");
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!(["other"])
    );
    let monitor = find(&objects, "ServiceMonitor", "tas-updater");
    assert_eq!(monitor["metadata"]["namespace"], "other-node");
    let object = find(&objects, "TopologyAwareScheduling", "default");
    assert_eq!(object["spec"]["namespace"], "other");
    let binding = find(&objects, "ClusterRoleBinding", "tas-metrics-reader");
    assert_eq!(binding["subjects"][0]["namespace"], "other");
    let operator = find(&objects, "Deployment", "tas-operator");
    assert_eq!(
        env_value(
            &operator["spec"]["template"]["spec"]["containers"][0],
            "TAS_UPDATER_NAMESPACE"
        ),
        Some(json!("other-node"))
    );
    // Every object carries the standard labels.
    for object in &objects {
        let labels = &object["metadata"]["labels"];
        for label in super::HELM_LABELS
            .iter()
            .chain(&["app.kubernetes.io/name", "app.kubernetes.io/part-of"])
        {
            assert!(
                labels.get(*label).is_some(),
                "{} lacks {label}",
                super::object_name(object)
            );
        }
        assert_eq!(labels["app.kubernetes.io/instance"], RELEASE);
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
    }
    eprintln!(
        "helm template -n other: {} objects, namespaces {namespaces:?}, every one labelled",
        objects.len()
    );
}

/// The full values file's operator pod settings, image digests and monitoring labels
/// reach the objects.
#[test]
fn the_operator_pod_settings_and_monitoring_labels_reach_the_objects() {
    let home = tempfile::tempdir().unwrap();
    let objects = template(home.path(), "other", &["--values", FULL_VALUES]);
    let operator = find(&objects, "Deployment", "tas-operator");
    assert_eq!(operator["spec"]["replicas"], 3);
    let template = &operator["spec"]["template"];
    assert_eq!(template["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        template["metadata"]["labels"]["app.kubernetes.io/name"],
        "tas-operator"
    );
    assert_eq!(
        template["metadata"]["annotations"]["example.com/owner"],
        "platform"
    );
    let pod = &template["spec"];
    assert_eq!(
        pod["imagePullSecrets"],
        json!([{"name": "registry-credentials"}])
    );
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        pod["nodeSelector"]["node-role.kubernetes.io/control-plane"],
        ""
    );
    assert_eq!(
        pod["tolerations"][0]["key"],
        "node-role.kubernetes.io/control-plane"
    );
    assert!(pod["affinity"]["nodeAffinity"].is_object());
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "registry.example/tas/tas-operator@sha256:0000000000000000000000000000000000000000000000000000000000000001"
    );
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["resources"]["limits"]["memory"], "512Mi");
    let env = |name: &str| env_value(container, name);
    assert_eq!(
        env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        Some(json!("http://otel-collector.monitoring:4317"))
    );
    assert_eq!(
        env("TAS_UPDATER_IMAGE"),
        Some(json!(
            "registry.example/tas/tas-updater@sha256:0000000000000000000000000000000000000000000000000000000000000002"
        ))
    );
    assert_eq!(env("TAS_UPDATER_NAMESPACE"), Some(json!("numa-agents")));
    // The uninstall hook runs the operator's image where the operator may run.
    let job = find(&objects, "Job", "tas-uninstall");
    let job_pod = &job["spec"]["template"]["spec"];
    assert_eq!(job_pod["containers"][0]["image"], container["image"]);
    assert_eq!(job_pod["imagePullSecrets"], pod["imagePullSecrets"]);
    assert_eq!(job_pod["tolerations"], pod["tolerations"]);
    assert_eq!(job["metadata"]["annotations"]["helm.sh/hook"], "pre-delete");
    let leases = find(&objects, "Job", "tas-uninstall-leases");
    assert_eq!(
        leases["metadata"]["annotations"]["helm.sh/hook"],
        "post-delete"
    );
    assert_eq!(
        leases["spec"]["template"]["spec"]["containers"][0]["args"],
        json!(["uninstall", "--timeout-seconds=600", "--leases-in=other"])
    );
    // Monitoring objects carry the extra label; the scraper is bound the reader role.
    let monitoring: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            ["ServiceMonitor", "PrometheusRule"].contains(&o["kind"].as_str().unwrap_or_default())
                || o["metadata"]["name"] == "tas-grafana-dashboard"
        })
        .collect();
    assert_eq!(
        monitoring.len(),
        5,
        "3 ServiceMonitors, the rules, the dashboard"
    );
    for object in monitoring {
        assert_eq!(
            object["metadata"]["labels"]["release"],
            "kube-prometheus-stack",
            "{}",
            super::object_name(object)
        );
    }
    let binding = find(&objects, "ClusterRoleBinding", "tas-metrics-reader");
    assert_eq!(binding["roleRef"]["name"], "tas-metrics-reader");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}])
    );
    // crds.keep: false leaves the CRD to Helm's uninstall.
    let crd = find(
        &objects,
        "CustomResourceDefinition",
        "topologyawareschedulings.tas.dev",
    );
    assert!(crd["metadata"]["annotations"]["helm.sh/resource-policy"].is_null());
    // The object: its spec from values, in operandNamespace.
    let object = find(&objects, "TopologyAwareScheduling", "default");
    assert_eq!(object["spec"]["namespace"], "numa-stack");
    assert_eq!(object["spec"]["observability"]["logLevel"], "debug");
}

/// By default: the CRD is kept on uninstall, no object is created, no binding.
#[test]
fn the_defaults_keep_the_crd_and_create_no_object() {
    let home = tempfile::tempdir().unwrap();
    let objects = template(home.path(), "other", &[]);
    let crd = find(
        &objects,
        "CustomResourceDefinition",
        "topologyawareschedulings.tas.dev",
    );
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    assert!(
        !objects
            .iter()
            .any(|o| o["kind"] == "TopologyAwareScheduling"
                || o["metadata"]["name"] == "tas-metrics-reader"
                    && o["kind"] == "ClusterRoleBinding")
    );
    let objects = template(home.path(), "other", &["--set", "crds.install=false"]);
    assert!(
        !objects
            .iter()
            .any(|o| o["kind"] == "CustomResourceDefinition")
    );
}
