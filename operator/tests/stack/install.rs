//! The sample object: install, status, NRT freshness, drift repair, uninstall.

use crate::harness::*;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tas_api::tas::status::condition_type::{AVAILABLE, DEGRADED, PROGRESSING, READY};
use tas_operator::desired::{
    MANAGED_BY, MANAGED_BY_LABEL, SCHEDULER_CONFIG_DIR, SCHEDULER_DEPLOYMENT, SCHEDULER_UID,
    updater_daemonset_name,
};
use tas_operator::reconcile::apply::CREATED_BY_ANNOTATION;
use tas_testcluster::{unique_name, wait_for};

use tas_operator::InProcess;

const GROUP: &str = "numa-workers";

pub async fn scenario(client: &Client, _operator: &InProcess) {
    let ns = unique_name("tas-install");
    let workers = nodes(client, "numa", 3, &[("tas.dev/numa", "true")]).await;
    create(client, &sample(&ns)).await;

    // The NRT CRD is installed and served.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for("the NRT CRD to be Established", TIMEOUT, || async {
        Ok::<_, kube::Error>(
            crds.get_opt(NRT_CRD)
                .await?
                .is_some_and(|c| crd_established(&c))
                .then_some(()),
        )
    })
    .await
    .unwrap();

    check_daemon_set(&get_daemon_set(client, &ns, &updater_daemonset_name(GROUP)).await);
    check_deployment(&get_deployment(client, &ns).await);
    let namespace = namespace_alive(client, &ns)
        .await
        .expect("namespace created");
    assert_eq!(
        namespace.metadata.annotations.unwrap_or_default()[CREATED_BY_ANNOTATION],
        "true",
        "the operator marks the namespace it created"
    );

    // kwok runs the agent and scheduler pods: Available, rolled out, nothing wrong.
    wait_condition(client, AVAILABLE, "True", Some("AsExpected")).await;
    wait_status(client, "ready nodes and rollout complete", |cr| {
        let s = cr.status.as_ref().unwrap();
        s.node_groups.first().is_some_and(|g| g.ready_nodes == 3)
            && condition(cr, PROGRESSING).is_some_and(|c| c.status == "False")
    })
    .await;
    // Ready for kstatus (Flux) and Argo CD, at the current generation.
    let cr = wait_condition(client, READY, "True", Some("AsExpected")).await;
    let status = cr.status.clone().unwrap();
    assert_eq!(status.observed_generation, cr.metadata.generation);
    for c in &status.conditions {
        assert_eq!(c.observed_generation, cr.metadata.generation, "{}", c.type_);
    }
    let nrt = status.nrt_crd.as_ref().unwrap();
    assert!(nrt.installed && nrt.managed);
    assert_eq!(nrt.served_versions, ["v1alpha1", "v1alpha2"]);
    assert_eq!(nrt.storage_version.as_deref(), Some("v1alpha2"));
    let group = &status.node_groups[0];
    assert_eq!((group.name.as_str(), group.desired_nodes), (GROUP, 3));
    assert_eq!(status.desired_nodes, Some(3));
    let scheduler = status.scheduler.as_ref().unwrap();
    assert_eq!((scheduler.replicas, scheduler.ready_replicas), (1, 1));
    assert_eq!(scheduler.scheduler_name, "topology-aware-scheduler");
    let mut sorted = status.related_objects.clone();
    sorted.sort();
    assert_eq!(status.related_objects, sorted, "relatedObjects are sorted");
    assert!(
        status
            .related_objects
            .iter()
            .any(|o| o.kind == "DaemonSet" && o.name == updater_daemonset_name(GROUP))
    );

    // No agent has published yet: every node is stale; publishing makes them fresh.
    assert_eq!(status.nodes_with_fresh_nrt, Some(0));
    let mut stale = workers.clone();
    stale.sort();
    assert_eq!(group.stale_nodes, stale);
    let degraded = condition(&cr, DEGRADED).unwrap();
    assert_eq!(degraded.status, "False");
    assert!(
        degraded.message.contains("3 of 3 node(s) have no fresh"),
        "{}",
        degraded.message
    );
    for node in &workers[..2] {
        publish_nrt(client, node).await;
    }
    let cr = wait_status(client, "2 nodes with a fresh NRT", |cr| {
        cr.status.as_ref().unwrap().nodes_with_fresh_nrt == Some(2)
    })
    .await;
    let group = &cr.status.as_ref().unwrap().node_groups[0];
    assert_eq!(group.nodes_with_fresh_nrt, 2);
    assert_eq!(group.stale_nodes, [workers[2].clone()]);

    check_events(client).await;
    drift(client, &ns).await;

    uninstall(client, &ns).await;
    assert!(
        crds.get_opt(NRT_CRD).await.unwrap().is_some(),
        "the NRT CRD outlives the stack by default"
    );
    wait_for("the created namespace to be deleted", TIMEOUT, || async {
        Ok::<_, kube::Error>(namespace_alive(client, &ns).await.is_none().then_some(()))
    })
    .await
    .unwrap();
}

/// The node agent: read-only host mounts, its ServiceAccount, placed by the group.
fn check_daemon_set(ds: &DaemonSet) {
    assert_eq!(label(ds, MANAGED_BY_LABEL), Some(MANAGED_BY));
    assert!(
        ds.metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.iter().any(|r| r.kind == "TopologyAwareScheduling")),
        "owned by the CR"
    );
    let pod = ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("tas-updater"));
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(UPDATER_IMAGE));
    let mounts = container.volume_mounts.as_ref().unwrap();
    assert_eq!(mounts.len(), 3);
    assert!(
        mounts.iter().all(|m| m.read_only == Some(true)),
        "{mounts:?}"
    );
    let terms = &pod
        .affinity
        .as_ref()
        .unwrap()
        .node_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    let keys: Vec<&str> = terms[0]
        .match_expressions
        .iter()
        .flatten()
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(keys, ["tas.dev/numa"]);
}

/// The scheduler: its config mounted read-only, non-root, no capabilities.
fn check_deployment(d: &Deployment) {
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let container = &pod.containers[0];
    assert_eq!(container.image.as_deref(), Some(SCHEDULER_IMAGE));
    let args = container.args.clone().unwrap();
    assert!(
        args.iter()
            .any(|a| a.starts_with(&format!("--config={SCHEDULER_CONFIG_DIR}/"))),
        "{args:?}"
    );
    let sc = container.security_context.as_ref().unwrap();
    assert_eq!(sc.run_as_non_root, Some(true));
    assert_eq!(sc.run_as_user, Some(SCHEDULER_UID));
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(
        sc.capabilities.as_ref().unwrap().drop.as_deref(),
        Some(&["ALL".to_owned()][..])
    );
    let mount = &container.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (mount.mount_path.as_str(), mount.read_only),
        (SCHEDULER_CONFIG_DIR, Some(true))
    );
}

/// Condition changes were recorded as Events on the CR.
async fn check_events(client: &Client) {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let list = events.list(&ListParams::default()).await.unwrap();
    let ours: Vec<&Event> = list
        .items
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("tas-operator"))
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some("TopologyAwareScheduling"))
        })
        .collect();
    assert!(
        ours.iter().any(|e| e
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("Available"))),
        "an Event for the Available change: {:?}",
        ours.iter().map(|e| &e.note).collect::<Vec<_>>()
    );
}

/// Someone deletes the agent DaemonSet and edits the scheduler: both are restored.
async fn drift(client: &Client, ns: &str) {
    let name = updater_daemonset_name(GROUP);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), ns);
    let old_uid = daemon_sets.get(&name).await.unwrap().metadata.uid;
    daemon_sets
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the deleted DaemonSet to be restored", TIMEOUT, || async {
        let ds = daemon_sets.get_opt(&name).await?;
        Ok::<_, kube::Error>(ds.filter(|d| d.metadata.uid != old_uid).map(|_| ()))
    })
    .await
    .unwrap();

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let before = deployments.get(SCHEDULER_DEPLOYMENT).await.unwrap();
    let args = before
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone();
    deployments
        .patch(
            SCHEDULER_DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Strategic(json!({ "spec": { "replicas": 3, "template": { "spec": {
                "containers": [{ "name": "scheduler", "args": ["--log-level=trace"] }],
            }}}})),
        )
        .await
        .unwrap();
    wait_for("the edited Deployment to be restored", TIMEOUT, || async {
        let d = deployments.get(SCHEDULER_DEPLOYMENT).await?;
        let spec = d.spec.unwrap_or_default();
        let restored = spec.replicas == Some(1)
            && spec.template.spec.map(|p| p.containers[0].args.clone()) == Some(args.clone());
        Ok::<_, kube::Error>(restored.then_some(()))
    })
    .await
    .unwrap();
    wait_condition(client, AVAILABLE, "True", None).await;
}
