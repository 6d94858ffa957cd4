//! The operator's watches: which changes trigger a reconcile of the
//! TopologyAwareScheduling object, and the caches a reconcile reads instead of listing.
//!
//! ```text
//! TopologyAwareScheduling ── generation, finalizers, deletion ─────────────┐
//! DaemonSets, Deployments ── spec, labels, rollout counts   (owner refs) ──┤
//! ConfigMaps, ServiceAccounts, Services,                               ──┤
//!   NetworkPolicies ── any edit                           (owner refs) ──┤
//! (Cluster)Roles, (Cluster)RoleBindings ── any edit  (tas.dev/stack label) ─┼─► reconcile
//! updater Pods ── node, readiness                    (tas.dev/stack label) ─┤
//! Nodes ── labels; NRT objects ── has zones; NRT CRD ── spec, Established ─┘  (every stack)
//! ```
//!
//! Each watch is `watcher(kind, selector) ─► backoff ─► reflect into a Store (when a
//! reconcile reads the kind) ─► relevant_changes` ([`filter`]): only the changes its
//! [`relevance`] hash sees pass (deletions always), so an idle cluster — nodes
//! heartbeating, agents running — triggers no reconcile. Namespaced operands are watched
//! in every namespace, by the operator's `managed-by` label, because `spec.namespace`
//! may change.

mod filter;
pub mod relevance;

pub use filter::relevant_changes;

use crate::backoff::watcher_backoff;
use crate::context::Stores;
use crate::desired::{MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL, STACK_LABEL, UPDATER_APP_NAME};
use futures::Stream;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::core::PartialObjectMeta;
use kube::runtime::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::time::Duration;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::TopologyAwareScheduling;

/// Every watch, wired into a controller of the TopologyAwareScheduling object, and the
/// caches they fill. Nothing runs until the controller does.
pub fn controller(client: &Client) -> (Controller<TopologyAwareScheduling>, Stores) {
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let all = watcher::Config::default;

    let (stacks, stacks_w) = reflector::store();
    let (nodes, nodes_w) = reflector::store();
    let (nrts, nrts_w) = reflector::store();
    let (updater_pods, pods_w) = reflector::store();
    let (daemon_sets, ds_w) = reflector::store();
    let (deployments, deploy_w) = reflector::store();
    let (nrt_crd, crd_w) = reflector::store();

    let stack_changes = cached(client, all(), stacks_w, relevance::stack);
    let ds_changes = cached(client, managed.clone(), ds_w, relevance::daemon_set);
    let deploy_changes = cached(client, managed.clone(), deploy_w, relevance::deployment);
    let node_changes = cached::<PartialObjectMeta<Node>>(client, all(), nodes_w, relevance::labels);
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
    let pod_changes = cached(
        client,
        watcher::Config::default().labels(&pod_selector),
        pods_w,
        relevance::updater_pod,
    );
    let crd_changes = cached(
        client,
        watcher::Config::default().fields(&format!("metadata.name={}", tas_api::nrt::CRD_NAME)),
        crd_w,
        relevance::crd,
    );

    let controller = Controller::for_stream(stack_changes, stacks.clone())
        .watches_stream(ds_changes, owning_stack)
        .watches_stream(deploy_changes, owning_stack)
        .watches_stream(revisions::<ConfigMap>(client, &managed), owning_stack)
        .watches_stream(revisions::<ServiceAccount>(client, &managed), owning_stack)
        .watches_stream(revisions::<Service>(client, &managed), owning_stack)
        .watches_stream(revisions::<NetworkPolicy>(client, &managed), owning_stack)
        .watches_stream(revisions::<ClusterRole>(client, &managed), by_stack_label)
        .watches_stream(
            revisions::<ClusterRoleBinding>(client, &managed),
            by_stack_label,
        )
        .watches_stream(revisions::<Role>(client, &managed), by_stack_label)
        .watches_stream(revisions::<RoleBinding>(client, &managed), by_stack_label)
        .watches_stream(pod_changes, by_stack_label)
        .watches_stream(node_changes, every_stack(stacks.clone()))
        .watches_stream(nrt_changes, every_stack(stacks.clone()))
        .watches_stream(crd_changes, every_stack(stacks.clone()));
    let stores = Stores {
        stacks,
        nodes,
        nrts,
        updater_pods,
        daemon_sets,
        deployments,
        nrt_crd,
    };
    (controller, stores)
}

/// Relevant changes of the `K` objects `config` selects, with the default backoff, also
/// kept in `writer`'s cache.
fn cached<K>(
    client: &Client,
    config: watcher::Config,
    writer: Writer<K>,
    relevant: impl Fn(&K) -> u64 + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    relevant_changes(
        watcher(Api::<K>::all(client.clone()), config)
            .default_backoff()
            .reflect(writer),
        K::kind(&()).into_owned(),
        relevant,
    )
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
