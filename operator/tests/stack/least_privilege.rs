//! The operator with its own ServiceAccount token and the RBAC and admission policies
//! of config/rbac and config/policy, not an admin's credentials, and the node agents in
//! the installer's namespace for them (`--updater-namespace`, Pod Security
//! `privileged`): the stack still reaches Available, with the scheduler in the
//! operator's own (pre-existing) namespace and in a namespace it creates, which it
//! labels `restricted`; a namespace it did not create keeps its labels and annotations
//! exactly, during the install and after the uninstall. The operator's Deployment (the parameter of the
//! policy tas-operator-workloads: the images the install allows) exists, with no
//! replicas: the operator runs in-process. The node agents' token, as the operator
//! granted it, may read its node but no pod (finding 8d).

use crate::attacks::{assert_all_refused, expect_refused};
use crate::harness::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tas_api::tas::status::condition_type::AVAILABLE;
use tas_operator::OperatorIdentity;
use tas_operator::desired::{SCHEDULER_DEPLOYMENT, UPDATER_SERVICE_ACCOUNT};
use tas_operator::reconcile::apply::CREATED_BY_ANNOTATION;
use tas_operator::telemetry::{Otlp, OtlpSettings};
use tas_testcluster::{TestCluster, unique_name, wait_for};

/// The install namespace of config/rbac.
pub const INSTALL_NS: &str = "tas-system";
/// The node agents' namespace of config/manager and config/rbac.
pub const AGENTS_NS: &str = "tas-node";
pub const OPERATOR: &str = "tas-operator";

pub async fn scenario(cluster: &TestCluster, admin: &Client) {
    // The install namespace exists before the operator, with its owner's labels.
    let before: Namespace = serde_json::from_value(json!({
        "metadata": {
            "name": INSTALL_NS,
            "labels": {"team": "platform", "pod-security.kubernetes.io/audit": "restricted"},
            "annotations": {"example.test/owner": "platform-team"},
        },
    }))
    .unwrap();
    let namespaces = Api::<Namespace>::all(admin.clone());
    namespaces
        .create(&PostParams::default(), &before)
        .await
        .unwrap();
    let snapshot = |ns: &Namespace| (ns.metadata.labels.clone(), ns.metadata.annotations.clone());
    let original = snapshot(&namespaces.get(INSTALL_NS).await.unwrap());
    // The agents' namespace, as config/manager/namespace.yaml makes it.
    let agents: Namespace = serde_json::from_value(json!({
        "metadata": {
            "name": AGENTS_NS,
            "labels": {"pod-security.kubernetes.io/enforce": "privileged"},
        },
    }))
    .unwrap();
    namespaces
        .create(&PostParams::default(), &agents)
        .await
        .unwrap();
    for dir in ["config/rbac", "config/policy"] {
        kubectl_apply(cluster, dir).await;
    }
    operator_deployment(admin).await;
    let op = operator_client(cluster, admin).await;
    let operator = start_operator_as(
        op,
        Otlp::new(OtlpSettings::default()),
        Some(OperatorIdentity {
            namespace: INSTALL_NS.into(),
            service_account: OPERATOR.into(),
        }),
        Some(AGENTS_NS),
    );

    // 1. Operands in the operator's own namespace, which it did not create.
    let label = ("tas.dev/least-privilege", "own");
    let own_nodes = nodes(admin, "lp-own", 2, &[label]).await;
    create(admin, &with_groups(INSTALL_NS, &[("lp", label.0, label.1)])).await;
    wait_condition(admin, AVAILABLE, "True", Some("AsExpected")).await;
    assert_agents_apart(admin, INSTALL_NS).await;
    updater_reads_no_pods(cluster, admin, &own_nodes[0]).await;
    assert_eq!(
        snapshot(&namespaces.get(INSTALL_NS).await.unwrap()),
        original,
        "the operator changed the pre-existing namespace"
    );
    uninstall(admin, INSTALL_NS).await;
    let after = namespace_alive(admin, INSTALL_NS)
        .await
        .expect("the pre-existing namespace is kept");
    assert_eq!(snapshot(&after), original, "labels not restored exactly");

    // 2. Operands in a namespace the operator creates, binding itself its rights there.
    let ns = unique_name("tas-lp");
    let label = ("tas.dev/least-privilege", "created");
    nodes(admin, "lp-new", 2, &[label]).await;
    create(admin, &with_groups(&ns, &[("lp", label.0, label.1)])).await;
    let cr = wait_condition(admin, AVAILABLE, "True", Some("AsExpected")).await;
    let created = namespace_alive(admin, &ns)
        .await
        .expect("namespace created");
    // The proof of creation the operator and the policy tas-operator-namespaces trust.
    let records = cr.status.unwrap_or_default().created_objects;
    assert!(
        records.iter().any(|r| r.kind == "Namespace"
            && r.name == ns
            && Some(&r.uid) == created.metadata.uid.as_ref()),
        "{records:?}"
    );
    assert_eq!(
        created.metadata.annotations.unwrap_or_default()[CREATED_BY_ANNOTATION],
        "true"
    );
    assert_eq!(
        created.metadata.labels.unwrap_or_default()["pod-security.kubernetes.io/enforce"],
        "restricted",
        "a namespace the operator creates holds only the scheduler: restricted"
    );
    assert_agents_apart(admin, &ns).await;
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), &ns);
    for role in ["tas-operator-operands", "tas-operator-namespace"] {
        let b = bindings.get(role).await.unwrap();
        assert_eq!(b.role_ref.name, role);
    }
    uninstall(admin, &ns).await;
    wait_for("the created namespace to be deleted", TIMEOUT, || async {
        Ok::<_, kube::Error>(namespace_alive(admin, &ns).await.is_none().then_some(()))
    })
    .await
    .unwrap();

    operator
        .stop(TIMEOUT)
        .await
        .expect("the operator stops cleanly");
}

/// The node agents run in their own namespace, the scheduler in `scheduler_ns`.
async fn assert_agents_apart(admin: &Client, scheduler_ns: &str) {
    let daemon_sets = |ns: &str| {
        let api = Api::<DaemonSet>::namespaced(admin.clone(), ns);
        async move {
            let list = api.list(&Default::default()).await.unwrap();
            list.items
                .into_iter()
                .filter_map(|d| d.metadata.name)
                .collect::<Vec<_>>()
        }
    };
    let agents = daemon_sets(AGENTS_NS).await;
    assert_eq!(
        agents,
        ["tas-updater-lp"],
        "the agents' DaemonSets in {AGENTS_NS}"
    );
    let misplaced = daemon_sets(scheduler_ns).await;
    assert!(
        misplaced.is_empty(),
        "DaemonSets in {scheduler_ns}: {misplaced:?}"
    );
    Api::<Deployment>::namespaced(admin.clone(), scheduler_ns)
        .get(SCHEDULER_DEPLOYMENT)
        .await
        .expect("the scheduler in spec.namespace");
}

/// The node agents' token as the operator bound it: it reads its node (so the token
/// works), and every read of pods is refused: cluster-wide, in a namespace, and limited
/// to its node by field selector, which RBAC cannot tell apart from the first.
async fn updater_reads_no_pods(cluster: &TestCluster, admin: &Client, node: &str) {
    let updater = cluster
        .service_account_client(
            admin,
            AGENTS_NS,
            UPDATER_SERVICE_ACCOUNT,
            Duration::from_secs(600),
        )
        .await
        .expect("a client with the node agents' token");
    Api::<Node>::all(updater.clone())
        .get(node)
        .await
        .expect("the node agents' token reads a node");
    let on_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let mut wrong = Vec::new();
    let list =
        |api: Api<Pod>, params: ListParams| async move { api.list(&params).await.map(|_| ()) };
    for (what, api, params) in [
        (
            "list pods cluster-wide",
            Api::all(updater.clone()),
            ListParams::default(),
        ),
        ("list pods on its node", Api::all(updater.clone()), on_node),
        (
            "list pods in the scheduler's namespace",
            Api::namespaced(updater.clone(), INSTALL_NS),
            ListParams::default(),
        ),
        (
            "list pods in its own namespace",
            Api::namespaced(updater.clone(), AGENTS_NS),
            ListParams::default(),
        ),
        (
            "list pods in kube-system",
            Api::namespaced(updater.clone(), "kube-system"),
            ListParams::default(),
        ),
    ] {
        expect_refused(&mut wrong, what, list(api, params).await, "");
    }
    let watch = Api::<Pod>::all(updater.clone())
        .watch(&Default::default(), "0")
        .await
        .map(|_| ());
    expect_refused(&mut wrong, "watch pods cluster-wide", watch, "");
    let get = Api::<Pod>::namespaced(updater, "kube-system")
        .get("kube-apiserver")
        .await
        .map(|_| ());
    expect_refused(&mut wrong, "get a pod", get, "");
    assert_all_refused(&wrong);
}

/// The operator's Deployment as the installer writes it, scaled to zero: its env names
/// the operand images the admission policy tas-operator-workloads allows and the node
/// agents' namespace.
async fn operator_deployment(admin: &Client) {
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": OPERATOR, "namespace": INSTALL_NS},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app.kubernetes.io/name": OPERATOR}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": OPERATOR}},
                "spec": {
                    "serviceAccountName": OPERATOR,
                    "containers": [{
                        "name": "operator",
                        "image": "registry.invalid/operator:test",
                        "env": [
                            {"name": "TAS_UPDATER_IMAGE", "value": UPDATER_IMAGE},
                            {"name": "TAS_SCHEDULER_IMAGE", "value": SCHEDULER_IMAGE},
                            {"name": "TAS_UPDATER_NAMESPACE", "value": AGENTS_NS},
                        ],
                    }],
                },
            },
        },
    }))
    .unwrap();
    Api::<Deployment>::namespaced(admin.clone(), INSTALL_NS)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
}

pub async fn kubectl_apply(cluster: &TestCluster, dir: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = tokio::process::Command::new(cluster.binaries_dir().join("kubectl"))
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["apply", "--server-side", "-k", dir])
        .current_dir(repo)
        .output()
        .await
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl apply -k {dir}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A client with a token of the operator's ServiceAccount.
pub async fn operator_client(cluster: &TestCluster, admin: &Client) -> Client {
    cluster
        .service_account_client(admin, INSTALL_NS, OPERATOR, Duration::from_secs(3600))
        .await
        .expect("a client with the operator's token")
}
