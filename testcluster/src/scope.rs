//! One scheduling test's slice of the shared cluster: its own namespace, its own
//! labelled kwok nodes (a "group"), a unique scheduler name, Guaranteed pods pinned to
//! the group's nodes, and their NodeResourceTopology objects.
//!
//! The pods and NRT objects are built by pure functions ([`guaranteed_pod`],
//! [`nrt_object`]); [`Scope`]'s methods create or apply them.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::{
    Error, FakeNode, TestCluster, apply_crds_from_dir, crd_dir, create_fake_node, unique_name,
    unique_namespace, wait_for, wait_node_schedulable,
};

/// A test's namespace, node group and scheduler name on the shared cluster, with the
/// project's CRDs applied.
pub struct Scope {
    /// The shared cluster.
    pub cluster: &'static TestCluster,
    /// The admin's client.
    pub client: Client,
    /// The test's namespace.
    pub ns: String,
    /// The value of the group label on the test's nodes, which its pods select.
    pub group: String,
    /// A unique scheduler name for the test's scheduler.
    pub scheduler: String,
    /// The test's in-process component, aborted when the scope is dropped.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Scope {
    /// Starts (or joins) the shared cluster, applies the CRDs and makes a namespace, a
    /// group and a scheduler name, all from `prefix`.
    pub async fn new(prefix: &str) -> Result<Self, Error> {
        let cluster = TestCluster::shared()?;
        let client = cluster.client().await?;
        apply_crds_from_dir(&client, &crd_dir()).await?;
        let ns = unique_namespace(&client, prefix).await?;
        Ok(Self {
            cluster,
            client,
            ns,
            group: unique_name(prefix),
            scheduler: unique_name("tas"),
            task: None,
        })
    }

    /// Runs `component` (say an in-process scheduler) until this scope is dropped,
    /// replacing (and aborting) the one it ran before.
    pub fn spawn<F>(&mut self, component: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        if let Some(previous) = self.task.replace(tokio::spawn(component)) {
            previous.abort();
        }
    }

    /// A new kwok node with `cpu` allocatable and the label `group_label` = this
    /// scope's group, once it can take pods; its name.
    pub async fn node(
        &self,
        group_label: &str,
        cpu: u32,
        timeout: Duration,
    ) -> Result<String, Error> {
        let name = unique_name(&self.group);
        let node = FakeNode {
            cpu: cpu.to_string(),
            ..FakeNode::new(name.clone())
        }
        .label(group_label, self.group.clone());
        create_fake_node(&self.client, &node).await?;
        wait_node_schedulable(&self.client, &name, timeout).await?;
        Ok(name)
    }

    /// Creates a Guaranteed pod ([`guaranteed_pod`]) with a unique name in this scope's
    /// namespace, for `scheduler`, on this scope's group of nodes; its name.
    pub async fn create_guaranteed_pod(
        &self,
        group_label: &str,
        scheduler: &str,
        cpu: u32,
        memory: &str,
    ) -> Result<String, Error> {
        let name = unique_name("g");
        let pod = guaranteed_pod(&name, scheduler, (group_label, &self.group), cpu, memory);
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &pod)
            .await?;
        Ok(name)
    }

    /// Waits until `pod` of this scope's namespace is bound; its node.
    pub async fn wait_bound(&self, pod: &str, timeout: Duration) -> Result<String, Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        wait_for(format!("{pod} bound"), timeout, || async {
            Ok::<_, kube::Error>(api.get(pod).await?.spec.and_then(|s| s.node_name))
        })
        .await
    }

    /// Server-side applies (forced, field manager `test`) an NRT object such as
    /// [`nrt_object`] builds.
    pub async fn apply_nrt(&self, object: &Value) -> Result<(), Error> {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        Api::<DynamicObject>::all_with(self.client.clone(), &nrt_resource())
            .patch(
                name,
                &PatchParams::apply("test").force(),
                &Patch::Apply(object),
            )
            .await?;
        Ok(())
    }
}

/// The `topology.node.k8s.io/v1alpha2` NodeResourceTopology resource.
pub fn nrt_resource() -> ApiResource {
    ApiResource {
        group: "topology.node.k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "topology.node.k8s.io/v1alpha2".into(),
        kind: "NodeResourceTopology".into(),
        plural: "noderesourcetopologies".into(),
    }
}

/// A Guaranteed pod `name` of `cpu` whole CPUs and `memory` (one container `app`), for
/// `scheduler`, selecting the nodes labelled `group_label` = `group`.
pub fn guaranteed_pod(
    name: &str,
    scheduler: &str,
    (group_label, group): (&str, &str),
    cpu: u32,
    memory: &str,
) -> Pod {
    let amounts = BTreeMap::from([
        ("cpu".to_owned(), Quantity(cpu.to_string())),
        ("memory".to_owned(), Quantity(memory.to_owned())),
    ]);
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.to_owned()),
            node_selector: Some(BTreeMap::from([(group_label.to_owned(), group.to_owned())])),
            containers: vec![Container {
                name: "app".into(),
                image: Some("app".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(amounts.clone()),
                    limits: Some(amounts),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// The NodeResourceTopology of `node` under topology manager `policy` (`container`
/// scope): `zones[i]` = (allocatable CPUs, available CPUs) of zone `node-<i>`, each
/// with `memory` allocatable and available, and the pod fingerprint (method `all`)
/// when given.
pub fn nrt_object(
    node: &str,
    policy: &str,
    zones: &[(u32, u32)],
    memory: &str,
    fingerprint: Option<&str>,
) -> Value {
    let mut attrs = vec![
        json!({"name": "topologyManagerPolicy", "value": policy}),
        json!({"name": "topologyManagerScope", "value": "container"}),
    ];
    if let Some(fp) = fingerprint {
        attrs.push(json!({"name": "nodeTopologyPodsFingerprint", "value": fp}));
        attrs.push(json!({"name": "nodeTopologyPodsFingerprintMethod", "value": "all"}));
    }
    let zones: Vec<Value> = zones
        .iter()
        .enumerate()
        .map(|(i, (alloc, avail))| {
            json!({"name": format!("node-{i}"), "type": "Node", "resources": [
                {"name": "cpu", "capacity": alloc.to_string(), "allocatable": alloc.to_string(), "available": avail.to_string()},
                {"name": "memory", "capacity": memory, "allocatable": memory, "available": memory}
            ]})
        })
        .collect();
    json!({
        "apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
        "metadata": {"name": node}, "attributes": attrs, "zones": zones
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guaranteed_pod_requests_what_it_limits_and_selects_its_group() {
        let pod = guaranteed_pod("p", "tas-1", ("g.test/group", "g1"), 3, "1Gi");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some("tas-1"));
        assert_eq!(spec.node_selector.unwrap()["g.test/group"], "g1");
        let resources = spec.containers[0].resources.clone().unwrap();
        assert_eq!(resources.requests, resources.limits);
        assert_eq!(resources.requests.unwrap()["cpu"].0, "3");
    }

    #[test]
    fn an_nrt_lists_its_zones_and_the_fingerprint_when_given() {
        let nrt = nrt_object("n", "restricted", &[(8, 4), (8, 6)], "1Gi", Some("fp"));
        assert_eq!(nrt["zones"][1]["name"], "node-1");
        assert_eq!(nrt["zones"][1]["resources"][0]["available"], "6");
        assert_eq!(nrt["zones"][0]["resources"][1]["allocatable"], "1Gi");
        assert_eq!(nrt["attributes"].as_array().unwrap().len(), 4);
        let bare = nrt_object("n", "restricted", &[(8, 4)], "16Gi", None);
        assert_eq!(bare["attributes"].as_array().unwrap().len(), 2);
    }
}
