//! NodeResourceTopology `v1alpha1`, still served for older writers and readers.
//!
//! Differs from [`v1alpha2`] only at the top level: no `attributes`, and
//! `topologyPolicies` required. Zones, costs, zone attributes and resources have the same
//! wire shape (and the same schema in [`super::crd()`]) in both versions, so they are the
//! `v1alpha2` types, re-exported here. Readers convert with
//! `v1alpha2::NodeResourceTopology::from(v1alpha1_object)`, which loses nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize, Serializer};

use super::{null_as_default, v1alpha2};

pub use super::v1alpha2::{AttributeInfo, CostInfo, ResourceInfo, Zone};

/// The version name.
pub const VERSION: &str = "v1alpha1";
/// The `apiVersion` of objects of this version.
pub const API_VERSION: &str = "topology.node.k8s.io/v1alpha1";

/// Resources of one node per NUMA zone. Cluster-scoped; named after its node.
///
/// Kept apart from [`v1alpha2::NodeResourceTopology`] because the shapes differ: no
/// `attributes`, and `topologyPolicies` is written even when empty (the schema of this
/// version requires it).
///
/// Serialises with `apiVersion` and `kind` set; ignores them on read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourceTopology {
    /// Standard object metadata; `name` is the node name.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Topology Manager policy names (`SingleNUMANodeContainerLevel`, ...).
    #[serde(default, deserialize_with = "null_as_default")]
    pub topology_policies: Vec<String>,
    /// One entry per NUMA zone (or other topology zone).
    #[serde(default, deserialize_with = "null_as_default")]
    pub zones: Vec<Zone>,
}

super::impl_cluster_resource!(NodeResourceTopology, VERSION, API_VERSION);

impl Serialize for NodeResourceTopology {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Both lists are required in this version: written even when empty.
        super::Wire {
            api_version: API_VERSION,
            kind: super::KIND,
            metadata: &self.metadata,
            topology_policies: Some(&self.topology_policies),
            attributes: None,
            zones: &self.zones,
        }
        .serialize(serializer)
    }
}

impl From<NodeResourceTopology> for v1alpha2::NodeResourceTopology {
    fn from(old: NodeResourceTopology) -> Self {
        Self {
            metadata: old.metadata,
            topology_policies: old.topology_policies,
            attributes: Vec::new(),
            zones: old.zones,
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    const FIXTURE: &str = r#"
apiVersion: topology.node.k8s.io/v1alpha1
kind: NodeResourceTopology
metadata:
  name: old-worker
topologyPolicies: ["RestrictedPodLevel"]
zones:
  - name: node-0
    type: Node
    costs: [{name: node-0, value: 10}, {name: node-1, value: 20}]
    attributes: [{name: vendor, value: acme}]
    resources:
      - {name: cpu, capacity: 8, allocatable: "8", available: 6}
"#;

    #[test]
    fn round_trips_and_writes_required_lists() {
        let nrt: NodeResourceTopology = serde_norway::from_str(FIXTURE).unwrap();
        let json = serde_json::to_value(&nrt).unwrap();
        assert_eq!(json["apiVersion"], API_VERSION);
        assert_eq!(json["zones"][0]["resources"][0]["capacity"], "8");
        assert_eq!(
            serde_json::from_value::<NodeResourceTopology>(json).unwrap(),
            nrt
        );

        let empty = NodeResourceTopology {
            metadata: ObjectMeta {
                name: Some("n".into()),
                ..ObjectMeta::default()
            },
            ..NodeResourceTopology::default()
        };
        assert_eq!(
            serde_json::to_string(&empty).unwrap(),
            r#"{"apiVersion":"topology.node.k8s.io/v1alpha1","kind":"NodeResourceTopology","metadata":{"name":"n"},"topologyPolicies":[],"zones":[]}"#
        );
    }

    #[test]
    fn converts_to_v1alpha2_without_loss() {
        let old: NodeResourceTopology = serde_norway::from_str(FIXTURE).unwrap();
        let new = v1alpha2::NodeResourceTopology::from(old.clone());
        assert_eq!(new.metadata, old.metadata);
        assert_eq!(new.topology_policies, ["RestrictedPodLevel"]);
        assert!(new.attributes.is_empty());
        // The same document reads identically as either version, apart from the
        // version itself.
        let mut expected = serde_json::to_value(&old).unwrap();
        expected["apiVersion"] = v1alpha2::API_VERSION.into();
        assert_eq!(serde_json::to_value(&new).unwrap(), expected);
    }

    #[test]
    fn is_served_under_its_own_version() {
        assert_eq!(
            NodeResourceTopology::url_path(&(), None),
            "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"
        );
    }
}
