//! The escalation paths of issue 19, tried for real with a token of the installed
//! operator's ServiceAccount: RBAC refuses what it can name; the `tas-operator-scope`
//! admission policy refuses what RBAC cannot limit by name (creates); and the one way
//! the operator gains rights in a namespace, binding itself in a namespace it created,
//! works. Writes that must be refused are server-side dry runs, so a regression changes
//! nothing in the shared cluster. The attacks of issue 29 (workload content, binding
//! subjects, namespace ownership) are tried in operator/tests/stack/attacks.rs.

use super::{NAMESPACE, OPERATOR, TIMEOUT, install, shared};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use serde_json::{Value, json};
use std::time::Duration;
use tas_testcluster::{TestCluster, access, unique_name, unique_namespace, wait_for};

const CREATED_BY: &str = "tas.dev/created-by-operator";

/// A client authenticating with a fresh token of the operator's ServiceAccount.
async fn operator_client(cluster: &TestCluster, admin: &Client) -> Client {
    cluster
        .service_account_client(admin, NAMESPACE, OPERATOR, Duration::from_secs(600))
        .await
        .expect("a client with the operator's token")
}

pub(super) fn dry_post() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

pub(super) fn dry_patch() -> PatchParams {
    PatchParams {
        dry_run: true,
        ..PatchParams::default()
    }
}

fn dry_delete() -> DeleteParams {
    DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    }
}

/// The operator binding `role` to itself in `namespace`.
fn self_binding(namespace: &str, role: &str) -> RoleBinding {
    serde_json::from_value(json!({
        "metadata": {"name": role, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NAMESPACE}],
    }))
    .unwrap()
}

fn daemon_set(namespace: &str) -> DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "escalate", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "escalate"}},
            "template": {
                "metadata": {"labels": {"app": "escalate"}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]},
            },
        },
    }))
    .unwrap()
}

/// The HTTP status of a refusal, or `None` when the request was allowed.
pub(super) fn refused<T>(result: Result<T, kube::Error>) -> Option<(u16, String)> {
    match result {
        Ok(_) => None,
        Err(kube::Error::Api(s)) => Some((s.code, s.message)),
        Err(other) => Some((0, other.to_string())),
    }
}

/// Every escalation path is refused with 403 Forbidden for the operator's own token.
#[tokio::test]
async fn the_operators_token_cannot_escalate() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    install(cluster).await;
    let op = operator_client(cluster, &admin).await;

    let kube_system_cm = Api::<ConfigMap>::namespaced(op.clone(), "kube-system");
    let attempts: Vec<(&str, Option<(u16, String)>)> = vec![
        (
            "create a DaemonSet in kube-system",
            refused(
                Api::<DaemonSet>::namespaced(op.clone(), "kube-system")
                    .create(&dry_post(), &daemon_set("kube-system"))
                    .await,
            ),
        ),
        (
            "patch a kube-system ConfigMap",
            refused(
                kube_system_cm
                    .patch(
                        "kube-root-ca.crt",
                        &dry_patch(),
                        &Patch::Merge(json!({"data": {"x": "y"}})),
                    )
                    .await,
            ),
        ),
        (
            "delete namespace kube-system",
            refused(
                Api::<Namespace>::all(op.clone())
                    .delete("kube-system", &dry_delete())
                    .await,
            ),
        ),
        (
            "delete its own namespace",
            refused(
                Api::<Namespace>::all(op.clone())
                    .delete(NAMESPACE, &dry_delete())
                    .await,
            ),
        ),
        (
            "mark kube-system as created by the operator",
            refused(
                Api::<Namespace>::all(op.clone())
                    .patch(
                        "kube-system",
                        &dry_patch(),
                        &Patch::Merge(json!({"metadata": {"annotations": {CREATED_BY: "true"}}})),
                    )
                    .await,
            ),
        ),
        (
            "delete the cluster-admin ClusterRoleBinding",
            refused(
                Api::<ClusterRoleBinding>::all(op.clone())
                    .delete("cluster-admin", &dry_delete())
                    .await,
            ),
        ),
        (
            "read a Secret",
            refused(
                Api::<Secret>::namespaced(op.clone(), NAMESPACE)
                    .get("any")
                    .await,
            ),
        ),
        (
            "list Secrets",
            refused(
                Api::<Secret>::all(op.clone())
                    .list(&Default::default())
                    .await,
            ),
        ),
    ];
    let wrong: Vec<String> = attempts
        .into_iter()
        .filter(|(_, r)| !matches!(r, Some((403, _))))
        .map(|(what, r)| format!("{what}: {r:?}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "not refused with 403:\n{}",
        wrong.join("\n")
    );

    // What RBAC grants without names, the admission policy narrows. Its binding reaches
    // the API server's policy cache shortly after the install: poll.
    let other_ns = unique_namespace(&admin, "not-created-by-tas")
        .await
        .unwrap();
    let policy_refusals = [
        "a RoleBinding in kube-system",
        "a RoleBinding in a namespace the operator did not create",
        "a ClusterRole not its own",
        "a ClusterRoleBinding not its own",
        "its operands' ClusterRole bound cluster-wide under an operand's name",
        "a CRD not the NRT CRD",
        "a kube-* namespace",
        "a namespace without its creation mark",
    ];
    let last = std::sync::Mutex::new(Vec::new());
    wait_for("tas-operator-scope to refuse every write", TIMEOUT, || async {
        let results = [
            refused(
                Api::<RoleBinding>::namespaced(op.clone(), "kube-system")
                    .create(&dry_post(), &self_binding("kube-system", "tas-operator-operands"))
                    .await,
            ),
            refused(
                Api::<RoleBinding>::namespaced(op.clone(), &other_ns)
                    .create(&dry_post(), &self_binding(&other_ns, "tas-operator-operands"))
                    .await,
            ),
            refused(
                Api::<ClusterRole>::all(op.clone())
                    .create(
                        &dry_post(),
                        &serde_json::from_value(json!({"metadata": {"name": "not-tas"}, "rules": []}))
                            .unwrap(),
                    )
                    .await,
            ),
            refused(
                Api::<ClusterRoleBinding>::all(op.clone())
                    .create(
                        &dry_post(),
                        &cluster_binding("not-tas", "tas-operator-operands"),
                    )
                    .await,
            ),
            refused(
                Api::<ClusterRoleBinding>::all(op.clone())
                    .create(
                        &dry_post(),
                        &cluster_binding("tas-updater", "tas-operator-operands"),
                    )
                    .await,
            ),
            refused(
                Api::<CustomResourceDefinition>::all(op.clone())
                    .create(&dry_post(), &other_crd())
                    .await,
            ),
            refused(
                Api::<Namespace>::all(op.clone())
                    .create(&dry_post(), &namespace("kube-tas", true))
                    .await,
            ),
            refused(
                Api::<Namespace>::all(op.clone())
                    .create(&dry_post(), &namespace(&unique_name("unmarked"), false))
                    .await,
            ),
        ];
        let pending: Vec<String> = policy_refusals
            .iter()
            .zip(&results)
            // 422: tas-operator-namespaces refuses every RoleBinding of the operator
            // while no TopologyAwareScheduling object (its parameter) exists.
            .filter(|(_, r)| !matches!(r, Some((403 | 422, m)) if m.contains("'tas-operator-") || m.contains("TAS operator")))
            .map(|(what, r)| format!("{what}: {r:?}"))
            .collect();
        let done = pending.is_empty();
        *last.lock().unwrap() = pending;
        Ok::<_, kube::Error>(done.then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; still allowed: {:#?}", last.lock().unwrap()));
    Api::<Namespace>::all(admin.clone())
        .delete(&other_ns, &DeleteParams::default())
        .await
        .unwrap();
}

/// A ClusterRoleBinding `name` of `role` to the operator: rights everywhere.
fn cluster_binding(name: &str, role: &str) -> ClusterRoleBinding {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NAMESPACE}],
    }))
    .unwrap()
}

/// A namespace named `name`, with the operator's creation mark when `marked`.
fn namespace(name: &str, marked: bool) -> Namespace {
    let annotations = if marked {
        json!({ CREATED_BY: "true" })
    } else {
        json!({})
    };
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}})).unwrap()
}

/// A CRD of some other API group, which the operator must not be able to create.
fn other_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.test"},
        "spec": {
            "group": "example.test",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}],
        },
    }))
    .unwrap()
}

/// The one way to gain rights: create a namespace, bind itself there, work there,
/// delete it. Exactly what the operator does for a new `spec.namespace`.
#[tokio::test]
async fn the_operator_works_in_a_namespace_it_creates() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    install(cluster).await;
    let op = operator_client(cluster, &admin).await;

    // The TopologyAwareScheduling object the operator works for: it records there the
    // uid of a namespace it creates (the admission policy tas-operator-namespaces
    // checks it). Paused: no operator runs in this cluster, and none must act on it.
    let mut stack: Value =
        serde_norway::from_str(&std::fs::read_to_string(SAMPLE).unwrap()).unwrap();
    stack["spec"]["paused"] = json!(true);
    let stacks = Api::<DynamicObject>::all_with(admin.clone(), &tas_resource());
    stacks
        .patch(
            "default",
            &PatchParams::apply("e2e-operator-token").force(),
            &Patch::Apply(&stack),
        )
        .await
        .unwrap();

    let name = unique_name("tas-created");
    let ns = namespace(&name, true);
    let namespaces = Api::<Namespace>::all(op.clone());
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let record = json!({"status": {"createdObjects": [
        {"kind": "Namespace", "name": name, "uid": created.metadata.uid},
    ]}});
    Api::<DynamicObject>::all_with(op.clone(), &tas_resource())
        .patch_status("default", &PatchParams::default(), &Patch::Merge(&record))
        .await
        .expect("the operator records the namespace it created");
    let bindings = Api::<RoleBinding>::namespaced(op.clone(), &name);
    let post = PostParams::default();
    wait_for(
        "the operator to bind itself in its namespace",
        TIMEOUT,
        || async {
            // The policy's view of the new namespace may lag a moment.
            for role in ["tas-operator-operands", "tas-operator-namespace"] {
                match bindings.create(&post, &self_binding(&name, role)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(kube::Error::Api(s)) if s.code == 403 => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            Ok(Some(()))
        },
    )
    .await
    .unwrap();
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "tas-updater"}})).unwrap();
    let accounts = Api::<ServiceAccount>::namespaced(op.clone(), &name);
    wait_for("the operator's rights to take effect", TIMEOUT, || async {
        match accounts.create(&dry_post(), &sa).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await
    .unwrap();
    // Relabelling and deleting its own namespace: allowed.
    namespaces
        .patch(
            &name,
            &dry_patch(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("patch the namespace it created");
    namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the namespace it created");
    stacks
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
}

const SAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../config/samples/tas_v1alpha1_topologyawarescheduling.yaml"
);

fn tas_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "tas.dev",
        "v1alpha1",
        "TopologyAwareScheduling",
    ))
}

/// The policies' CEL compiles and type-checks against the real API server's schemas.
#[tokio::test]
async fn the_operator_scope_policy_type_checks_without_warnings() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    install(cluster).await;
    for policy in [
        "tas-operator-scope",
        "tas-operator-workloads",
        "tas-operator-images",
        "tas-operator-agents",
        "tas-operator-namespaces",
        "tas-namespace-mark",
    ] {
        let warnings = access::policy_type_check_warnings(&admin, policy, TIMEOUT)
            .await
            .unwrap();
        assert!(
            warnings.is_empty(),
            "{policy}: type-check warnings: {warnings:?}"
        );
    }
}
