//! The Helm chart `charts/tas/`: it is what `make chart` generates from the kustomize
//! tree now; `helm lint --strict` passes with the default values and with a file setting
//! every value; `values.schema.json` refuses bad values naming the field; `helm
//! template` with default values renders the objects `kubectl kustomize config/default`
//! renders (and with the monitoring switches on, those of `config/prometheus`), but for
//! the chart's labels and hook; in another namespace every object follows it; and on a
//! real control plane, in a namespace other than `tas-system`, `helm install` runs the
//! operator — its pods started as processes by the pod runner on simulated (kwok) nodes
//! — and the chart's TopologyAwareScheduling object to Available, `helm upgrade` applies
//! a changed CRD, and `helm uninstall` alone removes everything but the CRD
//! (`chart/lifecycle.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use tas_e2e::chart::{self, CHART_DIR, Inputs, documents};
use tas_e2e::real_node::helm;
use tas_testcluster::Tools;

const NAMESPACE: &str = "tas-system";
const RELEASE: &str = "tas";
const TAS_CRD: &str = "topologyawareschedulings.tas.dev";
const NRT_CRD: &str = "noderesourcetopologies.topology.node.k8s.io";
const TIMEOUT: Duration = Duration::from_secs(120);
/// Every monitoring switch of values.yaml on.
const MONITORING_ON: &str = "monitoring.serviceMonitors.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tools() -> Tools {
    Tools::locate().expect("the cluster tools (testcluster/tools/build.sh)")
}

fn kustomize(dir: &str) -> Vec<Value> {
    let yaml = chart::kustomize(&repo(), &tools().binary("kubectl"), dir).expect("kustomize");
    documents(&yaml).expect("kustomize renders YAML")
}

/// Objects by (kind, namespace, name).
fn by_identity(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(|o| {
            let key = format!(
                "{} {}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            );
            (key, o)
        })
        .collect()
}

/// The labels Helm's conventions add to every object (`tas.labels`).
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
];

/// A rendered object without what the chart adds to config/'s: Helm's labels and the
/// CRD's keep annotation; `None` for the chart's hook objects (the uninstall hook).
fn without_chart_additions(mut object: Value) -> Option<Value> {
    let metadata = object["metadata"].as_object_mut()?;
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        for label in HELM_LABELS {
            assert!(
                labels.remove(label).is_some(),
                "{} lacks the label {label}",
                object_name(&object)
            );
        }
    } else {
        panic!("{} has no labels", object_name(&object));
    }
    let metadata = object["metadata"].as_object_mut()?;
    if let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    {
        if annotations.contains_key("helm.sh/hook") {
            return None;
        }
        annotations.remove("helm.sh/resource-policy");
    }
    if metadata
        .get("annotations")
        .is_some_and(|a| a.is_null() || a.as_object().is_some_and(|m| m.is_empty()))
    {
        metadata.remove("annotations");
    }
    Some(object)
}

fn object_name(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Differences between two object sets, one line per object.
fn differences(want: &BTreeMap<String, Value>, got: &BTreeMap<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (key, object) in want {
        match got.get(key) {
            None => out.push(format!("missing: {key}")),
            Some(o) if o != object => out.push(format!(
                "differs: {key}\n  kustomize: {object}\n  helm:      {o}"
            )),
            Some(_) => {}
        }
    }
    out.extend(
        got.keys()
            .filter(|k| !want.contains_key(*k))
            .map(|k| format!("extra: {k}")),
    );
    out
}

#[test]
fn the_committed_chart_is_what_make_chart_generates() {
    let inputs = Inputs::render(
        &repo(),
        &tools().binary("kubectl"),
        env!("CARGO_PKG_VERSION"),
    )
    .expect("kustomizations render");
    let generated = chart::generate(&inputs).expect("chart generates");
    let committed = chart::read(&repo().join(CHART_DIR)).expect("chart readable");
    let stale: std::collections::BTreeSet<&String> = generated
        .keys()
        .chain(committed.keys())
        .filter(|k| generated.get(*k) != committed.get(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "{CHART_DIR} is not what the generator makes of config/ now; run `make chart`. Files: {stale:?}"
    );
}

/// A values file setting every value of values.yaml (`tests/chart/full-values.yaml`).
const FULL_VALUES: &str = "e2e/tests/chart/full-values.yaml";

#[test]
fn helm_lint_strict_passes_with_defaults_and_with_every_value_set() {
    let home = tempfile::tempdir().unwrap();
    let out = helm(home.path(), &["lint", "--strict", CHART_DIR]);
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let out = helm(
        home.path(),
        &["lint", "--strict", CHART_DIR, "--values", FULL_VALUES],
    );
    assert!(out.contains("0 chart(s) failed"), "{out}");
    eprintln!("helm lint --strict: defaults and {FULL_VALUES}: clean");
}

/// With default values the chart renders exactly config/default's objects, but the
/// Namespace (created and labelled by the user before `helm install`), Helm's labels,
/// the CRD's keep annotation and the uninstall hook; with the monitoring switches on,
/// also exactly config/prometheus's.
#[test]
fn helm_template_renders_what_kustomize_renders() {
    let home = tempfile::tempdir().unwrap();
    let template = |set: Option<&str>| {
        let mut args = vec!["template", RELEASE, CHART_DIR, "--namespace", NAMESPACE];
        if let Some(set) = set {
            args.extend(["--set", set]);
        }
        let objects = documents(&helm(home.path(), &args)).expect("helm renders YAML");
        by_identity(
            objects
                .into_iter()
                .filter_map(without_chart_additions)
                .collect(),
        )
    };
    let default = kustomize("config/default");
    let kustomize_count = default.len();
    let mut want = by_identity(default);
    let namespace = want
        .remove(&format!("Namespace /{NAMESPACE}"))
        .expect("config/default has the tas-system Namespace");
    let got = template(None);
    let diff = differences(&want, &got);
    assert!(
        diff.is_empty(),
        "helm template vs kustomize:\n{}",
        diff.join("\n")
    );
    eprintln!(
        "helm template (defaults): {} objects; kubectl kustomize config/default: {kustomize_count} ({} without the Namespace, labelled {})",
        got.len(),
        want.len(),
        namespace["metadata"]["labels"]
    );
    let count = |m: &BTreeMap<String, Value>| {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for o in m.values() {
            *kinds
                .entry(o["kind"].as_str().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
        kinds
    };
    eprintln!("  by kind: helm {:?}", count(&got));

    let monitoring = kustomize("config/prometheus");
    let monitoring_count = monitoring.len();
    want.extend(by_identity(monitoring));
    let got = template(Some(MONITORING_ON));
    let diff = differences(&want, &got);
    assert!(
        diff.is_empty(),
        "helm template (monitoring on) vs kustomize:\n{}",
        diff.join("\n")
    );
    eprintln!(
        "helm template (monitoring on): {} objects; kustomize config/default + config/prometheus: {} + {monitoring_count}",
        got.len(),
        kustomize_count
    );
}

/// `networkPolicies.enabled` switches the operator's NetworkPolicy and sets the chart
/// object's `spec.networkPolicy.enabled` (the operator renders the operands' policies),
/// unless the object's spec sets that itself.
#[test]
fn the_network_policies_switch_reaches_the_object() {
    let home = tempfile::tempdir().unwrap();
    let render = |set: &str| {
        let out = helm(
            home.path(),
            &[
                "template",
                RELEASE,
                CHART_DIR,
                "--namespace",
                NAMESPACE,
                "--set",
                set,
            ],
        );
        let objects = documents(&out).expect("helm renders YAML");
        let object = objects
            .iter()
            .find(|o| o["kind"] == "TopologyAwareScheduling")
            .expect("the chart's object")
            .clone();
        let policies: Vec<String> = objects
            .iter()
            .filter(|o| o["kind"] == "NetworkPolicy")
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        (object["spec"]["networkPolicy"]["enabled"].clone(), policies)
    };
    let create = "topologyAwareScheduling.create=true";
    assert_eq!(
        render(create),
        (Value::Bool(true), vec!["tas-operator".to_owned()])
    );
    assert_eq!(
        render(&format!("{create},networkPolicies.enabled=false")),
        (Value::Bool(false), vec![])
    );
    assert_eq!(
        render(&format!(
            "{create},topologyAwareScheduling.spec.networkPolicy.enabled=false"
        )),
        (Value::Bool(false), vec!["tas-operator".to_owned()]),
        "the object's own setting wins"
    );
}

/// What the installer allows the object to choose reaches the operator as the plain env
/// values config/manager sets (the admission policy reads them there): empty by default.
#[test]
fn the_allowed_images_and_toleration_keys_reach_the_operator() {
    let home = tempfile::tempdir().unwrap();
    let env = |sets: &[&str]| {
        let mut args = vec!["template", RELEASE, CHART_DIR, "--namespace", NAMESPACE];
        for set in sets {
            args.extend(["--set", set]);
        }
        let objects = documents(&helm(home.path(), &args)).expect("helm renders YAML");
        let operator = objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "tas-operator")
            .expect("the operator Deployment")
            .clone();
        let env = &operator["spec"]["template"]["spec"]["containers"][0]["env"];
        ["TAS_ALLOWED_IMAGES", "TAS_ALLOWED_TOLERATION_KEYS"].map(|name| {
            let e = env.as_array().unwrap().iter().find(|e| e["name"] == name);
            e.map(|e| e["value"].clone())
        })
    };
    assert_eq!(env(&[]), [Some(json!("")), Some(json!(""))]);
    assert_eq!(
        env(&[
            "operator.allowedImages={reg.example/a:1,reg.example/b:2}",
            "operator.allowedTolerationKeys={dedicated}",
        ]),
        [
            Some(json!("reg.example/a:1,reg.example/b:2")),
            Some(json!("dedicated"))
        ]
    );
}

#[path = "chart/values.rs"]
mod values;

#[path = "chart/lifecycle.rs"]
mod lifecycle;

/// The classic Prometheus text format of an OpenMetrics exposition, which is what
/// `promtool check metrics` parses: a counter family's HELP and TYPE name its samples'
/// `_total` name, and there is no `# EOF` line. Nothing else changes.
fn classic_text(openmetrics: &str) -> String {
    let counters: std::collections::BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::new();
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// `promtool check metrics` on one component's exposition text (OpenMetrics, as the
/// components serve it, given to promtool in the classic text format it reads).
fn promtool_check_metrics(what: &str, openmetrics: &str) {
    assert!(
        openmetrics.ends_with("# EOF\n"),
        "{what} serves OpenMetrics:\n{openmetrics}"
    );
    let text = classic_text(openmetrics);
    let promtool = tools().binary("promtool");
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (testcluster/tools/build.sh builds it)",
                promtool.display()
            )
        });
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics on {what}'s /metrics:\n{}{}\n--- the text:\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "promtool check metrics: {what}: {} series lines, clean",
        text.lines().filter(|l| !l.starts_with('#')).count()
    );
}

/// The user guide's compatibility table names the versions the tools script builds and
/// every test runs against (testcluster/tools/build.sh pins them).
#[test]
fn the_compatibility_table_names_the_tested_versions() {
    let script = std::fs::read_to_string(repo().join("testcluster/tools/build.sh")).unwrap();
    let guide = std::fs::read_to_string(repo().join("docs/user-guide.md")).unwrap();
    let pinned = |var: &str| {
        script
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{var}=")))
            .unwrap_or_else(|| panic!("build.sh pins {var}"))
            .to_owned()
    };
    let promtool = pinned("PROMTOOL_VERSION");
    let promtool = format!("promtool 3.{}", promtool.trim_start_matches("v0.3"));
    for version in [
        format!("**{}**", pinned("K8S_VERSION")),
        format!("| {} |", pinned("ETCD_VERSION")),
        format!("| {} |", pinned("KWOK_VERSION")),
        format!("**{}**", pinned("HELM_VERSION")),
        promtool,
    ] {
        assert!(
            guide.contains(&version),
            "docs/user-guide.md#compatibility does not name {version}"
        );
    }
}
