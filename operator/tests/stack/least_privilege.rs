//! The operator with its own ServiceAccount token and the RBAC and admission policies
//! of config/rbac and config/policy, not an admin's credentials: the stack still
//! reaches Available, in its own (pre-existing) namespace and in a namespace it creates;
//! a namespace it did not create keeps its labels and annotations exactly, during the
//! install and after the uninstall.

use crate::harness::*;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use tas_api::tas::status::condition_type::AVAILABLE;
use tas_operator::OperatorIdentity;
use tas_operator::reconcile::apply::CREATED_BY_ANNOTATION;
use tas_operator::telemetry::{Otlp, OtlpSettings};
use tas_testcluster::{TestCluster, unique_name, wait_for};

/// The install namespace of config/rbac.
const INSTALL_NS: &str = "tas-system";
const OPERATOR: &str = "tas-operator";

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
    for dir in ["config/rbac", "config/policy"] {
        kubectl_apply(cluster, dir).await;
    }
    let op = operator_client(cluster, admin).await;
    let operator = start_operator_as(
        op,
        Otlp::new(OtlpSettings::default()),
        Some(OperatorIdentity {
            namespace: INSTALL_NS.into(),
            service_account: OPERATOR.into(),
        }),
    );

    // 1. Operands in the operator's own namespace, which it did not create.
    let label = ("tas.dev/least-privilege", "own");
    nodes(admin, "lp-own", 2, &[label]).await;
    create(admin, &with_groups(INSTALL_NS, &[("lp", label.0, label.1)])).await;
    wait_condition(admin, AVAILABLE, "True", Some("AsExpected")).await;
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
    wait_condition(admin, AVAILABLE, "True", Some("AsExpected")).await;
    let created = namespace_alive(admin, &ns)
        .await
        .expect("namespace created");
    assert_eq!(
        created.metadata.annotations.unwrap_or_default()[CREATED_BY_ANNOTATION],
        "true"
    );
    assert_eq!(
        created.metadata.labels.unwrap_or_default()["pod-security.kubernetes.io/enforce"],
        "privileged",
        "a namespace the operator creates admits the node agents"
    );
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

async fn kubectl_apply(cluster: &TestCluster, dir: &str) {
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
async fn operator_client(cluster: &TestCluster, admin: &Client) -> Client {
    cluster
        .service_account_client(admin, INSTALL_NS, OPERATOR, Duration::from_secs(3600))
        .await
        .expect("a client with the operator's token")
}
