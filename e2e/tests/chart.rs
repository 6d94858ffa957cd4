//! The Helm chart `charts/tas/`: it is what `make chart` generates from the kustomize
//! tree now; `helm lint` passes; `helm template` with default values renders the objects
//! `kubectl kustomize config/default` renders (and with the monitoring switches on,
//! those of `config/prometheus`); and `helm install` on a real control plane runs the
//! operator — its pods started as processes by the pod runner on simulated (kwok)
//! nodes — to an Available Deployment and, with the chart's TopologyAwareScheduling
//! object, an Available stack, whose three components' `/metrics` pass `promtool check
//! metrics`; after the object is deleted, `helm uninstall` removes everything the
//! chart installed but the CRD (docs/user-guide.md#uninstall).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use tas_e2e::chart::{self, CHART_DIR, Inputs, documents};
use tas_e2e::real_node::helm;
use tas_e2e::stack::{self, start_nodes, wait_available, wait_ready_pods};
use tas_nodesim::Scenario;
use tas_testcluster::{ClusterOptions, TestCluster, Tools, wait_for, wait_no_pods};

const NAMESPACE: &str = "tas-system";
/// The node agents' namespace (`updaterNamespace`, created by the chart).
const AGENTS_NAMESPACE: &str = "tas-node";
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

#[test]
fn helm_lint_passes_with_defaults_and_every_switch_on() {
    let home = tempfile::tempdir().unwrap();
    for set in [
        "networkPolicies.enabled=true",
        &format!(
            "{MONITORING_ON},topologyAwareScheduling.create=true,networkPolicies.enabled=false,operator.tolerations[0].operator=Exists"
        ),
    ] {
        let out = helm(home.path(), &["lint", "--strict", CHART_DIR, "--set", set]);
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
}

/// With default values the chart renders exactly config/default's objects, but the
/// Namespace (created and labelled by the user before `helm install`); with the monitoring switches on, also
/// exactly config/prometheus's.
#[test]
fn helm_template_renders_what_kustomize_renders() {
    let home = tempfile::tempdir().unwrap();
    let template = |set: Option<&str>| {
        let mut args = vec![
            "template",
            RELEASE,
            CHART_DIR,
            "--namespace",
            NAMESPACE,
            "--include-crds",
        ];
        if let Some(set) = set {
            args.extend(["--set", set]);
        }
        by_identity(documents(&helm(home.path(), &args)).expect("helm renders YAML"))
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

/// A small cluster of simulated NUMA nodes, labelled as the sample object selects.
const SCENARIO: &str = "
nodes:
- name: chart-numa
  count: 2
  topologyManagerPolicy: single-numa-node
  topologyManagerScope: container
  zones:
  - { count: 2, cpus: 4, memory: 8Gi }
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_install_runs_the_operator_and_uninstall_keeps_the_crd() {
    let cluster = TestCluster::start(ClusterOptions::full()).expect("control plane");
    let client = cluster.client().await.expect("client");
    let scenario = Scenario::from_yaml(SCENARIO)
        .expect("scenario")
        .with_node_label(stack::SAMPLE_NODE_LABEL, stack::SAMPLE_NODE_LABEL_VALUE);
    let work = tempfile::tempdir().expect("work dir");
    let (_sim, runner) = start_nodes(&cluster, &client, &scenario, work.path(), Vec::new())
        .await
        .expect("simulated nodes and the pod runner");
    let _pod_logs = runner.log_guard();
    let home = tempfile::tempdir().unwrap();
    let kubeconfig = cluster.kubeconfig_path();
    let kubeconfig = kubeconfig.to_str().unwrap();

    // As the user guide says: the release namespace created and labelled `restricted`
    // first (the operator and the scheduler need no more; the chart creates the node
    // agents' own `privileged` namespace), then the chart with its own
    // TopologyAwareScheduling object switched on.
    let labelled = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(NAMESPACE.to_owned()),
            labels: Some(
                [(
                    "pod-security.kubernetes.io/enforce".to_owned(),
                    "restricted".to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&kube::api::PostParams::default(), &labelled)
        .await
        .expect("create the release namespace");
    helm(
        home.path(),
        &[
            "install",
            RELEASE,
            CHART_DIR,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--set",
            "topologyAwareScheduling.create=true",
        ],
    );
    let operators = wait_ready_pods(&client, &runner, NAMESPACE, "tas-operator", 2, TIMEOUT)
        .await
        .expect("the chart's operator pods run");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(
        "the operator Deployment to be Available",
        TIMEOUT,
        || async {
            let d = deployments.get("tas-operator").await?;
            let available = d
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True");
            Ok::<_, kube::Error>(available.then_some(()))
        },
    )
    .await
    .expect("operator Deployment Available");
    let took = wait_available(&client, scenario.nodes().len(), TIMEOUT)
        .await
        .expect("the chart's TopologyAwareScheduling object becomes Available");
    eprintln!("stack Available {took:?} after the operator ran");
    // The namespace keeps exactly the labels the user gave it.
    let ns = Api::<Namespace>::all(client.clone())
        .get(NAMESPACE)
        .await
        .unwrap();
    assert_eq!(
        ns.metadata.labels.unwrap_or_default()["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    let agents_ns = Api::<Namespace>::all(client.clone())
        .get(AGENTS_NAMESPACE)
        .await
        .expect("the chart creates the node agents' namespace");
    assert_eq!(
        agents_ns.metadata.labels.unwrap_or_default()["pod-security.kubernetes.io/enforce"],
        "privileged"
    );

    // Every component's real /metrics (HTTPS, an authorised token) passes promtool's lint.
    let token = cluster.admin_token().expect("admin token");
    let scheduler = wait_ready_pods(&client, &runner, NAMESPACE, "tas-scheduler", 1, TIMEOUT)
        .await
        .expect("scheduler runs");
    let updaters = wait_ready_pods(
        &client,
        &runner,
        AGENTS_NAMESPACE,
        "tas-updater",
        2,
        TIMEOUT,
    )
    .await
    .expect("node agents run");
    for pod in [&operators[0], &scheduler[0], &updaters[0]] {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let text = runner
            .metrics(&namespace, &name, &token)
            .await
            .expect("/metrics");
        promtool_check_metrics(&name, &text);
    }

    // Uninstall as documented: the object first (the operator removes the operands and
    // its finalizer), then the release.
    Command::new(tools().binary("kubectl"))
        .args([
            "--kubeconfig",
            kubeconfig,
            "delete",
            "tas",
            "default",
            "--timeout=120s",
        ])
        .status()
        .expect("kubectl delete")
        .success()
        .then_some(())
        .expect("the object is deleted");
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), AGENTS_NAMESPACE);
    assert!(
        daemonsets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    helm(
        home.path(),
        &[
            "uninstall",
            RELEASE,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--wait",
        ],
    );

    wait_no_pods(&client, NAMESPACE, TIMEOUT)
        .await
        .expect("no pods left");
    // The agents' namespace was the release's: Helm deletes it (nothing else lived there).
    wait_for("the agents' namespace to be deleted", TIMEOUT, || async {
        let ns = Api::<Namespace>::all(client.clone())
            .get_opt(AGENTS_NAMESPACE)
            .await?;
        Ok::<_, kube::Error>(ns.is_none().then_some(()))
    })
    .await
    .expect("the chart's agents namespace goes with the release");
    let gone = [
        deployments.get_opt("tas-operator").await.unwrap().is_some(),
        Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
            .get_opt("tas-operator")
            .await
            .unwrap()
            .is_some(),
        Api::<Service>::namespaced(client.clone(), NAMESPACE)
            .get_opt("tas-operator-metrics")
            .await
            .unwrap()
            .is_some(),
        Api::<ClusterRole>::all(client.clone())
            .get_opt("tas-operator")
            .await
            .unwrap()
            .is_some(),
        Api::<ClusterRoleBinding>::all(client.clone())
            .get_opt("tas-operator")
            .await
            .unwrap()
            .is_some(),
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .get_opt("tas-updater-own-node")
            .await
            .unwrap()
            .is_some(),
        !Api::<NetworkPolicy>::namespaced(client.clone(), NAMESPACE)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
    ];
    assert_eq!(gone, [false; 7], "objects the release installed are left");
    // Kept: the CRDs (Helm never deletes crds/; the operator keeps the NRT CRD without
    // deleteOnUninstall) and the namespace Helm created.
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(
        crds.get_opt(TAS_CRD).await.unwrap().is_some(),
        "the TAS CRD stays"
    );
    assert!(
        crds.get_opt(NRT_CRD).await.unwrap().is_some(),
        "the NRT CRD stays"
    );
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt(NAMESPACE)
            .await
            .unwrap()
            .is_some()
    );
    let releases = helm(
        home.path(),
        &[
            "list",
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--short",
        ],
    );
    assert!(releases.trim().is_empty(), "release left: {releases}");
}

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
