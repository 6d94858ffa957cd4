//! What editing the TopologyAwareScheduling object grants, tried with the token of a
//! ServiceAccount whose RBAC lets it edit that object and nothing else (issue 29,
//! findings 1, 4 and 6): host paths outside the allow-list, wherever they appear, and
//! annotations loosening the operands' confinement are refused by the API server naming
//! the field; the object's status (where the operator records what it created) and the
//! namespaces (whose annotation once meant "created by the operator") are out of reach.
//! Writes are server-side dry runs, so the shared cluster is unchanged.

use super::operator_token::{dry_patch, dry_post, refused};
use super::{install, shared};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::time::Duration;
use tas_testcluster::{TestCluster, access, unique_name, unique_namespace, wait_for};

/// The rules of an editor of the object, and no more.
fn editor_role(name: &str) -> ClusterRole {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{
            "apiGroups": ["tas.dev"],
            "resources": ["topologyawareschedulings"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }],
    }))
    .unwrap()
}

fn tas_api(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("tas.dev", "v1alpha1", "TopologyAwareScheduling");
    Api::all_with(client, &ApiResource::from_gvk(&gvk))
}

fn object(spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "tas.dev/v1alpha1",
        "kind": "TopologyAwareScheduling",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .unwrap()
}

/// A client with a token of a fresh ServiceAccount bound to [`editor_role`], once the
/// binding is in effect.
async fn editor_client(cluster: &TestCluster, admin: &Client) -> Client {
    let namespace = unique_namespace(admin, "tas-editor").await.unwrap();
    let name = unique_name("tas-editor");
    access::create_service_account(admin, &namespace, &name)
        .await
        .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &editor_role(&name))
        .await
        .unwrap();
    let binding = access::service_account_binding(&name, &name, &namespace, &name);
    Api::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let editor = cluster
        .service_account_client(admin, &namespace, &name, Duration::from_secs(600))
        .await
        .expect("a client with the editor's token");
    let api = tas_api(editor.clone());
    wait_for(
        "the editor's RBAC to take effect",
        Duration::from_secs(30),
        || {
            let api = api.clone();
            async move {
                api.create(&dry_post(), &object(json!({})))
                    .await
                    .map(|_| Some(()))
            }
        },
    )
    .await
    .unwrap();
    editor
}

#[tokio::test]
async fn editing_the_object_grants_no_host_path_no_confinement_change_and_no_status() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    install(cluster).await;
    let editor = editor_client(cluster, &admin).await;
    let api = tas_api(editor.clone());

    let group = |updater: Value| json!({"nodeGroups": [{"name": "g", "nodeSelector": {"matchLabels": {"a": "b"}}, "updater": updater}]});
    let apparmor = "container.apparmor.security.beta.kubernetes.io/tas-updater";
    for (what, spec, field) in [
        (
            "the whole host as a group's pod-resources directory",
            group(json!({"kubelet": {"podResourcesDir": "/"}})),
            "spec.nodeGroups[].updater.kubelet.podResourcesDir",
        ),
        (
            "a config file directly in / (its directory would be mounted)",
            group(json!({"kubelet": {"configFile": "/x.yaml"}})),
            "spec.nodeGroups[].updater.kubelet.configFile",
        ),
        (
            "the container runtime's socket directory as a drop-in directory",
            group(json!({"kubelet": {"configDir": "/run/containerd"}})),
            "spec.nodeGroups[].updater.kubelet.configDir",
        ),
        (
            "a shared pod-resources directory outside the allow-list",
            json!({"updater": {"kubelet": {"podResourcesDir": "/etc/kubernetes"}}}),
            "spec.updater.kubelet.podResourcesDir",
        ),
        (
            "AppArmor unconfined for the root node agent",
            json!({"updater": {"podAnnotations": {apparmor: "unconfined"}}}),
            "spec.updater.podAnnotations",
        ),
        (
            "AppArmor unconfined for one group's agents",
            group(json!({"podAnnotations": {apparmor: "unconfined"}})),
            "spec.nodeGroups[].updater.podAnnotations",
        ),
    ] {
        let got = refused(api.create(&dry_post(), &object(spec)).await);
        let (code, message) = got.unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(code, 422, "{what}: {message}");
        assert!(message.contains(field), "{what}: {message}");
    }

    // The status is the operator's record of what it created (what uninstall may
    // delete): the editor cannot write it.
    let status = refused(
        api.patch_status(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 1}})),
        )
        .await,
    );
    assert_eq!(status.map(|(code, _)| code), Some(403), "status patch");

    // Nor mark a namespace as created by the operator.
    let mark = refused(
        Api::<Namespace>::all(editor.clone())
            .patch(
                "kube-system",
                &dry_patch(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"tas.dev/created-by-operator": "true"}}}),
                ),
            )
            .await,
    );
    assert_eq!(
        mark.map(|(code, _)| code),
        Some(403),
        "namespace annotation"
    );
}
