//! The controller: which watches trigger a reconcile of the TopologyAwareScheduling
//! object, and the loop that runs it.
//!
//! ```text
//! TopologyAwareScheduling ── generation, finalizers, deletion ─────────────┐
//! DaemonSets, Deployments ── spec, labels, rollout counts   (owner refs) ──┤
//! ConfigMaps, ServiceAccounts, Services ── any edit         (owner refs) ──┤
//! (Cluster)Roles, (Cluster)RoleBindings ── any edit  (tas.dev/stack label) ─┼─► reconcile
//! updater Pods ── node, readiness                    (tas.dev/stack label) ─┤
//! Nodes ── labels; NRT objects ── has zones; NRT CRD ── spec, Established ─┘  (every stack)
//! ```
//!
//! Each watch passes only the changes its [`relevance`] hash sees (deletions always),
//! so an idle cluster — nodes heartbeating, agents running — triggers no reconcile.
//! Namespaced operands are watched in every namespace, by the operator's
//! `managed-by` label, because `spec.namespace` may change.

use crate::backoff::watcher_backoff;
use crate::context::{Config, Context, Stores};
use crate::desired::{MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL, STACK_LABEL, UPDATER_APP_NAME};
use crate::metrics::Metrics;
use crate::reconcile::{error_policy, reconcile};
use crate::telemetry::Otlp;
use crate::watches::{relevance, relevant_changes};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::TopologyAwareScheduling;

/// `reportingController` of the operator's Events.
pub const REPORTER: &str = "tas-operator";

/// Runs the controller until `shutdown` completes, then lets running reconciles finish.
///
/// Readiness (`metrics.is_ready()`) turns true once the watch caches are synced. Each
/// reconcile points `otlp` at the endpoint the object names.
pub async fn run_controller(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    otlp: Otlp,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let all = watcher::Config::default;

    let (stacks, stacks_w) = reflector::store();
    let (nodes, nodes_w) = reflector::store();
    let (nrts, nrts_w) = reflector::store();
    let (updater_pods, pods_w) = reflector::store();
    let (daemon_sets, ds_w) = reflector::store();
    let (deployments, deploy_w) = reflector::store();
    let (nrt_crd, crd_w) = reflector::store();

    let stack_changes = relevant_changes(
        watcher(Api::<TopologyAwareScheduling>::all(client.clone()), all())
            .default_backoff()
            .reflect(stacks_w),
        "TopologyAwareScheduling",
        relevance::stack,
    );
    let ds_changes = relevant_changes(
        watcher(Api::<DaemonSet>::all(client.clone()), managed.clone())
            .default_backoff()
            .reflect(ds_w),
        "DaemonSet",
        relevance::daemon_set,
    );
    let deploy_changes = relevant_changes(
        watcher(Api::<Deployment>::all(client.clone()), managed.clone())
            .default_backoff()
            .reflect(deploy_w),
        "Deployment",
        relevance::deployment,
    );
    let node_changes = relevant_changes(
        watcher(Api::<PartialObjectMeta<Node>>::all(client.clone()), all())
            .default_backoff()
            .reflect(nodes_w),
        "Node",
        relevance::labels,
    );
    // Until the operator installs the NRT CRD this watch fails with 404: retry it soon
    // (at most every 5 s) rather than after the default 30 s, so freshness shows up
    // right after the install.
    let nrt_changes = relevant_changes(
        watcher(Api::<NodeResourceTopology>::all(client.clone()), all())
            .backoff(watcher_backoff(
                Duration::from_millis(500),
                Duration::from_secs(5),
            ))
            .reflect(nrts_w),
        "NodeResourceTopology",
        relevance::nrt,
    );
    let pod_selector = format!("{NAME_LABEL}={UPDATER_APP_NAME},{MANAGED_BY_LABEL}={MANAGED_BY}");
    let pod_changes = relevant_changes(
        watcher(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(&pod_selector),
        )
        .default_backoff()
        .reflect(pods_w),
        "Pod",
        relevance::updater_pod,
    );
    let crd_changes = relevant_changes(
        watcher(
            Api::<CustomResourceDefinition>::all(client.clone()),
            watcher::Config::default().fields(&format!("metadata.name={}", tas_api::nrt::CRD_NAME)),
        )
        .default_backoff()
        .reflect(crd_w),
        "CustomResourceDefinition",
        relevance::crd,
    );

    let stores = Stores {
        stacks: stacks.clone(),
        nodes,
        nrts,
        updater_pods,
        daemon_sets,
        deployments,
        nrt_crd,
    };
    spawn_readiness(stores.clone(), metrics.clone());
    let reporter = Reporter {
        controller: REPORTER.to_owned(),
        instance: config.instance.clone(),
    };
    let debounce = config.debounce;
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        config,
        stores,
        metrics,
        otlp,
        backoffs: Default::default(),
    });

    Controller::for_stream(stack_changes, stacks.clone())
        .watches_stream(ds_changes, owning_stack)
        .watches_stream(deploy_changes, owning_stack)
        .watches_stream(revisions::<ConfigMap>(&client, &managed), owning_stack)
        .watches_stream(revisions::<ServiceAccount>(&client, &managed), owning_stack)
        .watches_stream(revisions::<Service>(&client, &managed), owning_stack)
        .watches_stream(revisions::<ClusterRole>(&client, &managed), by_stack_label)
        .watches_stream(
            revisions::<ClusterRoleBinding>(&client, &managed),
            by_stack_label,
        )
        .watches_stream(revisions::<Role>(&client, &managed), by_stack_label)
        .watches_stream(revisions::<RoleBinding>(&client, &managed), by_stack_label)
        .watches_stream(pod_changes, by_stack_label)
        .watches_stream(node_changes, every_stack(stacks.clone()))
        .watches_stream(nrt_changes, every_stack(stacks.clone()))
        .watches_stream(crd_changes, every_stack(stacks))
        .with_config(controller::Config::default().debounce(debounce))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::trace!(%object, "reconcile done"),
                Err(controller::Error::ObjectNotFound(object)) => {
                    tracing::debug!(%object, "triggered for an object that is gone")
                }
                // Logged with its context by the reconcile itself.
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => tracing::warn!(error = %e, "controller"),
            }
        })
        .await;
    tracing::info!("controller stopped");
}

/// Marks the operator ready once every cache is synced.
fn spawn_readiness(stores: Stores, metrics: Arc<Metrics>) {
    tokio::spawn(async move {
        if stores.synced().await.is_ok() {
            tracing::info!("caches synced; ready");
            metrics.set_ready();
        }
    });
}

/// Changes of a kind whose every revision counts (no status writers), labelled as
/// managed, in every namespace.
fn revisions<K>(
    client: &Client,
    managed: &watcher::Config,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    relevant_changes(
        watcher(Api::<K>::all(client.clone()), managed.clone()).default_backoff(),
        K::kind(&()).into_owned(),
        relevance::revision::<K>,
    )
}

/// The stack owning an operand, by its owner reference.
///
/// Not `Controller::owns`: it keys a request by the owner's name *and the child's
/// namespace*, which for a cluster-scoped owner names no object and differs from the
/// key of the object's own events, so one object could be reconciled twice at once.
fn owning_stack<K: Resource>(obj: K) -> Vec<ObjectRef<TopologyAwareScheduling>> {
    let api_version = TopologyAwareScheduling::api_version(&());
    let kind = TopologyAwareScheduling::kind(&());
    obj.owner_references()
        .iter()
        .filter(|o| o.api_version == api_version && o.kind == kind)
        .map(|o| ObjectRef::new(&o.name))
        .collect()
}

/// The stack an object belongs to, by its `tas.dev/stack` label.
fn by_stack_label<K: Resource>(obj: K) -> Option<ObjectRef<TopologyAwareScheduling>> {
    obj.labels()
        .get(STACK_LABEL)
        .map(|stack| ObjectRef::new(stack))
}

/// Every stack in the cache (there is at most one, `default`); nothing when there is
/// none, so a Node change without a TopologyAwareScheduling object costs nothing.
fn every_stack<K>(
    stacks: Store<TopologyAwareScheduling>,
) -> impl Fn(K) -> Vec<ObjectRef<TopologyAwareScheduling>> + Send + Sync + 'static {
    move |_| {
        stacks
            .state()
            .iter()
            .map(|s| ObjectRef::from_obj(s.as_ref()))
            .collect()
    }
}
