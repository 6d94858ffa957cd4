//! The CRD manifests generated from the Rust types: what `make crds` writes to
//! `config/crd/` and what the operator applies.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// A generated CRD and the file it is checked in as under `config/crd/`.
pub struct GeneratedCrd {
    /// File name, `<group>_<plural>.yaml`.
    pub file_name: String,
    /// The CRD.
    pub crd: CustomResourceDefinition,
}

/// The TopologyAwareScheduling CRD.
pub fn topology_aware_scheduling() -> CustomResourceDefinition {
    crate::tas::TopologyAwareScheduling::crd()
}

/// The NodeResourceTopology CRD (both versions, v1alpha2 stored).
pub fn node_resource_topology() -> CustomResourceDefinition {
    crate::nrt::crd()
}

/// Every CRD of the project, in a stable order.
pub fn all() -> Vec<GeneratedCrd> {
    [topology_aware_scheduling(), node_resource_topology()]
        .into_iter()
        .map(|crd| GeneratedCrd {
            file_name: format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural),
            crd,
        })
        .collect()
}

/// YAML of a CRD as checked in: a header saying it is generated, then the object.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_norway::Error> {
    let body = serde_norway::to_string(crd)?;
    Ok(format!(
        "# Generated from the Rust types in api/ by `make crds`. Do not edit.\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn crd_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/crd")
    }

    /// The checked-in manifests must be exactly what the code generates.
    #[test]
    fn checked_in_crds_match_the_code() {
        for g in all() {
            let path = crd_dir().join(&g.file_name);
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            let generated = to_yaml(&g.crd).expect("CRD serialises");
            assert!(
                on_disk == generated,
                "{} is out of date with the Rust types: run `make crds` and commit the result",
                path.display()
            );
        }
    }

    #[test]
    fn file_names_follow_group_and_plural() {
        let names: Vec<_> = all().into_iter().map(|g| g.file_name).collect();
        assert_eq!(
            names,
            [
                "tas.dev_topologyawareschedulings.yaml",
                "topology.node.k8s.io_noderesourcetopologies.yaml"
            ]
        );
    }
}
