//! Pods: bound pods (node usage, inter-pod affinity, spread, foreign-pod detection) and
//! our pending pods (the queue, and their `nominatedNodeName`), from two watches with
//! disjoint field selectors.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::relist::Index;
use crate::shared::Shared;

/// Pods bound to a node (`spec.nodeName!=`), by uid, in the cluster state and the
/// reserve cache.
pub(super) struct BoundPodWatch(pub(super) Arc<Shared>);

impl Index for BoundPodWatch {
    type Object = Pod;
    type Key = String;
    const WHAT: &'static str = "bound pods";

    fn key(pod: &Pod) -> String {
        pod.uid().unwrap_or_default()
    }

    fn apply(&mut self, uid: String, pod: Pod) {
        let shared = &self.0;
        shared.queue.lock().remove(&uid);
        shared.nominations.lock().remove(&uid);
        if is_terminal(&pod) {
            forget_pod(shared, &pod, &uid);
            return;
        }
        shared.state.write().upsert_bound_pod(&pod);
        shared.cache.pod_bound(&pod, std::time::Instant::now());
        shared.in_flight.lock().remove(&uid);
    }

    fn delete(&mut self, uid: String, pod: Pod) {
        forget_pod(&self.0, &pod, &uid);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        let in_flight = self.0.in_flight.lock().clone();
        self.0.state.write().retain_pods(&seen, &in_flight);
        // The reserve cache forgets them too, or their nodes' fingerprints never match
        // again (and their reservations are never released) until a forced resync.
        let forgotten = self.0.cache.retain_pods(
            |uid| seen.contains(uid) || in_flight.contains(uid),
            std::time::Instant::now(),
        );
        if forgotten > 0 {
            self.0.cluster_event();
        }
    }

    fn synced(&mut self) {
        self.0.synced.bound_pods.store(true, Ordering::Release);
    }
}

/// Our pods not bound yet (`spec.schedulerName=<ours>,spec.nodeName=`), by uid, in the
/// pending map and the scheduling queue.
pub(super) struct PendingPodWatch(pub(super) Arc<Shared>);

impl Index for PendingPodWatch {
    type Object = Pod;
    type Key = String;
    const WHAT: &'static str = "pending pods";

    fn key(pod: &Pod) -> String {
        pod.uid().unwrap_or_default()
    }

    fn apply(&mut self, uid: String, pod: Pod) {
        let shared = &self.0;
        if is_terminal(&pod) || pod.metadata.deletion_timestamp.is_some() {
            remove_pending(shared, &uid);
            return;
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
        restore_nomination(shared, &pod, &uid);
        shared.pending.write().insert(uid.clone(), Arc::new(pod));
        if !shared.is_in_flight(&uid) {
            let mut q = shared.queue.lock();
            q.add(queued);
            shared.metrics.queue_depth.set(q.len() as i64);
        }
        shared.wake.notify_one();
    }

    fn delete(&mut self, uid: String, _: Pod) {
        remove_pending(&self.0, &uid);
    }

    fn retain(&mut self, seen: HashSet<String>) {
        let gone: Vec<String> = self
            .0
            .pending
            .read()
            .keys()
            .filter(|u| !seen.contains(*u))
            .cloned()
            .collect();
        for uid in gone {
            remove_pending(&self.0, &uid);
        }
    }

    fn synced(&mut self) {
        self.0.synced.pending_pods.store(true, Ordering::Release);
        self.0.wake.notify_one();
    }
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A bound pod is gone or finished: its resources are free again.
fn forget_pod(shared: &Shared, pod: &Pod, uid: &str) {
    shared.state.write().remove_pod(uid);
    shared.cache.pod_deleted(pod, std::time::Instant::now());
    // Devices still in flight for a pod that ended: its claims' allocations, if they
    // landed, are counted from the claims (and released by the ResourceClaim
    // controller); none will land any more.
    shared.dra.write().release(uid);
    shared.cluster_event();
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
    let mut n = shared.nominations.lock();
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
    shared.pending.write().remove(uid);
    shared.nominations.lock().remove(uid);
    {
        let mut q = shared.queue.lock();
        q.remove(uid);
        shared.metrics.queue_depth.set(q.len() as i64);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn shared() -> Arc<Shared> {
        crate::test_support::shared()
    }

    fn bound(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("ns".to_owned()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: Some("worker-1".to_owned()),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[tokio::test]
    async fn a_relist_removes_vanished_pods_from_the_state_and_the_reserve_cache() {
        let shared = shared();
        let mut watch = BoundPodWatch(shared.clone());
        for name in ["kept", "vanished"] {
            watch.apply(format!("uid-{name}"), bound(name));
        }
        assert_eq!(shared.cache.status("worker-1").map(|s| s.pods), Some(2));

        watch.retain(HashSet::from(["uid-kept".to_owned()]));

        assert_eq!(shared.cache.status("worker-1").map(|s| s.pods), Some(1));
        let state = shared.state.read();
        assert_eq!(state.node_of("uid-kept"), Some("worker-1"));
        assert_eq!(state.node_of("uid-vanished"), None);
    }
}
