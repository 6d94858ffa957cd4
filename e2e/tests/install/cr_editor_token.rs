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

/// The stack installed, and the editor's client with the object's API.
async fn installed_with_editor(cluster: &TestCluster) -> (Client, Api<DynamicObject>) {
    let admin = cluster.client().await.unwrap();
    install(cluster).await;
    let editor = editor_client(cluster, &admin).await;
    let api = tas_api(editor.clone());
    (editor, api)
}

#[tokio::test]
async fn editing_the_object_grants_no_host_path_no_confinement_change_and_no_status() {
    let cluster = shared();
    let _logs = cluster.log_guard();
    let (editor, api) = installed_with_editor(cluster).await;

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

/// `spec.observability`'s certificate source and OTLP protocol, with the editor's token:
/// values outside their enums are refused by the CRD schema naming the field; no field
/// names a Secret (the operands mount only `<metrics Service>-tls` of their own
/// namespace), so one an editor adds is refused or pruned before the operator could see
/// it; and the editor, who may set `servingCertificate: Secret`, still cannot read that
/// Secret (nor may the operator, see `operator_token.rs`): the certificate reaches only
/// the operand's own process, through the kubelet.
#[tokio::test]
async fn editing_the_object_names_no_secret_and_no_unknown_protocol() {
    use k8s_openapi::api::core::v1::Secret;

    let cluster = shared();
    let _logs = cluster.log_guard();
    let (editor, api) = installed_with_editor(cluster).await;
    let observability = |o: Value| json!({"observability": o});
    for (what, field, value) in [
        (
            "a certificate source the operator does not know",
            "servingCertificate",
            json!("Bogus"),
        ),
        (
            "the source in another case",
            "servingCertificate",
            json!("secret"),
        ),
        ("an empty source", "servingCertificate", json!("")),
        (
            "a Secret of the editor's choosing in place of the source",
            "servingCertificate",
            json!({"name": "admin-token", "namespace": "kube-system"}),
        ),
        (
            "a protocol the operands do not speak",
            "otlpProtocol",
            json!("http/json"),
        ),
        (
            "the protocol in another spelling",
            "otlpProtocol",
            json!("HTTP/PROTOBUF"),
        ),
        (
            "a protocol that is not a string",
            "otlpProtocol",
            json!(4318),
        ),
    ] {
        let spec = observability(json!({ field: value }));
        let got = refused(api.create(&dry_post(), &object(spec)).await);
        let (code, message) = got.unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(code, 422, "{what}: {message}");
        let path = format!("spec.observability.{field}");
        assert!(message.contains(&path), "{what}: {message}");
    }

    // The values of the enums pass.
    for o in [
        json!({"servingCertificate": "Secret", "otlpProtocol": "http/protobuf"}),
        json!({"servingCertificate": "SelfSigned", "otlpProtocol": "grpc"}),
    ] {
        api.create(&dry_post(), &object(observability(o.clone())))
            .await
            .unwrap_or_else(|e| panic!("{o}: {e}"));
    }

    // A field naming the Secret does not exist: the API server refuses or prunes it.
    let named = observability(json!({
        "servingCertificate": "Secret",
        "servingCertificateSecret": {"name": "admin-token", "namespace": "kube-system"},
    }));
    match api.create(&dry_post(), &object(named)).await {
        Ok(stored) => {
            let o = &stored.data["spec"]["observability"];
            assert_eq!(o["servingCertificate"], "Secret", "{o}");
            assert!(
                o.get("servingCertificateSecret").is_none(),
                "an unknown field reached the stored object: {o}"
            );
        }
        Err(e) => assert!(
            e.to_string().contains("servingCertificateSecret"),
            "refused, naming the field: {e}"
        ),
    }

    // The editor cannot read the Secret the operands would mount.
    let secrets = Api::<Secret>::namespaced(editor.clone(), "tas-system");
    let read = refused(secrets.get("tas-scheduler-metrics-tls").await);
    assert_eq!(
        read.map(|(code, _)| code),
        Some(403),
        "get the serving Secret"
    );
    let listed = refused(Api::<Secret>::all(editor).list(&Default::default()).await);
    assert_eq!(listed.map(|(code, _)| code), Some(403), "list Secrets");
}
