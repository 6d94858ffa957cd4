//! The ValidatingAdmissionPolicy of `config/policy/` on the real API server: a node
//! agent (a ServiceAccount named `tas-updater`) may write only the NodeResourceTopology
//! named after the node its token is bound to.
//!
//! The agent's credentials are made the way the kubelet makes them: a TokenRequest
//! bound to a pod scheduled on a node, for which kube-apiserver records the node's name
//! in the token (user extra `authentication.kubernetes.io/node-name`). The test then
//! talks to the API server with that token, as the agent would.
//!
//! The policy also judges what the agent writes (sizes, zone names, amounts) and
//! covers DELETE. The HTTPS `/metrics` authorisation is tested in `metrics_auth.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};
use tas_testcluster::{
    FakeNode, TestCluster, access, apply_crds_from_dir, crd_dir, create_fake_node, unique_name,
    unique_namespace, wait_for,
};

/// Name of the node agents' ServiceAccount, which the policy matches in any namespace.
const UPDATER_SA: &str = "tas-updater";
/// Name of the policy (and of its binding) in `config/policy/`.
const POLICY: &str = "tas-updater-own-node";
/// Field manager of the agent's writes, as the real agent uses one.
const AGENT_MANAGER: &str = "tas-updater";
/// How long the policy may take to be enforced after it is created (the admission
/// plugin learns about policies through an informer).
const ENFORCED_WITHIN: Duration = Duration::from_secs(30);

fn policy_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/policy/updater-own-node-policy.yaml")
}

fn nrt_resource() -> ApiResource {
    ApiResource::erase::<tas_api::nrt::v1alpha2::NodeResourceTopology>(&())
}

/// A NodeResourceTopology as the agent publishes it, with `free` CPUs in its one zone.
fn nrt(name: &str, free: u32) -> Value {
    json!({
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": { "name": name },
        "attributes": [{ "name": "topologyManagerPolicy", "value": "single-numa-node" }],
        "zones": [{ "name": "node-0", "type": "Node", "resources": [
            { "name": "cpu", "capacity": "8", "allocatable": "8", "available": free.to_string() },
        ]}],
    })
}

/// Server-side applies `nrt(name, free)` as the agent does; the refusal's message on error.
async fn publish(api: &Api<DynamicObject>, name: &str, free: u32) -> Result<(), String> {
    api.patch(
        name,
        &PatchParams::apply(AGENT_MANAGER).force(),
        &Patch::Apply(nrt(name, free)),
    )
    .await
    .map(|_| ())
    .map_err(|e| match e {
        kube::Error::Api(s) => format!("{} ({}): {}", s.code, s.reason, s.message),
        other => format!("not an API refusal: {other}"),
    })
}

/// Applies the policy and its binding from `config/policy/` as an admin would.
async fn apply_policy(client: &Client) {
    let text = std::fs::read_to_string(policy_file()).expect("policy file readable");
    let params = PatchParams::apply(tas_testcluster::FIELD_MANAGER).force();
    let mut kinds = Vec::new();
    for document in serde_norway::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).expect("policy file is YAML");
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        let name = value["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "ValidatingAdmissionPolicy" => {
                let policy: ValidatingAdmissionPolicy = serde_json::from_value(value).unwrap();
                Api::<ValidatingAdmissionPolicy>::all(client.clone())
                    .patch(&name, &params, &Patch::Apply(&policy))
                    .await
                    .expect("policy applies");
            }
            "ValidatingAdmissionPolicyBinding" => {
                let binding: ValidatingAdmissionPolicyBinding =
                    serde_json::from_value(value).unwrap();
                Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
                    .patch(&name, &params, &Patch::Apply(&binding))
                    .await
                    .expect("binding applies");
            }
            other => panic!("unexpected kind {other} in {}", policy_file().display()),
        }
        kinds.push(kind);
    }
    assert_eq!(
        kinds,
        [
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"
        ]
    );
}

/// A token of `tas-updater` in `ns`, bound to `pod` when given (as the kubelet's
/// projected tokens are), else bound to nothing.
async fn updater_token(client: &Client, ns: &str, pod: Option<&Pod>) -> String {
    let request = access::token_request(Duration::from_secs(600), pod);
    access::service_account_token(client, ns, UPDATER_SA, &request)
        .await
        .expect("token")
}

/// A client of the test cluster that authenticates with `token` instead of the admin's.
async fn client_with_token(cluster: &TestCluster, token: &str) -> Client {
    cluster
        .client_with_token(token)
        .await
        .expect("a client with the token")
}

/// A `tas-updater` ServiceAccount in `ns` with the node agent's NRT permissions (a
/// ClusterRole: NRT objects are cluster-scoped).
async fn updater_account(client: &Client, ns: &str) {
    let post = PostParams::default();
    access::create_service_account(client, ns, UPDATER_SA)
        .await
        .expect("service account");
    let role_name = unique_name("nrt-writer");
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": role_name },
        "rules": [{
            "apiGroups": ["topology.node.k8s.io"],
            "resources": ["noderesourcetopologies"],
            // `delete` too, which the real agent lacks: so that the policy, not RBAC,
            // is what refuses another node's object.
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        }],
    }))
    .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .create(&post, &role)
        .await
        .expect("cluster role");
    let binding = access::service_account_binding(&role_name, &role_name, ns, UPDATER_SA);
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&post, &binding)
        .await
        .expect("cluster role binding");
}

/// A pod of `tas-updater` scheduled on `node` (spec.nodeName set, as a DaemonSet's are).
async fn agent_pod(client: &Client, ns: &str, node: &str) -> Pod {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "agent" },
        "spec": {
            "nodeName": node,
            "serviceAccountName": UPDATER_SA,
            "containers": [{ "name": "updater", "image": "registry.invalid/tas-updater:test" }],
        },
    }))
    .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .expect("agent pod")
}

#[tokio::test]
async fn a_node_agent_writes_only_its_own_nodes_topology() {
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    // Any namespace: the policy matches the ServiceAccount by name, wherever
    // spec.namespace put the operands.
    let (nrts, own, other) = agent_on_a_node(cluster, &admin, "admission").await;

    // Another node's object: refused, with a message naming both nodes. Polled, since
    // the API server enforces a new policy after a moment.
    let refusal = wait_for(
        "the policy to refuse another node's NodeResourceTopology",
        ENFORCED_WITHIN,
        || async { Ok::<_, String>(publish(&nrts, &other, 8).await.err()) },
    )
    .await
    .unwrap();
    assert!(refusal.starts_with("403"), "{refusal}");
    assert!(refusal.contains(POLICY), "{refusal}");
    assert!(
        refusal.contains(&format!(
            "on node {own} may only write the NodeResourceTopology named {own}, not {other}"
        )),
        "{refusal}"
    );

    // Its own node's object: created, then updated (server-side apply is a PATCH that
    // reaches admission as CREATE, then UPDATE), and a plain update too.
    publish(&nrts, &own, 8).await.expect("own NRT created");
    publish(&nrts, &own, 6).await.expect("own NRT updated");
    let mut current = nrts.get(&own).await.unwrap();
    current.data["zones"][0]["resources"][0]["available"] = json!("4");
    nrts.replace(&own, &PostParams::default(), &current)
        .await
        .expect("own NRT replaced");

    // The policy constrains node agents only: an admin still writes any object.
    let as_admin = Api::<DynamicObject>::all_with(admin.clone(), &nrt_resource());
    publish(&as_admin, &other, 8)
        .await
        .expect("an admin is not matched by the policy");
}

#[tokio::test]
async fn a_node_agent_token_without_a_node_is_refused() {
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    apply_crds_from_dir(&admin, &crd_dir()).await.unwrap();
    apply_policy(&admin).await;

    let ns = unique_namespace(&admin, "admission-unbound").await.unwrap();
    updater_account(&admin, &ns).await;
    let node = unique_name("some-node");
    create_fake_node(&admin, &FakeNode::new(node.clone()))
        .await
        .unwrap();
    // Bound to no pod (like `kubectl create token`): the token names no node, so it
    // cannot write even an object named after a real node.
    let agent = client_with_token(cluster, &updater_token(&admin, &ns, None).await).await;
    let nrts = Api::<DynamicObject>::all_with(agent, &nrt_resource());

    let refusal = wait_for(
        "the policy to refuse a token without a node",
        ENFORCED_WITHIN,
        || async { Ok::<_, String>(publish(&nrts, &node, 8).await.err()) },
    )
    .await
    .unwrap();
    assert!(refusal.starts_with("403"), "{refusal}");
    assert!(refusal.contains("its token names no node"), "{refusal}");
}

/// The policy's CEL compiles and type-checks against the real API server's schemas.
#[tokio::test]
async fn the_policy_type_checks_without_warnings() {
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    apply_crds_from_dir(&admin, &crd_dir()).await.unwrap();
    apply_policy(&admin).await;

    let warnings = access::policy_type_check_warnings(&admin, POLICY, ENFORCED_WITHIN)
        .await
        .unwrap();
    assert!(warnings.is_empty(), "type-check warnings: {warnings:?}");
}

/// An agent of a new `tas-updater` ServiceAccount on a new node `own`, with a second
/// node `other`: the agent's NRT API, and the two node names.
async fn agent_on_a_node(
    cluster: &TestCluster,
    admin: &Client,
    prefix: &str,
) -> (Api<DynamicObject>, String, String) {
    apply_crds_from_dir(admin, &crd_dir()).await.unwrap();
    apply_policy(admin).await;
    let ns = unique_namespace(admin, prefix).await.unwrap();
    updater_account(admin, &ns).await;
    let own = unique_name("own-node");
    let other = unique_name("other-node");
    for name in [&own, &other] {
        create_fake_node(admin, &FakeNode::new(name.clone()))
            .await
            .unwrap();
    }
    let pod = agent_pod(admin, &ns, &own).await;
    let agent = client_with_token(cluster, &updater_token(admin, &ns, Some(&pod)).await).await;
    (
        Api::<DynamicObject>::all_with(agent, &nrt_resource()),
        own,
        other,
    )
}

/// The refusal of a request as "code (reason): message".
fn refusal(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({}): {}", s.code, s.reason, s.message),
        other => format!("not an API refusal: {other}"),
    }
}

/// Server-side applies `object` as the agent; the refusal on error.
async fn apply_as(api: &Api<DynamicObject>, object: &Value) -> Result<(), String> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(
        name,
        &PatchParams::apply(AGENT_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map(|_| ())
    .map_err(refusal)
}

#[tokio::test]
async fn a_node_agent_deletes_and_replaces_only_its_own_nodes_topology() {
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    let (nrts, own, other) = agent_on_a_node(cluster, &admin, "admission-delete").await;
    let as_admin = Api::<DynamicObject>::all_with(admin.clone(), &nrt_resource());
    publish(&as_admin, &other, 8)
        .await
        .expect("an admin writes another node's object");
    wait_for("the policy to be enforced", ENFORCED_WITHIN, || async {
        Ok::<_, String>(publish(&nrts, &other, 8).await.err())
    })
    .await
    .unwrap();

    // DELETE of another node's existing object: refused by the policy (RBAC allows it).
    let deleted = nrts
        .delete(&other, &Default::default())
        .await
        .map(|_| ())
        .map_err(refusal);
    let message = deleted.expect_err("deleting another node's object is refused");
    assert!(message.starts_with("403"), "{message}");
    assert!(
        message.contains(&format!(
            "on node {own} may only delete the NodeResourceTopology named {own}, not {other}"
        )),
        "{message}"
    );

    // UPDATE (a plain replace) of another node's existing object: refused.
    let mut existing = as_admin.get(&other).await.unwrap();
    existing.data["zones"][0]["resources"][0]["available"] = json!("2");
    let replaced = nrts
        .replace(&other, &PostParams::default(), &existing)
        .await
        .map(|_| ())
        .map_err(refusal);
    let message = replaced.expect_err("replacing another node's object is refused");
    assert!(message.starts_with("403"), "{message}");
    assert!(message.contains(&format!("not {other}")), "{message}");
    assert_eq!(
        as_admin.get(&other).await.unwrap().data["zones"][0]["resources"][0]["available"],
        json!("8"),
        "the other node's object is unchanged"
    );

    // Its own object: written, then deleted.
    publish(&nrts, &own, 8).await.expect("own NRT created");
    nrts.delete(&own, &Default::default())
        .await
        .expect("an agent deletes its own node's object");
    wait_for("own NRT gone", ENFORCED_WITHIN, || async {
        Ok::<_, kube::Error>(as_admin.get_opt(&own).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
}

/// `zones` zones named `node-<i>`, each with one `cpu` resource of these amounts.
fn nrt_with_zones(name: &str, zones: usize, amounts: (&str, &str, &str)) -> Value {
    let (capacity, allocatable, available) = amounts;
    let zones: Vec<Value> = (0..zones)
        .map(|i| {
            json!({ "name": format!("node-{i}"), "type": "Node", "resources": [
                { "name": "cpu", "capacity": capacity, "allocatable": allocatable, "available": available },
            ]})
        })
        .collect();
    json!({
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": { "name": name },
        "zones": zones,
    })
}

#[tokio::test]
async fn a_node_agent_cannot_advertise_more_than_its_node_has() {
    let cluster = TestCluster::shared().expect("the shared test cluster starts");
    let _logs = cluster.log_guard();
    let admin = cluster.client().await.unwrap();
    let (nrts, own, _) = agent_on_a_node(cluster, &admin, "admission-content").await;

    // available > capacity: wait until the policy is enforced, then read the refusal.
    let inflated = nrt_with_zones(&own, 2, ("8", "8", "1000"));
    let message = wait_for(
        "the policy to refuse available > capacity",
        ENFORCED_WITHIN,
        || async { Ok::<_, String>(apply_as(&nrts, &inflated).await.err()) },
    )
    .await
    .unwrap();
    assert!(message.starts_with("422"), "{message}");
    assert!(message.contains(POLICY), "{message}");
    assert!(
        message.contains(
            "0 <= available <= allocatable <= capacity; not so in zone(s) node-0, node-1"
        ),
        "{message}"
    );

    let refused = [
        // allocatable > capacity, in another notation.
        (
            "allocatable > capacity",
            nrt_with_zones(&own, 1, ("8", "9000m", "8")),
            "available <= allocatable <= capacity",
        ),
        (
            "a negative amount",
            nrt_with_zones(&own, 1, ("8", "8", "-1")),
            "0 <= available",
        ),
        (
            "a zone name not node-<id>",
            {
                let mut o = nrt_with_zones(&own, 2, ("8", "8", "8"));
                o["zones"][1]["name"] = json!("node-01");
                o
            },
            "zone names must be node-<NUMA id> (^node-(0|[1-9][0-9]*)$) of type Node, not node-01 (Node)",
        ),
        (
            "65 zones: more than the kubelet can have, within the CRD's 128",
            nrt_with_zones(&own, 65, ("8", "8", "8")),
            "the NodeResourceTopology is too large",
        ),
        (
            "more costs than zones",
            {
                let mut o = nrt_with_zones(&own, 1, ("8", "8", "8"));
                o["zones"][0]["costs"] = json!([
                    { "name": "node-0", "value": 10 }, { "name": "node-1", "value": 20 }
                ]);
                o
            },
            "the NodeResourceTopology is too large",
        ),
    ];
    for (case, object, expected) in refused {
        let message = apply_as(&nrts, &object)
            .await
            .expect_err(&format!("{case}: refused"));
        assert!(message.starts_with("422"), "{case}: {message}");
        assert!(message.contains(expected), "{case}: {message}");
    }

    // Beyond the CRD's own bounds: the schema refuses it for every writer.
    let huge = nrt_with_zones(&own, 129, ("8", "8", "8"));
    let message = apply_as(&nrts, &huge).await.expect_err("129 zones refused");
    assert!(message.starts_with("422"), "{message}");
    assert!(message.contains("must have at most 128 items"), "{message}");

    // A sane object, at the agent's largest size, with quantities in mixed notations.
    let mut good = nrt_with_zones(&own, 64, ("8", "7500m", "7"));
    good["zones"][0]["resources"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "memory", "capacity": "64Gi", "allocatable": 68_000_000_000_i64, "available": "60G" }));
    apply_as(&nrts, &good)
        .await
        .expect("a sane object is admitted");
}
