//! State from watches, never GETs: nodes, bound pods (for node usage, inter-pod
//! affinity, spread and foreign-pod detection), our pending pods (the queue, and their
//! `nominatedNodeName`), NodeResourceTopology objects (the cache; new objects count at
//! once, unlike the reference plugin), namespace labels (`namespaces.rs`) and
//! PodDisruptionBudgets (`budgets.rs`, for preemption).
//!
//! Each watch applies its events to [`Shared`] and signals the scheduling loop when an
//! event could help a waiting pod. A relist (`Init` … `InitDone`) replaces what the
//! watch had delivered, so objects deleted while disconnected are forgotten.

mod budgets;
mod namespaces;

use crate::cache::NrtUpdate;
use crate::shared::Shared;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

/// Start every watch; they run until the process ends.
pub fn spawn_all(client: &Client, shared: &Arc<Shared>) {
    tokio::spawn(watch_nodes(Api::all(client.clone()), shared.clone()));
    tokio::spawn(watch_bound_pods(Api::all(client.clone()), shared.clone()));
    tokio::spawn(watch_pending_pods(Api::all(client.clone()), shared.clone()));
    tokio::spawn(watch_topologies(Api::all(client.clone()), shared.clone()));
    tokio::spawn(namespaces::watch_namespaces(
        Api::all(client.clone()),
        shared.clone(),
    ));
    tokio::spawn(budgets::watch_budgets(
        Api::all(client.clone()),
        shared.clone(),
    ));
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The parts of a Node that matter for scheduling (heartbeats do not).
fn node_digest(node: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    if let Some(spec) = &node.spec {
        spec.unschedulable.hash(&mut h);
        for t in spec.taints.iter().flatten() {
            (&t.key, &t.value, &t.effect).hash(&mut h);
        }
    }
    if let Some(status) = &node.status {
        for (k, v) in status.allocatable.iter().flatten() {
            (k, &v.0).hash(&mut h);
        }
    }
    h.finish()
}

async fn watch_nodes(api: Api<Node>, shared: Arc<Shared>) {
    let mut digests: HashMap<String, u64> = HashMap::new();
    let mut relist: Option<HashSet<String>> = None;
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(node) | Event::InitApply(node))) => {
                let name = node.name_any();
                if let Some(seen) = relist.as_mut() {
                    seen.insert(name.clone());
                }
                let d = node_digest(&node);
                if digests.insert(name, d) != Some(d) {
                    if let Ok(mut s) = shared.state.write() {
                        s.upsert_node(&node);
                    }
                    shared.cluster_event();
                }
            }
            Ok(Some(Event::Delete(node))) => {
                let name = node.name_any();
                digests.remove(&name);
                if let Ok(mut s) = shared.state.write() {
                    s.remove_node(&name);
                }
            }
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take() {
                    digests.retain(|n, _| seen.contains(n));
                    if let Ok(mut s) = shared.state.write() {
                        s.retain_nodes(&seen);
                    }
                }
                shared.synced.nodes.store(true, Ordering::Release);
                shared.cluster_event();
            }
            Ok(None) => return,
            Err(e) => tracing::warn!(error = %e, "watching nodes"),
        }
    }
}

async fn watch_bound_pods(api: Api<Pod>, shared: Arc<Shared>) {
    let config = watcher::Config::default().fields("spec.nodeName!=");
    let mut relist: Option<HashSet<String>> = None;
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(pod) | Event::InitApply(pod))) => {
                let uid = pod.uid().unwrap_or_default();
                if let Some(seen) = relist.as_mut() {
                    seen.insert(uid.clone());
                }
                if let Ok(mut q) = shared.queue.lock() {
                    q.remove(&uid);
                }
                if let Ok(mut n) = shared.nominations.lock() {
                    n.remove(&uid);
                }
                if is_terminal(&pod) {
                    forget_pod(&shared, &pod, &uid);
                    continue;
                }
                if let Ok(mut s) = shared.state.write() {
                    s.upsert_bound_pod(&pod);
                }
                shared.cache.pod_bound(&pod, std::time::Instant::now());
                if let Ok(mut f) = shared.in_flight.lock() {
                    f.remove(&uid);
                }
            }
            Ok(Some(Event::Delete(pod))) => {
                let uid = pod.uid().unwrap_or_default();
                forget_pod(&shared, &pod, &uid);
            }
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take() {
                    let in_flight = shared
                        .in_flight
                        .lock()
                        .map(|f| f.clone())
                        .unwrap_or_default();
                    if let Ok(mut s) = shared.state.write() {
                        s.retain_pods(&seen, &in_flight);
                    }
                }
                shared.synced.bound_pods.store(true, Ordering::Release);
            }
            Ok(None) => return,
            Err(e) => tracing::warn!(error = %e, "watching bound pods"),
        }
    }
}

/// A bound pod is gone or finished: its resources are free again.
fn forget_pod(shared: &Shared, pod: &Pod, uid: &str) {
    if let Ok(mut s) = shared.state.write() {
        s.remove_pod(uid);
    }
    shared.cache.pod_deleted(pod, std::time::Instant::now());
    shared.cluster_event();
}

async fn watch_pending_pods(api: Api<Pod>, shared: Arc<Shared>) {
    let fields = format!(
        "spec.schedulerName={},spec.nodeName=",
        shared.settings.scheduler_name
    );
    let config = watcher::Config::default().fields(&fields);
    let mut relist: Option<HashSet<String>> = None;
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(pod) | Event::InitApply(pod))) => {
                let uid = pod.uid().unwrap_or_default();
                if let Some(seen) = relist.as_mut() {
                    seen.insert(uid.clone());
                }
                if is_terminal(&pod) || pod.metadata.deletion_timestamp.is_some() {
                    remove_pending(&shared, &uid);
                    continue;
                }
                let queued = crate::queue::QueuedPod {
                    uid: uid.clone(),
                    key: format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
                    priority: pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
                    created: pod
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map_or(0, |t| t.0.as_second()),
                };
                restore_nomination(&shared, &pod, &uid);
                if let Ok(mut p) = shared.pending.write() {
                    p.insert(uid.clone(), Arc::new(pod));
                }
                if !shared.is_in_flight(&uid)
                    && let Ok(mut q) = shared.queue.lock()
                {
                    q.add(queued);
                    shared.metrics.queue_depth.set(q.len() as i64);
                }
                shared.wake.notify_one();
            }
            Ok(Some(Event::Delete(pod))) => remove_pending(&shared, &pod.uid().unwrap_or_default()),
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take() {
                    let gone: Vec<String> = shared
                        .pending
                        .read()
                        .map(|p| p.keys().filter(|u| !seen.contains(*u)).cloned().collect())
                        .unwrap_or_default();
                    for uid in gone {
                        remove_pending(&shared, &uid);
                    }
                }
                shared.synced.pending_pods.store(true, Ordering::Release);
                shared.wake.notify_one();
            }
            Ok(None) => return,
            Err(e) => tracing::warn!(error = %e, "watching pending pods"),
        }
    }
}

/// A pending pod nominated to a node (by an earlier run of this scheduler) holds its
/// room there too: its nomination is recorded without victims, so it waits for the
/// node's NRT to change before preempting again.
fn restore_nomination(shared: &Shared, pod: &Pod, uid: &str) {
    let Some(node) = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.clone())
        .filter(|n| !n.is_empty())
    else {
        return;
    };
    let Ok(mut n) = shared.nominations.lock() else {
        return;
    };
    if n.contains(uid) {
        return;
    }
    match crate::filter::PodUsage::from_pod(pod) {
        Ok(usage) => n.insert(
            uid,
            crate::preempt::Nomination {
                node,
                usage,
                victims: Vec::new(),
                since: std::time::Instant::now(),
                victims_gone_at: None,
            },
        ),
        Err(e) => tracing::debug!(pod = %uid, error = %e, "nomination not restored"),
    }
}

fn remove_pending(shared: &Shared, uid: &str) {
    if let Ok(mut p) = shared.pending.write() {
        p.remove(uid);
    }
    if let Ok(mut n) = shared.nominations.lock() {
        n.remove(uid);
    }
    if let Ok(mut q) = shared.queue.lock() {
        q.remove(uid);
        shared.metrics.queue_depth.set(q.len() as i64);
    }
}

async fn watch_topologies(api: Api<NodeResourceTopology>, shared: Arc<Shared>) {
    let mut relist: Option<HashSet<String>> = None;
    let mut known: HashSet<String> = HashSet::new();
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(Event::Init)) => relist = Some(HashSet::new()),
            Ok(Some(Event::Apply(nrt) | Event::InitApply(nrt))) => {
                let name = nrt.name_any();
                if let Some(seen) = relist.as_mut() {
                    seen.insert(name.clone());
                }
                known.insert(name.clone());
                // Judge the object itself, not the cache's view: on a node with
                // reservations the cache holds new objects back until a resync, and a
                // broken one must be reported when it arrives.
                if let Err(reason) = crate::numa::NodeTopology::from_nrt(&nrt) {
                    tracing::warn!(node = %name, error = %reason, "unusable NodeResourceTopology: node skipped");
                    shared.events.invalid_topology(&name, &reason.to_string());
                }
                let update = shared.cache.update_nrt(nrt);
                if matches!(update, NrtUpdate::Added | NrtUpdate::Replaced) {
                    shared.topology_accepted(&name);
                }
                shared.cluster_event();
            }
            Ok(Some(Event::Delete(nrt))) => {
                let name = nrt.name_any();
                known.remove(&name);
                if let Ok(mut t) = shared.nrt_updated.lock() {
                    t.remove(&name);
                }
                shared.cache.delete_nrt(&name);
            }
            Ok(Some(Event::InitDone)) => {
                if let Some(seen) = relist.take() {
                    for gone in known.difference(&seen) {
                        shared.cache.delete_nrt(gone);
                    }
                    known = seen;
                }
                shared.synced.topologies.store(true, Ordering::Release);
                shared.cluster_event();
            }
            Ok(None) => return,
            Err(e) => {
                // Without the NRT CRD there is nothing to wait for: every node is then
                // "without topology", and the watch keeps retrying in the background.
                if crd_missing(&e) && !shared.synced.topologies.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        "the NodeResourceTopology CRD is not installed: scheduling without NUMA data until it is"
                    );
                    shared.wake.notify_one();
                }
                tracing::debug!(error = %e, "watching NodeResourceTopology objects");
            }
        }
    }
}

fn crd_missing(e: &watcher::Error) -> bool {
    matches!(
        e,
        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchFailed(kube::Error::Api(s))
            if s.code == 404
    )
}
