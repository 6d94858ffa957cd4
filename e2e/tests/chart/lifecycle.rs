//! The chart's life on a real control plane, in a namespace other than `tas-system`:
//! one command each to install (the chart's TopologyAwareScheduling object included),
//! upgrade (to a chart whose CRD has a field the installed one lacks) and uninstall
//! (the pre-delete hook deletes the object and waits for the operator's cleanup), and
//! nothing of TAS left afterwards but the CRDs.

use std::path::Path;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tas_api::tas::TopologyAwareScheduling;
use tas_e2e::chart::CHART_DIR;
use tas_e2e::real_node::helm;
use tas_e2e::stack::{self, start_nodes, wait_available, wait_operator_pods, wait_ready_pods};
use tas_nodesim::Scenario;
use tas_testcluster::{ClusterOptions, TestCluster, wait_for, wait_no_pods};

use super::{NRT_CRD, RELEASE, TAS_CRD, TIMEOUT, promtool_check_metrics, repo};

/// The release namespace: not `tas-system`.
const NAMESPACE: &str = "tas-chart";
/// The node agents' namespace the chart derives from it.
const AGENTS_NAMESPACE: &str = "tas-chart-node";
/// The CRD field the older chart's CRD lacks.
const NEW_FIELD: &str = "paused";

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

/// A copy of the chart at `dir` whose CRD template lacks `spec.<field>`: the chart of
/// an "earlier release".
fn chart_without_field(dir: &Path, field: &str) {
    let source = repo().join(CHART_DIR);
    for file in tas_e2e::chart::read(&source)
        .expect("chart readable")
        .keys()
    {
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(source.join(file), &to).unwrap();
    }
    let crd = dir.join(format!("templates/customresourcedefinition-{TAS_CRD}.yaml"));
    let text = std::fs::read_to_string(&crd).expect("the CRD template");
    let mut out = String::new();
    let mut skipping: Option<usize> = None;
    let mut removed = false;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = skipping {
            if indent > at {
                continue;
            }
            skipping = None;
        }
        if line.trim() == format!("{field}:") && !removed {
            skipping = Some(indent);
            removed = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    assert!(removed, "the CRD template has a {field} property");
    std::fs::write(&crd, out).unwrap();
}

/// Whether the served TopologyAwareScheduling CRD's spec has `field`.
async fn served_crd_has(client: &Client, field: &str) -> bool {
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(TAS_CRD)
        .await
        .expect("the TAS CRD");
    crd.spec.versions.iter().all(|v| {
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| s.properties.as_ref())
            .and_then(|p| p.get("spec"))
            .and_then(|s| s.properties.as_ref())
            .is_some_and(|p| p.contains_key(field))
    })
}

/// Names of the objects of kind `K` in `namespace`, but `except`.
async fn left<K>(client: &Client, namespace: &str, except: &[&str]) -> Vec<String>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .map(|o| o.name_any())
        .filter(|n| !except.contains(&n.as_str()))
        .map(|n| format!("{} {namespace}/{n}", K::kind(&K::DynamicType::default())))
        .collect()
}

/// Cluster-scoped objects of kind `K` labelled part of TAS, or named `names`.
async fn left_cluster<K>(client: &Client, names: &[&str]) -> Vec<String>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .iter()
        .filter(|o| {
            o.labels()
                .get("app.kubernetes.io/part-of")
                .map(String::as_str)
                == Some("tas")
                || names.contains(&o.name_any().as_str())
        })
        .map(|o| format!("{} {}", K::kind(&K::DynamicType::default()), o.name_any()))
        .collect()
}

/// Everything of TAS still in the cluster, but the CRDs and the release namespace
/// itself (created by the user).
async fn leftovers(client: &Client) -> Vec<String> {
    let mut out = Vec::new();
    let objects = Api::<TopologyAwareScheduling>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    out.extend(
        objects
            .iter()
            .map(|o| format!("TopologyAwareScheduling {}", o.name_any())),
    );
    if Api::<Namespace>::all(client.clone())
        .get_opt(AGENTS_NAMESPACE)
        .await
        .ok()
        .flatten()
        .is_some()
    {
        out.push(format!("Namespace {AGENTS_NAMESPACE}"));
    }
    let ns = NAMESPACE;
    out.extend(left::<Pod>(client, ns, &[]).await);
    out.extend(left::<Deployment>(client, ns, &[]).await);
    out.extend(left::<DaemonSet>(client, ns, &[]).await);
    out.extend(left::<Job>(client, ns, &[]).await);
    out.extend(left::<Service>(client, ns, &[]).await);
    out.extend(left::<ServiceAccount>(client, ns, &["default"]).await);
    out.extend(left::<ConfigMap>(client, ns, &["kube-root-ca.crt"]).await);
    out.extend(left::<Role>(client, ns, &[]).await);
    out.extend(left::<RoleBinding>(client, ns, &[]).await);
    out.extend(left::<NetworkPolicy>(client, ns, &[]).await);
    out.extend(left::<PodDisruptionBudget>(client, ns, &[]).await);
    out.extend(left::<Lease>(client, ns, &[]).await);
    let operand_roles = ["tas-updater", "tas-scheduler", "tas-uninstall"];
    out.extend(left_cluster::<ClusterRole>(client, &operand_roles).await);
    out.extend(left_cluster::<ClusterRoleBinding>(client, &operand_roles).await);
    out.extend(left_cluster::<ValidatingAdmissionPolicy>(client, &[]).await);
    out.extend(left_cluster::<ValidatingAdmissionPolicyBinding>(client, &[]).await);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_install_upgrade_and_uninstall_in_another_namespace() {
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
    let older = tempfile::tempdir().unwrap();
    chart_without_field(older.path(), NEW_FIELD);
    let older_chart = older.path().to_str().unwrap();

    // As the user guide says: the release namespace created and labelled `restricted`
    // first (the operator, the scheduler and the uninstall hook need no more; the chart
    // creates the node agents' own `privileged` namespace).
    let labelled = Namespace {
        metadata: ObjectMeta {
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
        .create(&PostParams::default(), &labelled)
        .await
        .expect("create the release namespace");

    // 1. Install (the earlier chart), with the chart's object: one command.
    helm(
        home.path(),
        &[
            "install",
            RELEASE,
            older_chart,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--set",
            "topologyAwareScheduling.create=true",
        ],
    );
    assert!(
        !served_crd_has(&client, NEW_FIELD).await,
        "the earlier chart's CRD has no spec.{NEW_FIELD}"
    );
    let operators = wait_operator_pods(&client, &runner, NAMESPACE, TIMEOUT)
        .await
        .expect("the chart's operator pods run");
    let took = wait_available(&client, scenario.nodes().len(), TIMEOUT)
        .await
        .expect("the chart's TopologyAwareScheduling object becomes Available");
    eprintln!("install: stack Available {took:?} after the operator ran");
    let objects: Api<TopologyAwareScheduling> = Api::all(client.clone());
    let object = objects.get("default").await.expect("the chart's object");
    assert_eq!(
        object.spec.namespace, NAMESPACE,
        "spec.namespace follows the release"
    );
    let uid = object.uid();
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
        .expect("scheduler runs in the release namespace");
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

    // 2. Upgrade to this tree's chart: one command applies the CRD's new field, and the
    // object (a hook at install) becomes a release object, the same one.
    helm(
        home.path(),
        &[
            "upgrade",
            RELEASE,
            CHART_DIR,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
            "--reuse-values",
        ],
    );
    wait_for("the served CRD to have the new field", TIMEOUT, || async {
        Ok::<_, String>(served_crd_has(&client, NEW_FIELD).await.then_some(()))
    })
    .await
    .expect("helm upgrade applies the CRD");
    let manifest = helm(
        home.path(),
        &[
            "get",
            "manifest",
            RELEASE,
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            NAMESPACE,
        ],
    );
    assert!(
        manifest.contains("kind: TopologyAwareScheduling"),
        "the upgrade adopts the object into the release"
    );
    assert_eq!(
        objects.get("default").await.expect("the object").uid(),
        uid,
        "the upgrade keeps the object (no re-creation)"
    );
    wait_available(&client, scenario.nodes().len(), TIMEOUT)
        .await
        .expect("Available after the upgrade");
    eprintln!("upgrade: the served CRD has spec.{NEW_FIELD}; the object kept and Available");

    // 3. Uninstall: one command.
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
    // Poll, with a deadline: the pods' and namespaces' deletion finishes after Helm's.
    let deadline = std::time::Instant::now() + TIMEOUT;
    let left = loop {
        let left = leftovers(&client).await;
        if left.is_empty() || std::time::Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    assert!(left.is_empty(), "left after helm uninstall: {left:?}");
    // Kept: the CRDs (crds.keep; the operator keeps the NRT CRD without
    // deleteOnUninstall) and the release namespace the user created.
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    assert!(
        crds.get_opt(TAS_CRD).await.unwrap().is_some(),
        "the TAS CRD stays"
    );
    assert!(
        crds.get_opt(NRT_CRD).await.unwrap().is_some(),
        "the NRT CRD stays"
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
    eprintln!("uninstall: nothing of TAS left but the CRDs");
}
