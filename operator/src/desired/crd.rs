//! The NodeResourceTopology CRD, when the stack manages it (`spec.nrtCRD.manage`).

use super::meta::{Component, Stack};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tas_api::tas::NrtCrdSpec;

/// The NRT CRD as generated from the api crate, labelled as part of the stack; `None`
/// when another tool owns it.
///
/// It is owned by the TopologyAwareScheduling object only with `deleteOnUninstall`:
/// deleting a CRD deletes every NodeResourceTopology object, which other tools may read,
/// so by default the CRD outlives the stack.
pub(crate) fn nrt_crd(stack: &Stack, spec: &NrtCrdSpec) -> Option<CustomResourceDefinition> {
    if !spec.manage {
        return None;
    }
    let mut crd = tas_api::crds::node_resource_topology();
    crd.metadata
        .labels
        .get_or_insert_with(Default::default)
        .extend(stack.labels(Component::NrtCrd));
    if spec.delete_on_uninstall {
        crd.metadata.owner_references = stack.owner_references();
    }
    Some(crd)
}
