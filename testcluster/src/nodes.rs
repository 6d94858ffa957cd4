//! Fake nodes: plain Node objects that kwok keeps Ready in place of a kubelet.
//!
//! A node is created with its capacity (= allocatable) already in its status; kwok's
//! `node-initialize` stage (see `testcluster/kwok/stages.yaml`) keeps those values and adds
//! the conditions, addresses and node info a kubelet would report.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::{Error, wait_for};

/// Annotation kwok is started to manage nodes by (`--manage-nodes-with-annotation-selector`).
pub const KWOK_NODE_ANNOTATION: (&str, &str) = ("kwok.x-k8s.io/node", "fake");
/// Label every fake node carries.
pub const KWOK_NODE_LABEL: (&str, &str) = ("type", "kwok");

/// A fake node to create. Quantities are Kubernetes quantity strings (`"32"`,
/// `"64Gi"`); capacity and allocatable are both set to them.
#[derive(Debug, Clone)]
pub struct FakeNode {
    /// Node name; also its `kubernetes.io/hostname` label.
    pub name: String,
    /// `cpu`.
    pub cpu: String,
    /// `memory`.
    pub memory: String,
    /// `hugepages-2Mi`, if any.
    pub hugepages_2mi: Option<String>,
    /// `hugepages-1Gi`, if any.
    pub hugepages_1gi: Option<String>,
    /// Further resources, e.g. `vendor.com/nic` → `"4"`.
    pub extended: BTreeMap<String, String>,
    /// Labels besides the standard ones (`type: kwok`, hostname, os, arch).
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `pods`: how many pods fit.
    pub pods: u32,
}

impl FakeNode {
    /// A node with 8 CPUs, 32 GiB of memory, room for 110 pods and nothing else.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            cpu: "8".into(),
            memory: "32Gi".into(),
            hugepages_2mi: None,
            hugepages_1gi: None,
            extended: BTreeMap::new(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            pods: 110,
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The Node object.
    pub fn to_node(&self) -> Node {
        let mut resources = BTreeMap::from([
            ("cpu".to_string(), self.cpu.clone()),
            ("memory".to_string(), self.memory.clone()),
            ("pods".to_string(), self.pods.to_string()),
        ]);
        let hugepages = [
            ("hugepages-2Mi", &self.hugepages_2mi),
            ("hugepages-1Gi", &self.hugepages_1gi),
        ];
        for (name, amount) in hugepages {
            if let Some(amount) = amount {
                resources.insert(name.to_string(), amount.clone());
            }
        }
        resources.extend(self.extended.clone());
        let resources: BTreeMap<String, Quantity> = resources
            .into_iter()
            .map(|(k, v)| (k, Quantity(v)))
            .collect();

        let mut labels = BTreeMap::from([
            (KWOK_NODE_LABEL.0.to_string(), KWOK_NODE_LABEL.1.to_string()),
            ("kubernetes.io/hostname".to_string(), self.name.clone()),
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        ]);
        labels.extend(self.labels.clone());
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    KWOK_NODE_ANNOTATION.0.to_string(),
                    KWOK_NODE_ANNOTATION.1.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                taints: (!self.taints.is_empty()).then(|| self.taints.clone()),
                ..NodeSpec::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(resources.clone()),
                allocatable: Some(resources),
                ..NodeStatus::default()
            }),
        }
    }
}

/// Creates the node (status included: a Node's status may be set on creation, as the
/// kubelet does when it registers).
pub async fn create_fake_node(client: &Client, node: &FakeNode) -> Result<Node, Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    Ok(nodes
        .create(&PostParams::default(), &node.to_node())
        .await?)
}

/// Waits until kwok has marked node `name` Ready.
pub async fn wait_node_ready(client: &Client, name: &str, timeout: Duration) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for(format!("node {name} to be Ready"), timeout, || async {
        let node = nodes.get(name).await?;
        Ok::<_, kube::Error>(is_ready(&node).then_some(()))
    })
    .await
}

/// Whether the Node's `Ready` condition is `True`.
pub(crate) fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// Waits until node `name` can take pods: Ready (kwok) and without the
/// `node.kubernetes.io/*` taints the node lifecycle controller removes shortly after.
pub async fn wait_node_schedulable(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    wait_node_ready(client, name, timeout).await?;
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for(
        format!("node {name} to lose its not-ready taints"),
        timeout,
        || async {
            let node = nodes.get(name).await?;
            let tainted = node
                .spec
                .and_then(|s| s.taints)
                .is_some_and(|t| t.iter().any(|t| t.key.starts_with("node.kubernetes.io/")));
            Ok::<_, kube::Error>((!tainted).then_some(()))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_carries_kwok_markers_and_resources() {
        let mut fake = FakeNode::new("n1").label("zone", "a");
        fake.hugepages_2mi = Some("1Gi".into());
        fake.extended.insert("vendor.com/nic".into(), "4".into());
        let node = fake.to_node();
        let meta = &node.metadata;
        assert_eq!(
            meta.annotations.as_ref().unwrap()["kwok.x-k8s.io/node"],
            "fake"
        );
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["type"], "kwok");
        assert_eq!(labels["zone"], "a");
        let status = node.status.unwrap();
        assert_eq!(status.capacity, status.allocatable);
        let capacity = status.capacity.unwrap();
        assert_eq!(capacity["hugepages-2Mi"].0, "1Gi");
        assert_eq!(capacity["vendor.com/nic"].0, "4");
        assert!(!capacity.contains_key("hugepages-1Gi"));
    }
}
