//! NodeResourceTopology `v1alpha2`, the storage version.
//!
//! Field names, optionality and nesting follow the published CRD exactly. Optional
//! fields default when missing (or `null`) on read and are left out when empty on
//! write, so objects from other writers read back unchanged. Typed readers for zones
//! and attributes live in [`super::zone`] and [`super::attributes`].
//!
//! [`Zone`], [`CostInfo`], [`AttributeInfo`] and [`ResourceInfo`] have the same shape in
//! `v1alpha1`, which re-exports them; only the root object differs between versions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize, Serializer};

use super::{NrtQuantity, null_as_default};

/// The version name.
pub const VERSION: &str = "v1alpha2";
/// The `apiVersion` of objects of this version.
pub const API_VERSION: &str = "topology.node.k8s.io/v1alpha2";

/// Resources of one node per NUMA zone, plus node-wide attributes. Cluster-scoped;
/// the object is named after its node.
///
/// Serialises with `apiVersion` and `kind` set; ignores them on read.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourceTopology {
    /// Standard object metadata; `name` is the node name.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Deprecated Topology Manager policy names (`SingleNUMANodeContainerLevel`, ...);
    /// superseded by the `topologyManagerPolicy`/`topologyManagerScope` attributes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub topology_policies: Vec<String>,
    /// Node-wide attributes, such as the Topology Manager configuration and the
    /// pod-set fingerprint.
    #[serde(default, deserialize_with = "null_as_default")]
    pub attributes: Vec<AttributeInfo>,
    /// One entry per NUMA zone (or other topology zone).
    #[serde(default, deserialize_with = "null_as_default")]
    pub zones: Vec<Zone>,
}

super::impl_cluster_resource!(NodeResourceTopology, VERSION, API_VERSION);

impl NodeResourceTopology {
    /// An empty object for the node `node_name`.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(node_name.into()),
                ..ObjectMeta::default()
            },
            ..Self::default()
        }
    }
}

impl Serialize for NodeResourceTopology {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Optional lists only when non-empty; `zones` always (the CRD requires it).
        fn non_empty<T>(list: &[T]) -> Option<&[T]> {
            (!list.is_empty()).then_some(list)
        }
        super::Wire {
            api_version: API_VERSION,
            kind: super::KIND,
            metadata: &self.metadata,
            topology_policies: non_empty(&self.topology_policies),
            attributes: non_empty(&self.attributes),
            zones: &self.zones,
        }
        .serialize(serializer)
    }
}

/// One topology zone, by convention a NUMA node named `node-<id>` of type `Node`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Zone {
    /// Zone name, e.g. `node-0`.
    pub name: String,
    /// Zone type, e.g. `Node`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Name of the enclosing zone, if zones are nested. Unset for NUMA zones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Distance from this zone to each zone (including itself).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub costs: Vec<CostInfo>,
    /// Zone-level attributes.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub attributes: Vec<AttributeInfo>,
    /// Amounts of each resource in this zone.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<ResourceInfo>,
}

/// Cost (NUMA distance) of reaching the zone `name`; 10 means local.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostInfo {
    /// Destination zone name.
    pub name: String,
    /// Distance, as in the kernel's NUMA distance table.
    pub value: i64,
}

/// A name/value pair.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeInfo {
    /// Attribute name, e.g. `topologyManagerPolicy`.
    pub name: String,
    /// Attribute value, e.g. `single-numa-node`.
    pub value: String,
}

impl AttributeInfo {
    /// A name/value pair.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// Amounts of one resource in one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceInfo {
    /// Resource name, e.g. `cpu`, `memory`, `hugepages-1Gi`, `example.com/nic`.
    pub name: String,
    /// Everything the zone has.
    pub capacity: NrtQuantity,
    /// What pods may use: capacity minus system and kubelet reservations.
    pub allocatable: NrtQuantity,
    /// What is still free for new pods.
    pub available: NrtQuantity,
}

#[cfg(test)]
mod tests {
    use kube::Resource;

    use super::*;

    /// A two-socket node as a mix of writers would publish it: integer and string
    /// quantities, binary suffixes, a zone without resources.
    const FIXTURE: &str = r#"
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata:
  name: worker-0
  annotations:
    topology.node.k8s.io/fingerprint: pfp0v001fe53c4dbd2c5f4a0
topologyPolicies: ["SingleNUMANodeContainerLevel"]
attributes:
  - name: topologyManagerPolicy
    value: single-numa-node
  - name: topologyManagerScope
    value: pod
zones:
  - name: node-0
    type: Node
    costs:
      - name: node-0
        value: 10
      - name: node-1
        value: 21
    resources:
      - name: cpu
        capacity: 52
        allocatable: "50"
        available: 48
      - name: memory
        capacity: "240518168576"
        allocatable: 239444426752
        available: 200Gi
      - name: hugepages-1Gi
        capacity: 4Gi
        allocatable: 4Gi
        available: "0"
  - name: node-1
    type: Node
    costs:
      - name: node-0
        value: 21
      - name: node-1
        value: 10
"#;

    #[test]
    fn reads_a_realistic_object() {
        let nrt: NodeResourceTopology = serde_norway::from_str(FIXTURE).unwrap();
        assert_eq!(nrt.metadata.name.as_deref(), Some("worker-0"));
        assert_eq!(nrt.zones.len(), 2);
        let node0 = &nrt.zones[0];
        assert_eq!(node0.type_, "Node");
        assert_eq!(node0.parent, None);
        assert_eq!(
            node0.costs[1],
            CostInfo {
                name: "node-1".into(),
                value: 21
            }
        );
        let values: Vec<(i64, i64, i64)> = node0
            .resources
            .iter()
            .map(|r| {
                (
                    r.capacity.value().unwrap(),
                    r.allocatable.value().unwrap(),
                    r.available.value().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            values,
            [
                (52, 50, 48),
                (240_518_168_576, 239_444_426_752, 200 << 30),
                (4 << 30, 4 << 30, 0)
            ]
        );
        assert!(nrt.zones[1].resources.is_empty());
    }

    #[test]
    fn round_trips_through_yaml_and_json() {
        let nrt: NodeResourceTopology = serde_norway::from_str(FIXTURE).unwrap();
        let yaml = serde_norway::to_string(&nrt).unwrap();
        assert_eq!(
            serde_norway::from_str::<NodeResourceTopology>(&yaml).unwrap(),
            nrt
        );

        let json = serde_json::to_value(&nrt).unwrap();
        assert_eq!(json["apiVersion"], API_VERSION);
        assert_eq!(json["kind"], "NodeResourceTopology");
        // Integers were normalised to strings; suffixed text kept as written.
        assert_eq!(json["zones"][0]["resources"][0]["capacity"], "52");
        assert_eq!(json["zones"][0]["resources"][1]["available"], "200Gi");
        // Empty optional lists and unset parent are left out.
        assert!(json["zones"][1].get("resources").is_none());
        assert!(json["zones"][1].get("parent").is_none());
        assert_eq!(
            serde_json::from_value::<NodeResourceTopology>(json).unwrap(),
            nrt
        );
    }

    #[test]
    fn reads_sparse_objects_from_other_writers() {
        let minimal: NodeResourceTopology = serde_json::from_str(
            r#"{"metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node","costs":null}]}"#,
        )
        .unwrap();
        assert!(minimal.topology_policies.is_empty() && minimal.attributes.is_empty());
        assert!(minimal.zones[0].costs.is_empty());

        let null_zones: NodeResourceTopology =
            serde_json::from_str(r#"{"metadata":{"name":"n"},"zones":null}"#).unwrap();
        assert!(null_zones.zones.is_empty());
        // `zones` is required by the CRD, so it is written even when empty.
        let written = serde_json::to_value(&null_zones).unwrap();
        assert_eq!(written["zones"], serde_json::json!([]));
        assert!(written.get("attributes").is_none());
    }

    #[test]
    fn writes_fields_in_the_published_order() {
        let mut nrt = NodeResourceTopology::new("n");
        nrt.zones = vec![Zone {
            name: "node-0".into(),
            type_: "Node".into(),
            ..Zone::default()
        }];
        assert_eq!(
            serde_json::to_string(&nrt).unwrap(),
            r#"{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"n"},"zones":[{"name":"node-0","type":"Node"}]}"#
        );
        nrt.topology_policies = vec!["None".into()];
        nrt.attributes = vec![AttributeInfo::new("topologyManagerScope", "pod")];
        assert_eq!(
            serde_json::to_string(&nrt).unwrap(),
            r#"{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","metadata":{"name":"n"},"topologyPolicies":["None"],"attributes":[{"name":"topologyManagerScope","value":"pod"}],"zones":[{"name":"node-0","type":"Node"}]}"#
        );
    }

    #[test]
    fn rejects_a_zone_without_its_required_fields() {
        let err = serde_json::from_str::<NodeResourceTopology>(r#"{"zones":[{"name":"node-0"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("type"), "{err}");
    }

    #[test]
    fn is_a_cluster_scoped_kube_resource() {
        assert_eq!(NodeResourceTopology::api_version(&()), API_VERSION);
        assert_eq!(NodeResourceTopology::kind(&()), "NodeResourceTopology");
        assert_eq!(NodeResourceTopology::plural(&()), "noderesourcetopologies");
        assert_eq!(
            NodeResourceTopology::url_path(&(), None),
            "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
        );
        let mut nrt = NodeResourceTopology::new("worker-1");
        assert_eq!(nrt.meta().name.as_deref(), Some("worker-1"));
        nrt.meta_mut().name = Some("worker-2".into());
        assert_eq!(nrt.metadata.name.as_deref(), Some("worker-2"));
    }
}
