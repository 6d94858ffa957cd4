//! More [`Env`] helpers for the inter-pod affinity, topology spread and preemption
//! tests: labelled nodes, pods written as JSON, PriorityClasses.

use crate::{Env, GROUP, TIMEOUT};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use tas_testcluster::{FakeNode, create_fake_node, unique_name};

impl Env {
    /// A kwok node of this env's group with `cpu` allocatable and `labels`.
    pub async fn node_with_labels(&self, cpu: u32, labels: &[(&str, &str)]) -> String {
        let name = unique_name(&self.group);
        let mut node = FakeNode {
            cpu: cpu.to_string(),
            ..FakeNode::new(name.clone())
        }
        .label(GROUP, self.group.clone());
        for (k, v) in labels {
            node = node.label(*k, *v);
        }
        create_fake_node(&self.client, &node).await.expect("node");
        tas_testcluster::wait_node_schedulable(&self.client, &name, TIMEOUT)
            .await
            .expect("node schedulable");
        name
    }

    /// Creates pod `name` with `labels` and `spec` (merged over one 100m container),
    /// for this env's scheduler and nodes.
    pub async fn create_pod(&self, name: &str, labels: Value, spec: Value) {
        let mut s = json!({
            "schedulerName": self.scheduler,
            "nodeSelector": {GROUP: self.group},
            "containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": "100m"}}}]
        });
        if let (Some(s), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
            s.extend(extra.clone());
        }
        self.create_raw_pod(json!({"metadata": {"name": name, "labels": labels}, "spec": s}))
            .await;
    }

    /// Creates a pod from JSON as it is, in this env's namespace.
    pub async fn create_raw_pod(&self, pod: Value) {
        let pod: Pod = serde_json::from_value(pod).expect("pod");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        api.create(&PostParams::default(), &pod)
            .await
            .expect("pod created");
    }

    /// Every pod of the namespace: (name, node, terminating).
    pub async fn pods(&self) -> Vec<(String, Option<String>, bool)> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        api.list(&ListParams::default())
            .await
            .expect("pods listed")
            .items
            .into_iter()
            .map(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                let terminating = p.metadata.deletion_timestamp.is_some();
                (p.name_any(), node, terminating)
            })
            .collect()
    }

    /// Waits until `names` are all bound; returns their nodes in order.
    pub async fn wait_all_bound(&self, names: &[String]) -> Vec<String> {
        let mut nodes = Vec::new();
        for n in names {
            nodes.push(self.wait_bound(n).await);
        }
        nodes
    }

    /// Creates a PriorityClass with a unique name; returns the name.
    pub async fn priority_class(&self, prefix: &str, value: i32) -> String {
        let name = unique_name(prefix);
        let pc: PriorityClass = serde_json::from_value(json!({
            "metadata": {"name": name}, "value": value
        }))
        .expect("priority class");
        let api: Api<PriorityClass> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &pc)
            .await
            .expect("priority class created");
        name
    }

    /// The first FailedScheduling message of `pod`.
    pub async fn failed_scheduling(&self, pod: &str) -> String {
        self.wait_event(pod, "FailedScheduling").await
    }

    /// The message of the first Event with `reason` about `pod`, once there is one.
    pub async fn wait_event(&self, pod: &str, reason: &str) -> String {
        tas_testcluster::wait_event_note(&self.client, &self.ns, pod, reason, TIMEOUT)
            .await
            .expect("event")
    }
}
