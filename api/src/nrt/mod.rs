//! NodeResourceTopology (NRT): what is free in each NUMA zone of a node.
//!
//! Node agents publish one cluster-scoped NRT object per node (named after the node);
//! schedulers read it to place pods whose resources must fit in one NUMA zone. Other
//! tools already read and write these objects, so everything here is wire-compatible
//! with the published CRD (group `topology.node.k8s.io`):
//!
//! - [`v1alpha2`] (the storage version) and [`v1alpha1`]: the object types. Unlike most
//!   custom resources NRT has no `spec`: `topologyPolicies`, `attributes` and `zones`
//!   sit at the top level of the object, which is why these types are written by hand
//!   and implement [`kube::Resource`] themselves rather than use `#[derive(CustomResource)]`.
//! - [`NrtQuantity`]: resource amounts, accepted as JSON integers or quantity strings.
//! - [`crd()`]: the CustomResourceDefinition serving both versions.
//! - [`limits`]: the size bounds of one object (CRD schema, admission policy, scheduler).
//! - [`zone`]: the `node-<NUMA id>` zone naming convention and typed zone readers.
//! - [`attributes`]: the well-known attribute names and the pod-set fingerprint readers.
//! - [`heartbeat`]: the writer's liveness stamp (`tas.dev/heartbeat`, `tas.dev/heartbeat-period`).
//! - [`topology_manager`]: the node's Topology Manager policy, scope and NUMA limit, read
//!   from `topologyPolicies` and attributes.
//! - [`resource_managers`]: the node's CPU and memory manager policies and the policy
//!   options that change placement, read from attributes.
//! - [`memory_groups`]: which zones hold pinned memory and the memory manager's groups
//!   of zones, a zone attribute.
//! - [`init_cpus`]: whether the zones' free CPUs leave out those regular init
//!   containers keep, and how many each zone has kept.
//! - [`cpu_layout`]: threads per core and the socket of each zone, which the CPU
//!   manager's allocation order depends on.
//! - [`pcie_roots`]: the PCIe root complexes of each zone, for DRA devices that name
//!   their root rather than their NUMA node, a zone attribute.
//!
//! Readers convert a `v1alpha1` object with `v1alpha2::NodeResourceTopology::from` and
//! then use the `v1alpha2` readers only.

pub mod agent_report;
pub mod attributes;
pub mod cpu_layout;
mod crd;
pub mod heartbeat;
pub mod init_cpus;
pub mod limits;
pub mod memory_groups;
pub mod numa_placement;
pub mod ownership;
pub mod pcie_roots;
mod quantity;
pub mod resource_managers;
pub mod topology_manager;
pub mod v1alpha1;
pub mod v1alpha2;
pub mod zone;

pub use attributes::AttributeError;
pub use crd::crd;
pub use memory_groups::ZoneMemoryGroups;
pub use quantity::NrtQuantity;
pub use resource_managers::{CpuManagerPolicy, MemoryManagerPolicy, ResourceManagersConfig};
pub use topology_manager::{TopologyManagerConfig, TopologyManagerPolicy, TopologyManagerScope};
pub use zone::{ZoneError, zone_name, zone_numa_id};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

/// API group of NodeResourceTopology.
pub const GROUP: &str = "topology.node.k8s.io";
/// Kind of a NodeResourceTopology object.
pub const KIND: &str = "NodeResourceTopology";
/// Kind of a list of NodeResourceTopology objects.
pub const LIST_KIND: &str = "NodeResourceTopologyList";
/// Resource (plural) name, as in API paths.
pub const PLURAL: &str = "noderesourcetopologies";
/// Singular name, as accepted by `kubectl`.
pub const SINGULAR: &str = "noderesourcetopology";
/// Short name, as accepted by `kubectl get node-res-topo`.
pub const SHORT_NAME: &str = "node-res-topo";
/// Name of the CustomResourceDefinition object.
pub const CRD_NAME: &str = "noderesourcetopologies.topology.node.k8s.io";

/// Reads a JSON `null` as the type's default, so `zones: null` written by a lax client
/// reads like a missing field.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

/// An object of either version as written: type fields first, then the lists in the
/// published order. A list that is `None` is left out; `zones` is required by both
/// versions and always written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Wire<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    topology_policies: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attributes: Option<&'a [v1alpha2::AttributeInfo]>,
    zones: &'a [v1alpha2::Zone],
}

/// Implements [`kube::Resource`] for a cluster-scoped NRT root type of one version.
macro_rules! impl_cluster_resource {
    ($ty:ty, $version:expr, $api_version:expr) => {
        impl ::kube::core::Resource for $ty {
            type DynamicType = ();
            type Scope = ::kube::core::ClusterResourceScope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($crate::nrt::KIND)
            }

            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($crate::nrt::GROUP)
            }

            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($version)
            }

            fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($api_version)
            }

            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($crate::nrt::PLURAL)
            }

            fn meta(&self) -> &::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(
                &mut self,
            ) -> &mut ::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
use impl_cluster_resource;
