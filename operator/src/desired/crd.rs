//! The NodeResourceTopology CRD, when the stack manages it (`spec.nrtCRD.manage`).

use super::meta::{Component, Stack};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tas_api::tas::NrtCrdSpec;

/// The NRT CRD as generated from the api crate, labelled as part of the stack; `None`
/// when another tool owns it.
///
/// Never with an owner reference, even with `deleteOnUninstall`: deleting a CRD deletes
/// every NodeResourceTopology object, which other tools may read, and the garbage
/// collector would delete it with the TopologyAwareScheduling object whatever the spec
/// says by then. Uninstall deletes it explicitly, and only when the operator created it
/// (`reconcile::nrt_crd`).
pub(crate) fn nrt_crd(stack: &Stack, spec: &NrtCrdSpec) -> Option<CustomResourceDefinition> {
    if !spec.manage {
        return None;
    }
    let mut crd = tas_api::crds::node_resource_topology();
    crd.metadata
        .labels
        .get_or_insert_with(Default::default)
        .extend(stack.labels(Component::NrtCrd));
    Some(crd)
}
