//! What the operator may do to the NodeResourceTopology CRD beyond applying it.
//!
//! Deleting the CRD deletes every NodeResourceTopology object, other tools' included, so
//! two rules keep that from happening unless the operator is sure it is its own:
//!
//! - the CRD never carries an owner reference to the TopologyAwareScheduling object:
//!   the garbage collector would delete it when the object goes, whatever
//!   `deleteOnUninstall` says by then (an older release set one while `deleteOnUninstall`
//!   was on; [`release_owner`] removes it). Uninstall deletes the CRD itself (finalizer);
//! - the operator marks the CRD ([`CREATED_BY_ANNOTATION`]) only when it creates it, and
//!   uninstall deletes only a marked CRD: one another tool installed and the operator
//!   took over (`takeOver`) is kept. Only who may write CRDs can forge the mark, and they
//!   may delete the CRD anyway.

use super::FIELD_MANAGER;
use super::apply::{CREATED_BY_ANNOTATION, marked};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

/// Creates the CRD `value` marked as the operator's if no CRD of that name exists.
/// Another writer's CRD created meanwhile (409) is left unmarked.
pub async fn create_if_missing(
    client: &Client,
    name: &str,
    value: &serde_json::Value,
) -> Result<(), kube::Error> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    if api.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let mut value = value.clone();
    value["metadata"]["annotations"][CREATED_BY_ANNOTATION] = "true".into();
    let crd: CustomResourceDefinition =
        serde_json::from_value(value).map_err(kube::Error::SerdeError)?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    match api.create(&params, &crd).await {
        Ok(_) => {
            tracing::info!(crd = name, "created the NodeResourceTopology CRD");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether the operator created this CRD (it carries the operator's mark).
pub fn created_by_operator(crd: &CustomResourceDefinition) -> bool {
    marked(&crd.metadata)
}

/// Whether the CRD has an owner reference to the object with uid `owner`.
pub fn owned_by(crd: &CustomResourceDefinition, owner: &str) -> bool {
    crd.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == owner)
}

/// Removes the CRD's owner references to the object with uid `owner`, if any.
pub async fn release_owner(client: &Client, name: &str, owner: &str) -> Result<(), kube::Error> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let Some(crd) = api.get_opt(name).await? else {
        return Ok(());
    };
    if !owned_by(&crd, owner) {
        return Ok(());
    }
    let kept: Vec<_> = crd
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.uid != owner)
        .collect();
    // The resourceVersion makes this a compare-and-swap: a concurrent change of the
    // references fails it (retried on the next reconcile) instead of being overwritten.
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": crd.metadata.resource_version,
            "ownerReferences": kept,
        },
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(&patch)).await?;
    tracing::info!(
        crd = name,
        "removed the owner reference to the TopologyAwareScheduling object: the garbage collector must not delete the CRD"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use std::collections::BTreeMap;

    #[test]
    fn only_a_marked_crd_is_the_operators() {
        let mut crd = tas_api::crds::node_resource_topology();
        assert!(!created_by_operator(&crd));
        crd.metadata.annotations = Some(BTreeMap::from([(
            CREATED_BY_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
        assert!(created_by_operator(&crd));
    }

    #[test]
    fn owner_references_are_matched_by_uid() {
        let mut crd = tas_api::crds::node_resource_topology();
        assert!(!owned_by(&crd, "u1"));
        crd.metadata.owner_references = Some(vec![OwnerReference {
            uid: "u1".into(),
            ..OwnerReference::default()
        }]);
        assert!(owned_by(&crd, "u1"));
        assert!(!owned_by(&crd, "u2"));
    }
}
