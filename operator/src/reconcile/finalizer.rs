//! Uninstall: what the `tas.dev/cleanup` finalizer does before the object may go.
//!
//! Owner references would let the garbage collector delete the namespaced operands, but
//! not everything: the namespace has no owner reference (it may pre-date TAS), and the
//! operator would rather not depend on the collector for cluster-wide RBAC. So the
//! finalizer removes every object labelled for the stack itself, in dependency order,
//! keeping a namespace the operator did not create (see [`super::prune`]) and the NRT
//! CRD unless [`crd_policy`] says otherwise. This runs even while paused: deleting the
//! object is an explicit request to remove the stack.

use super::events;
use super::nrt_crd;
use super::prune::{self, CrdPolicy, PruneError};
use crate::context::Context;
use crate::error::Error;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tas_api::nrt::CRD_NAME;
use tas_api::tas::{NrtCrdSpec, TopologyAwareScheduling};

/// Whether uninstall deletes the NRT CRD, and if not while `deleteOnUninstall` asks
/// for it, why. `yields`: another manager manages it and the operator leaves it to
/// them; `created`: the operator created it (`nrt_crd`).
pub fn crd_policy(
    nrt: &NrtCrdSpec,
    yields: bool,
    created: bool,
) -> (CrdPolicy, Option<&'static str>) {
    if !(nrt.manage && nrt.delete_on_uninstall) {
        return (CrdPolicy::Keep, None);
    }
    if yields {
        return (CrdPolicy::Keep, Some("another manager manages it"));
    }
    if !created {
        return (
            CrdPolicy::Keep,
            Some(
                "the operator did not create it (it carries no tas.dev/created-by-operator mark), so it may hold other tools' objects",
            ),
        );
    }
    (CrdPolicy::Delete, None)
}

/// Removes the stack's objects; the finalizer is removed when this succeeds.
pub async fn cleanup(cr: &TopologyAwareScheduling, ctx: &Context) -> Result<Action, Error> {
    let name = cr.name_any();
    let nrt = &cr.spec.nrt_crd;
    let crd_error = |source| {
        Error::Prune(PruneError::Remove {
            key: Box::new(prune::Key {
                group: "apiextensions.k8s.io".to_owned(),
                kind: "CustomResourceDefinition".to_owned(),
                namespace: None,
                name: CRD_NAME.to_owned(),
            }),
            source,
        })
    };
    // First, so that the garbage collector cannot delete the CRD once this object is
    // gone, whatever is decided below.
    if let Some(uid) = cr.metadata.uid.as_deref() {
        nrt_crd::release_owner(&ctx.client, CRD_NAME, uid)
            .await
            .map_err(crd_error)?;
    }
    // A CRD another manager manages (and that the operator yields to) is not the
    // operator's to delete.
    let foreign = super::coexistence::crd_foreign_managers(
        ctx.stores.nrt_crd().as_deref(),
        super::FIELD_MANAGER,
    );
    let created = Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get_opt(CRD_NAME)
        .await
        .map_err(crd_error)?
        .is_some_and(|crd| nrt_crd::created_by_operator(&crd));
    let (crd, why_kept) = crd_policy(nrt, super::coexistence::yields_crd(nrt, &foreign), created);
    let removed = prune::remove_all(&ctx.client, &name, crd).await?;
    tracing::info!(
        removed = removed.len(),
        ?crd,
        ?why_kept,
        "stack uninstalled"
    );
    let kept = match (crd, why_kept) {
        (CrdPolicy::Delete, _) => String::new(),
        (CrdPolicy::Keep, None) => "; the NodeResourceTopology CRD is kept".to_owned(),
        (CrdPolicy::Keep, Some(why)) => format!(
            "; the NodeResourceTopology CRD is kept although deleteOnUninstall is set: {why}"
        ),
    };
    events::normal(
        ctx,
        cr,
        "Uninstalled",
        "Cleanup",
        format!("removed {} object(s) of the stack{kept}", removed.len()),
    )
    .await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(manage: bool, delete_on_uninstall: bool) -> NrtCrdSpec {
        NrtCrdSpec {
            manage,
            delete_on_uninstall,
            take_over: true,
        }
    }

    #[test]
    fn only_a_crd_the_operator_created_and_still_manages_is_deleted() {
        assert_eq!(
            crd_policy(&spec(true, true), false, true).0,
            CrdPolicy::Delete
        );
        assert_eq!(
            crd_policy(&spec(true, false), false, true),
            (CrdPolicy::Keep, None)
        );
        assert_eq!(
            crd_policy(&spec(false, false), false, true),
            (CrdPolicy::Keep, None)
        );
        // Taken over from another tool: never the operator's to delete.
        let (policy, why) = crd_policy(&spec(true, true), false, false);
        assert_eq!(policy, CrdPolicy::Keep);
        assert!(why.is_some_and(|w| w.contains("did not create it")));
        assert_eq!(crd_policy(&spec(true, true), true, true).0, CrdPolicy::Keep);
    }
}
