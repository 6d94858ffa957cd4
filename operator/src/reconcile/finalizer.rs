//! Uninstall: what the `tas.dev/cleanup` finalizer does before the object may go.
//!
//! Owner references would let the garbage collector delete the namespaced operands, but
//! not everything: the namespace has no owner reference (it may pre-date TAS), and the
//! operator would rather not depend on the collector for cluster-wide RBAC. So the
//! finalizer removes every object labelled for the stack itself, in dependency order,
//! keeping the NRT CRD unless `spec.nrtCRD.deleteOnUninstall` and a namespace the
//! operator did not create (see [`super::prune`]). This runs even while paused:
//! deleting the object is an explicit request to remove the stack.

use super::events;
use super::prune::{self, CrdPolicy};
use crate::context::Context;
use crate::error::Error;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tas_api::tas::TopologyAwareScheduling;

/// Removes the stack's objects; the finalizer is removed when this succeeds.
pub async fn cleanup(cr: &TopologyAwareScheduling, ctx: &Context) -> Result<Action, Error> {
    let name = cr.name_any();
    let nrt = &cr.spec.nrt_crd;
    // A CRD another manager manages (and that the operator yields to) is not the
    // operator's to delete.
    let foreign = super::coexistence::crd_foreign_managers(
        ctx.stores.nrt_crd().as_deref(),
        super::FIELD_MANAGER,
    );
    let crd = if nrt.manage
        && nrt.delete_on_uninstall
        && !super::coexistence::yields_crd(nrt, &foreign)
    {
        CrdPolicy::Delete
    } else {
        CrdPolicy::Keep
    };
    let removed = prune::remove_all(&ctx.client, &name, crd).await?;
    tracing::info!(removed = removed.len(), ?crd, "stack uninstalled");
    let kept = match crd {
        CrdPolicy::Keep => "; the NodeResourceTopology CRD is kept",
        CrdPolicy::Delete => "",
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
