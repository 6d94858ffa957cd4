//! The bind-only ceiling: a "scheduler" that makes no decision at all. Pods handed to
//! it are bound round-robin over the nodes through `pods/binding`, many at a time, so
//! its throughput is what this API server (with everything else the benchmark runs)
//! can bind, the upper bound for any real scheduler here. It ignores NUMA, and even
//! node capacity, so its placements are not meant to be admitted.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// What the binder did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BindStats {
    /// Successful binds.
    pub bound: usize,
    /// Failed binds.
    pub errors: usize,
}

/// The running binder.
pub struct Binder {
    pods: mpsc::UnboundedSender<String>,
    task: tokio::task::JoinHandle<BindStats>,
}

impl Binder {
    /// Starts binding pods of `namespace` onto `nodes`, at most `concurrency` binds in
    /// flight.
    pub fn start(client: &Client, namespace: &str, nodes: Vec<String>, concurrency: usize) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let (pods, queue) = mpsc::unbounded_channel();
        let task = tokio::spawn(bind_loop(api, nodes, concurrency.max(1), queue));
        Self { pods, task }
    }

    /// Queues pod `name` (pending, of this binder's scheduler name) for binding.
    pub fn submit(&self, name: String) {
        let _ = self.pods.send(name);
    }

    /// Finishes the binds in flight and returns the counts.
    pub async fn stop(self) -> BindStats {
        drop(self.pods);
        self.task.await.unwrap_or_default()
    }
}

/// The Binding of pod `pod` to node `node`.
pub fn binding(pod: &str, node: &str) -> Binding {
    Binding {
        metadata: ObjectMeta {
            name: Some(pod.to_string()),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..ObjectReference::default()
        },
    }
}

async fn bind_loop(
    api: Api<Pod>,
    nodes: Vec<String>,
    concurrency: usize,
    mut queue: mpsc::UnboundedReceiver<String>,
) -> BindStats {
    let mut stats = BindStats::default();
    let mut binds = JoinSet::new();
    let count = |stats: &mut BindStats, done: Result<bool, _>| match done {
        Ok(true) => stats.bound += 1,
        _ => stats.errors += 1,
    };
    let mut next = 0;
    while let Some(pod) = queue.recv().await {
        while binds.len() >= concurrency {
            if let Some(done) = binds.join_next().await {
                count(&mut stats, done);
            }
        }
        let Some(node) = nodes.get(next % nodes.len().max(1)).cloned() else {
            stats.errors += 1;
            continue;
        };
        next += 1;
        let api = api.clone();
        binds.spawn(async move {
            let body = binding(&pod, &node);
            api.create_subresource::<_, serde_json::Value>(
                "binding",
                &pod,
                &PostParams::default(),
                &body,
            )
            .await
            .is_ok()
        });
    }
    while let Some(done) = binds.join_next().await {
        count(&mut stats, done);
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_targets_the_node() {
        let value = serde_json::to_value(binding("p-1", "n-7")).unwrap();
        assert_eq!(value["metadata"]["name"], "p-1");
        assert_eq!(value["target"]["kind"], "Node");
        assert_eq!(value["target"]["name"], "n-7");
    }
}
