//! Findings 3 and 6 with the operator's token: bindings pinned to the rendered roles and
//! the operands' ServiceAccounts, other objects to the rendered names; a namespace is the
//! operator's only if it created it.

use super::{
    AGENTS_BINDING, CLUSTER_BINDING, CREATED_NAMESPACE, MARK, RENDERED, ROLE_BINDING, SELF_BINDING,
    assert_all_refused, expect_refused, try_create,
};
use crate::harness::*;
use crate::least_privilege::{AGENTS_NS, INSTALL_NS, OPERATOR};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tas_api::tas::TopologyAwareScheduling;
use tas_testcluster::unique_name;

/// (what, kind, name, roleRef, subjects, the refusal's message)
type BindingAttempt<'a> = (
    &'a str,
    &'a str,
    &'a str,
    (&'a str, &'a str),
    Value,
    &'a str,
);

fn binding(
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    role: (&str, &str),
    subjects: Value,
) -> Value {
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1},
        "subjects": subjects,
    })
}

fn service_account(name: &str, namespace: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
}

/// Finding 3: bindings pinned to the rendered roles and the operands' ServiceAccounts;
/// other objects to the rendered names.
pub async fn bindings(op: &Client) {
    const RBAC: &str = "rbac.authorization.k8s.io";
    let ns = Some(INSTALL_NS);
    let me = service_account(OPERATOR, INSTALL_NS);
    let scheduler = service_account("tas-scheduler", INSTALL_NS);
    let stranger = service_account("default", "default");
    // In the node agents' namespace, so that only the name rule refuses it (the
    // subject's namespace has attempts of its own below).
    let agents_neighbour = service_account("default", AGENTS_NS);
    let attempts: [BindingAttempt; 8] = [
        (
            "bind cluster-admin to itself",
            "RoleBinding",
            "tas-scheduler-leader-election",
            ("ClusterRole", "cluster-admin"),
            json!([me]),
            "",
        ),
        (
            "bind itself tas-operator-namespace in its own namespace (delete it)",
            "RoleBinding",
            "tas-operator-namespace",
            ("ClusterRole", "tas-operator-namespace"),
            json!([me]),
            SELF_BINDING,
        ),
        (
            "bind tas-operator-operands to a foreign ServiceAccount",
            "RoleBinding",
            "tas-operator-operands",
            ("ClusterRole", "tas-operator-operands"),
            json!([stranger]),
            SELF_BINDING,
        ),
        (
            "the scheduler's leader-election binding of another role",
            "RoleBinding",
            "tas-scheduler-leader-election",
            ("ClusterRole", "tas-operator-operands"),
            json!([scheduler]),
            ROLE_BINDING,
        ),
        (
            "the scheduler's leader-election binding with an extra subject",
            "RoleBinding",
            "tas-scheduler-leader-election",
            ("Role", "tas-scheduler-leader-election"),
            json!([scheduler, stranger]),
            ROLE_BINDING,
        ),
        (
            "a RoleBinding the operator never renders",
            "RoleBinding",
            "backdoor",
            ("ClusterRole", "tas-operator-operands"),
            json!([me]),
            RENDERED,
        ),
        (
            "ClusterRoleBinding tas-updater with an extra subject",
            "ClusterRoleBinding",
            "tas-updater",
            ("ClusterRole", "tas-updater"),
            json!([service_account("tas-updater", AGENTS_NS), agents_neighbour]),
            CLUSTER_BINDING,
        ),
        (
            "ClusterRoleBinding tas-updater to another ServiceAccount",
            "ClusterRoleBinding",
            "tas-updater",
            ("ClusterRole", "tas-updater"),
            json!([agents_neighbour]),
            CLUSTER_BINDING,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, kind, name, role, subjects, needle) in attempts {
        let namespace = (kind == "RoleBinding").then_some(INSTALL_NS);
        let value = binding(kind, namespace, name, role, subjects);
        let result = try_create(op, (RBAC, "v1", kind), namespace, value).await;
        expect_refused(&mut wrong, what, result, needle);
    }
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "tas-helper"}, "rules": []});
    let result = try_create(op, (RBAC, "v1", "ClusterRole"), None, role).await;
    expect_refused(
        &mut wrong,
        "a ClusterRole the operator never renders",
        result,
        RENDERED,
    );
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "tas-operator-config", "namespace": INSTALL_NS}});
    let result = try_create(op, ("", "v1", "ConfigMap"), ns, config_map).await;
    expect_refused(
        &mut wrong,
        "a ConfigMap the operator never renders",
        result,
        RENDERED,
    );
    // The installer's binding of the operator in its namespace: adding a subject.
    let installer = Api::<DynamicObject>::namespaced_with(
        op.clone(),
        INSTALL_NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(RBAC, "v1", "RoleBinding")),
    )
    .patch(
        "tas-operator-operands",
        &PatchParams {
            dry_run: true,
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"subjects": [me, service_account("default", INSTALL_NS)]})),
    )
    .await
    .map(|_| ());
    expect_refused(
        &mut wrong,
        "add a subject to the installer's binding",
        installer,
        SELF_BINDING,
    );
    // The operand's name, in a namespace someone else controls (the parameter policies:
    // the scheduler's subject is in spec.namespace, which the operator cannot change; the
    // agents' in their namespace, which the installer set in the operator's Deployment).
    let elsewhere = |name: &str, namespace: &str| {
        binding(
            "ClusterRoleBinding",
            None,
            name,
            ("ClusterRole", name),
            json!([service_account(name, namespace)]),
        )
    };
    for (what, name, namespace, needle) in [
        (
            "ClusterRoleBinding tas-scheduler to a tas-scheduler ServiceAccount of another namespace",
            "tas-scheduler",
            "default",
            "only to a ServiceAccount of the operands namespace",
        ),
        (
            "ClusterRoleBinding tas-updater to a tas-updater ServiceAccount of another namespace",
            "tas-updater",
            "default",
            AGENTS_BINDING,
        ),
        (
            "ClusterRoleBinding tas-updater to the tas-updater ServiceAccount of the scheduler's namespace",
            "tas-updater",
            INSTALL_NS,
            AGENTS_BINDING,
        ),
    ] {
        let value = elsewhere(name, namespace);
        let result = try_create(op, (RBAC, "v1", "ClusterRoleBinding"), None, value).await;
        expect_refused(&mut wrong, what, result, needle);
    }
    let spec = Api::<TopologyAwareScheduling>::all(op.clone())
        .patch(
            STACK,
            &PatchParams {
                dry_run: true,
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"namespace": "elsewhere"}})),
        )
        .await
        .map(|_| ());
    expect_refused(
        &mut wrong,
        "change the object's spec.namespace",
        spec,
        "may change only the finalizers",
    );
    assert_all_refused(&wrong);
}

/// Finding 6: a namespace is the operator's only if it created it; a mark is no proof.
pub async fn namespaces(admin: &Client, op: &Client, marked: &str) {
    let self_binding = |ns: &str, role: &str| {
        binding(
            "RoleBinding",
            Some(ns),
            role,
            ("ClusterRole", role),
            json!([service_account(OPERATOR, INSTALL_NS)]),
        )
    };
    let rbac = ("rbac.authorization.k8s.io", "v1", "RoleBinding");
    let mut wrong = Vec::new();
    // Marked before the policies existed, never created by the operator.
    for role in ["tas-operator-operands", "tas-operator-namespace"] {
        let result = try_create(op, rbac, Some(marked), self_binding(marked, role)).await;
        expect_refused(
            &mut wrong,
            &format!("bind {role} in a marked namespace it did not create"),
            result,
            CREATED_NAMESPACE,
        );
    }
    // A record forged with the operator's token (it may write the status) is not
    // enough either: kube-system carries no mark, and nobody can add one.
    let kube_system = Api::<Namespace>::all(admin.clone())
        .get("kube-system")
        .await
        .unwrap();
    stacks(op)
        .patch_status(
            STACK,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"createdObjects": [
                {"kind": "Namespace", "name": "kube-system", "uid": kube_system.uid().unwrap()},
            ]}})),
        )
        .await
        .unwrap();
    let result = try_create(
        op,
        rbac,
        Some("kube-system"),
        self_binding("kube-system", "tas-operator-namespace"),
    )
    .await;
    expect_refused(
        &mut wrong,
        "bind itself in kube-system with a forged record",
        result,
        CREATED_NAMESPACE,
    );
    let mark = json!({"metadata": {"annotations": {"tas.dev/created-by-operator": "true"}}});
    let annotate = Api::<Namespace>::all(admin.clone())
        .patch(
            "kube-system",
            &PatchParams {
                dry_run: true,
                ..PatchParams::default()
            },
            &Patch::Merge(mark),
        )
        .await
        .map(|_| ());
    expect_refused(&mut wrong, "an admin marks kube-system", annotate, MARK);
    let fresh = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": unique_name("tas-fake"), "annotations": {"tas.dev/created-by-operator": "true"}}});
    let result = try_create(admin, ("", "v1", "Namespace"), None, fresh).await;
    expect_refused(
        &mut wrong,
        "an admin creates a marked namespace",
        result,
        MARK,
    );
    assert_all_refused(&wrong);
}
