//! Running the operator in-process against the shared test cluster, and the waits the
//! scenarios share.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use std::time::Duration;
use tas_api::tas::{Condition, TopologyAwareScheduling};
use tas_operator::desired::{BuildContext, SCHEDULER_DEPLOYMENT};
use tas_operator::telemetry::Otlp;
use tas_operator::{Config, InProcess, Options};
use tas_testcluster::{
    FakeNode, crd_dir, create_fake_node, read_crds, unique_name, wait_for, wait_node_ready,
};

pub const TIMEOUT: Duration = Duration::from_secs(90);
pub const STACK: &str = "default";
/// Operand images for these tests. Not named `tas-*`: no pod runner runs here, so kwok
/// must play the operand pods (its stages leave `tas-*` images to the node simulator's
/// pod runner, see `testcluster/kwok/stages.yaml`).
pub const UPDATER_IMAGE: &str = "registry.invalid/operand-updater:test";
pub const SCHEDULER_IMAGE: &str = "registry.invalid/operand-scheduler:test";
/// The taint of the infrastructure nodes `pods.rs` places the scheduler on: the only
/// taint key the operator lets the object tolerate here.
pub const INFRA_TAINT: &str = "e2e.tas.dev/infra";
pub const TAS_CRD: &str = "topologyawareschedulings.tas.dev";
pub const NRT_CRD: &str = tas_api::nrt::CRD_NAME;

/// Starts the operator in-process (as the binary does, without HTTP or a Lease),
/// exporting over `otlp` when the object names an endpoint.
pub fn start_operator(client: Client, otlp: Otlp) -> InProcess {
    start_operator_as(client, otlp, None, None)
}

/// [`start_operator`] with the operator's own identity (its ServiceAccount), which it
/// binds its rights to in a namespace it creates, and the node agents' own namespace
/// (`--updater-namespace`; `None`: spec.namespace).
pub fn start_operator_as(
    client: Client,
    otlp: Otlp,
    identity: Option<tas_operator::OperatorIdentity>,
    updater_namespace: Option<&str>,
) -> InProcess {
    let config = Config {
        identity,
        build: BuildContext {
            updater_image_default: Some(UPDATER_IMAGE.into()),
            scheduler_image_default: Some(SCHEDULER_IMAGE.into()),
            allowed_images: Vec::new(),
            // pods.rs places the scheduler on tainted infrastructure nodes.
            allowed_toleration_keys: vec![INFRA_TAINT.into()],
            updater_namespace: updater_namespace.map(str::to_owned),
        },
        debounce: Duration::from_millis(200),
        ..Config::default()
    };
    InProcess::spawn(client, Options::new(config, otlp))
}

/// Installs only the TopologyAwareScheduling CRD: the NRT CRD is the operator's job.
pub async fn install_tas_crd(client: &Client) {
    apply_tas_crd(client, &tas_crd()).await;
}

/// The TopologyAwareScheduling CRD of `config/crd`.
pub fn tas_crd() -> CustomResourceDefinition {
    read_crds(&crd_dir())
        .unwrap()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(TAS_CRD))
        .expect("config/crd holds the TopologyAwareScheduling CRD")
}

/// Applies `crd` as the TopologyAwareScheduling CRD and waits until it is Established.
pub async fn apply_tas_crd(client: &Client, crd: &(impl serde::Serialize + std::fmt::Debug)) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        TAS_CRD,
        &PatchParams::apply("tas-e2e").force(),
        &Patch::Apply(crd),
    )
    .await
    .unwrap();
    wait_for("the TAS CRD to be Established", TIMEOUT, || async {
        Ok::<_, kube::Error>(crd_established(&api.get(TAS_CRD).await?).then_some(()))
    })
    .await
    .unwrap();
}

pub fn crd_established(crd: &CustomResourceDefinition) -> bool {
    tas_operator::reconcile::observed::crd_established(crd)
}

/// The sample CR with its operands in `namespace`.
pub fn sample(namespace: &str) -> TopologyAwareScheduling {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/samples/tas_v1alpha1_topologyawarescheduling.yaml"
    );
    let mut cr: TopologyAwareScheduling =
        serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    cr.spec.namespace = namespace.to_owned();
    cr
}

/// A CR whose groups select `label=value` for each `(group, label, value)`.
pub fn with_groups(namespace: &str, groups: &[(&str, &str, &str)]) -> TopologyAwareScheduling {
    let mut cr = sample(namespace);
    cr.spec.node_groups = groups
        .iter()
        .map(|(name, key, value)| {
            serde_json::from_value(json!({
                "name": name,
                "nodeSelector": { "matchLabels": { *key: value } },
            }))
            .unwrap()
        })
        .collect();
    cr
}

pub fn stacks(client: &Client) -> Api<TopologyAwareScheduling> {
    Api::all(client.clone())
}

pub async fn create(client: &Client, cr: &TopologyAwareScheduling) {
    stacks(client)
        .create(&PostParams::default(), cr)
        .await
        .unwrap();
}

/// Merge-patches the CR's spec.
pub async fn patch_spec(client: &Client, spec: serde_json::Value) {
    stacks(client)
        .patch(
            STACK,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": spec })),
        )
        .await
        .unwrap();
}

/// `n` fake nodes carrying `labels`, Ready and settled; returns their names.
///
/// Settled: kube-controller-manager adds the deprecated `beta.kubernetes.io/{os,arch}`
/// labels about a second after a node registers. That is a real label change, which
/// the operator rightly reconciles; waiting for it keeps it out of the measurements.
pub async fn nodes(
    client: &Client,
    prefix: &str,
    n: usize,
    labels: &[(&str, &str)],
) -> Vec<String> {
    let mut names = Vec::new();
    for _ in 0..n {
        let mut node = FakeNode::new(unique_name(prefix));
        for (k, v) in labels {
            node = node.label(*k, *v);
        }
        create_fake_node(client, &node).await.unwrap();
        names.push(node.name);
    }
    let api: Api<Node> = Api::all(client.clone());
    for name in &names {
        wait_node_ready(client, name, TIMEOUT).await.unwrap();
        wait_for(
            format!("node {name} to get its beta labels"),
            TIMEOUT,
            || async {
                let node = api.get(name).await?;
                Ok::<_, kube::Error>(label(&node, "beta.kubernetes.io/os").map(|_| ()))
            },
        )
        .await
        .unwrap();
    }
    names
}

pub fn condition<'a>(cr: &'a TopologyAwareScheduling, type_: &str) -> Option<&'a Condition> {
    cr.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until the CR's status satisfies `check`, returning the CR.
pub async fn wait_status(
    client: &Client,
    what: &str,
    check: impl Fn(&TopologyAwareScheduling) -> bool,
) -> TopologyAwareScheduling {
    let api = stacks(client);
    wait_for(what, TIMEOUT, || async {
        let cr = api.get(STACK).await?;
        Ok::<_, kube::Error>(check(&cr).then_some(cr))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits until condition `type_` has `status` (and `reason`, if given).
pub async fn wait_condition(
    client: &Client,
    type_: &str,
    status: &str,
    reason: Option<&str>,
) -> TopologyAwareScheduling {
    wait_status(client, &format!("{type_}={status} ({reason:?})"), |cr| {
        condition(cr, type_)
            .is_some_and(|c| c.status == status && reason.is_none_or(|r| c.reason == r))
    })
    .await
}

pub async fn get_daemon_set(client: &Client, ns: &str, name: &str) -> DaemonSet {
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    wait_for(format!("DaemonSet {ns}/{name}"), TIMEOUT, || async {
        api.get_opt(name).await
    })
    .await
    .unwrap()
}

pub async fn get_deployment(client: &Client, ns: &str) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    wait_for(
        format!("Deployment {ns}/{SCHEDULER_DEPLOYMENT}"),
        TIMEOUT,
        || async { api.get_opt(SCHEDULER_DEPLOYMENT).await },
    )
    .await
    .unwrap()
}

/// Publishes a NodeResourceTopology with one zone for `node`, as its agent would.
pub async fn publish_nrt(client: &Client, node: &str) {
    let resource = ApiResource {
        group: "topology.node.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "topology.node.k8s.io/v1alpha2".into(),
        kind: "NodeResourceTopology".into(),
        plural: "noderesourcetopologies".into(),
    };
    let nrt = DynamicObject::new(node, &resource).data(json!({
        "zones": [{ "name": "node-0", "type": "Node", "resources": [
            { "name": "cpu", "capacity": "8", "allocatable": "8", "available": "8" },
        ]}],
    }));
    Api::<DynamicObject>::all_with(client.clone(), &resource)
        .create(&PostParams::default(), &nrt)
        .await
        .unwrap();
}

/// Deletes the CR and waits until it and its operands are gone.
pub async fn uninstall(client: &Client, namespace: &str) {
    stacks(client)
        .delete(STACK, &DeleteParams::default())
        .await
        .unwrap();
    let api = stacks(client);
    wait_for(
        "the TopologyAwareScheduling object to be gone",
        TIMEOUT,
        || async { Ok::<_, kube::Error>(api.get_opt(STACK).await?.is_none().then_some(())) },
    )
    .await
    .unwrap();
    // The node agents' DaemonSets wherever they run (spec.namespace or their own).
    let daemon_sets: Api<DaemonSet> = Api::all(client.clone());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let roles: Api<ClusterRole> = Api::all(client.clone());
    wait_for("the operands to be gone", TIMEOUT, || async {
        let ds = daemon_sets
            .list(&ListParams::default().labels(&tas_operator::desired::managed_selector(STACK)))
            .await?;
        let gone = ds
            .items
            .iter()
            .all(|d| d.metadata.deletion_timestamp.is_some())
            && deployments.get_opt(SCHEDULER_DEPLOYMENT).await?.is_none()
            && roles.get_opt("tas-updater").await?.is_none()
            && roles.get_opt("tas-scheduler").await?.is_none();
        Ok::<_, kube::Error>(gone.then_some(()))
    })
    .await
    .unwrap();
}

/// Whether the namespace still exists and is not being deleted.
pub async fn namespace_alive(client: &Client, name: &str) -> Option<Namespace> {
    let ns = Api::<Namespace>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()?;
    ns.metadata.deletion_timestamp.is_none().then_some(ns)
}

pub fn label<'a>(obj: &'a impl ResourceExt, key: &str) -> Option<&'a str> {
    obj.labels().get(key).map(String::as_str)
}
