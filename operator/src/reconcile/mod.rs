//! Reconciling the TopologyAwareScheduling object, as a pipeline of steps.
//!
//! ```text
//! CR ─► finalizer ─┬─ Apply:   membership (node labels) ─► validate ─► desired::build
//!                  │           ─► [not paused] apply (SSA, in order; CRD Established)
//!                  │           ─► [not paused] prune (managed label, not desired)
//!                  │           ─► status (+ Events)  ─► Ok / Err(permanent | transient)
//!                  └─ Cleanup: remove every managed object (finalizer.rs)
//! ```
//!
//! Errors never skip the status: a permanent one (overlapping groups, a spec the
//! builders refuse, a missing unmanaged CRD) becomes `Degraded` and waits for a change;
//! a transient one becomes `Degraded=ApplyFailed` (or similar) and is retried with a
//! per-object backoff ([`error_policy`]). Every failure is also a Warning Event.

pub mod agent_problems;
pub mod apply;
pub mod coexistence;
pub mod conditions;
pub mod created;
pub mod events;
pub mod finalizer;
pub mod freshness;
pub mod namespace;
pub mod nrt_crd;
pub mod observed;
pub mod prune;
pub mod status;

use crate::context::Context;
use crate::desired::{self, ApiObject};
use crate::error::Error;
use crate::metrics::ReconcileResult;
use crate::node_groups::Membership;
use crate::validate::validate;
use conditions::Problem;
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, ResourceExt};
use prune::Key;
use std::collections::BTreeSet;
use std::sync::Arc;
use tas_api::tas::{RelatedObject, TopologyAwareScheduling};
use tokio::time::Instant;
use tracing::Instrument;

/// Finalizer that runs the uninstall.
pub const FINALIZER: &str = "tas.dev/cleanup";
/// Field manager of everything the operator applies, status included.
pub const FIELD_MANAGER: &str = "tas-operator";

/// Reconciles one TopologyAwareScheduling object (the controller's reconcile function).
pub async fn reconcile(
    cr: Arc<TopologyAwareScheduling>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let name = cr.name_any();
    let span = tracing::info_span!(
        "reconcile",
        object = %name,
        generation = cr.metadata.generation.unwrap_or_default()
    );
    async move {
        let started = Instant::now();
        // Before anything else, so this reconcile's span already goes to the new
        // endpoint. Cleanup turns back to the operator's own endpoint once done.
        ctx.otlp.use_target(
            cr.spec.observability.otlp_endpoint.as_deref(),
            cr.spec
                .observability
                .otlp_protocol
                .map(crate::telemetry::protocol),
        );
        let result = reconcile_inner(cr.clone(), &ctx).await;
        let outcome = match &result {
            Ok(_) => {
                ctx.backoffs.reset(&name);
                ReconcileResult::Success
            }
            Err(e) => {
                tracing::warn!(error = %e, permanent = e.is_permanent(), "reconcile failed");
                events::error(&ctx, &cr, e.reason(), e.to_string()).await;
                if e.is_permanent() {
                    ReconcileResult::PermanentError
                } else {
                    ReconcileResult::TransientError
                }
            }
        };
        let took = started.elapsed();
        ctx.metrics.reconciled(outcome, took);
        tracing::debug!(?outcome, took_ms = took.as_millis() as u64, "reconciled");
        result
    }
    .instrument(span)
    .await
}

/// What to do after a failed reconcile: wait for a change when only a change can help,
/// else retry after this object's next backoff delay.
pub fn error_policy(cr: Arc<TopologyAwareScheduling>, error: &Error, ctx: Arc<Context>) -> Action {
    if error.is_permanent() {
        Action::await_change()
    } else {
        let delay = ctx.backoffs.next_delay(&cr.name_any());
        tracing::info!(object = %cr.name_any(), retry_in_ms = delay.as_millis() as u64, "retrying after a transient error");
        Action::requeue(delay)
    }
}

async fn reconcile_inner(cr: Arc<TopologyAwareScheduling>, ctx: &Context) -> Result<Action, Error> {
    ctx.stores
        .synced()
        .await
        .map_err(|e| Error::CachesNotSynced(e.to_string()))?;
    let api: Api<TopologyAwareScheduling> = Api::all(ctx.client.clone());
    let result = finalizer(&api, FINALIZER, cr, |event| async move {
        match event {
            FinalizerEvent::Apply(cr) => apply_stack(&cr, ctx).await,
            FinalizerEvent::Cleanup(cr) => {
                let done = finalizer::cleanup(&cr, ctx).await?;
                // The object is about to go: back to the operator's own endpoint.
                ctx.otlp.use_endpoint(None);
                Ok(done)
            }
        }
    })
    .await;
    match result {
        // A second cleanup, triggered by the operands' deletion while the cache still
        // held the object, raced the first one's finalizer removal: the object is gone.
        Err(kube::runtime::finalizer::Error::RemoveFinalizer(kube::Error::Api(s)))
            if s.code == 404 =>
        {
            Ok(Action::await_change())
        }
        other => other.map_err(Error::from),
    }
}

/// The whole pipeline for an object that is not being deleted.
async fn apply_stack(cr: &TopologyAwareScheduling, ctx: &Context) -> Result<Action, Error> {
    let nodes = ctx.stores.nodes.state();
    let membership = Membership::compute(
        &cr.effective_node_groups(),
        nodes.iter().map(|n| &n.metadata),
    );
    let plan = plan(cr, ctx, &membership);
    let related = plan.as_ref().ok().map(|objects| related_objects(objects));

    let step = match (&plan, cr.spec.paused) {
        (Ok(objects), false) => converge(cr, ctx, objects).await,
        // Paused: change nothing. A plan error is reported below.
        _ => Ok(()),
    };
    let error = plan
        .err()
        .or(step.err())
        .or_else(|| nrt_crd_missing(cr, ctx));
    let problem = error.as_ref().map(|e| Problem {
        reason: e.reason().to_owned(),
        message: e.to_string(),
    });
    let recheck_in = status::update(
        ctx,
        cr,
        status::Input {
            membership: &membership,
            related,
            problem,
        },
    )
    .await?;
    match error {
        Some(e) => Err(e),
        // Staleness comes with time, not with an event: look again when it can change.
        None => Ok(Action::requeue(
            recheck_in.map_or(ctx.config.resync, |d| d.min(ctx.config.resync)),
        )),
    }
}

/// The objects to apply, or why there are none: the validate step's verdict on the
/// object and the nodes it selects, then the builders'.
fn plan(
    cr: &TopologyAwareScheduling,
    ctx: &Context,
    membership: &Membership,
) -> Result<Vec<ApiObject>, Error> {
    let valid = validate(cr, &ctx.config.build, Some(membership))?;
    Ok(desired::build(&valid)?.into_api_objects()?)
}

/// Apply everything in order, then prune what is no longer desired.
async fn converge(
    cr: &TopologyAwareScheduling,
    ctx: &Context,
    objects: &[ApiObject],
) -> Result<(), Error> {
    // Another manager's NRT CRD is not forced over unless spec.nrtCRD.takeOver says so
    // (the NRTOwnership condition reports it).
    let crd_foreign =
        coexistence::crd_foreign_managers(ctx.stores.nrt_crd().as_deref(), FIELD_MANAGER);
    let yield_crd = coexistence::yields_crd(&cr.spec.nrt_crd, &crd_foreign);
    let to_apply: Vec<ApiObject> = objects
        .iter()
        .filter(|o| !(yield_crd && o.resource.kind == "CustomResourceDefinition"))
        .cloned()
        .collect();
    updater_namespace_exists(cr, ctx).await?;
    apply::apply_all(
        &ctx.client,
        &cr.name_any(),
        &to_apply,
        ctx.config.crd_established_timeout,
        ctx.config.identity.as_ref(),
    )
    .await?;
    // An owner reference from an older release would let the garbage collector delete
    // the CRD with the object, whatever deleteOnUninstall says (nrt_crd.rs).
    if let (Some(crd), Some(uid)) = (ctx.stores.nrt_crd(), cr.metadata.uid.as_deref())
        && nrt_crd::owned_by(&crd, uid)
    {
        nrt_crd::release_owner(&ctx.client, tas_api::nrt::CRD_NAME, uid)
            .await
            .map_err(|source| apply::ApplyError::Patch {
                kind: "CustomResourceDefinition".to_owned(),
                name: tas_api::nrt::CRD_NAME.to_owned(),
                source,
            })?;
    }
    let keep: BTreeSet<Key> = objects.iter().map(Key::of).collect();
    let pruned = prune::prune(&ctx.client, &cr.name_any(), &keep).await?;
    if !pruned.is_empty() {
        let names: Vec<String> = pruned.iter().map(ToString::to_string).collect();
        events::normal(
            ctx,
            cr,
            "Pruned",
            "Prune",
            format!("removed objects no longer desired: {}", names.join(", ")),
        )
        .await;
    }
    Ok(())
}

/// The node agents' own namespace is the installer's (with its Pod Security level and the
/// operator's rights there): the operator never creates it, and says so when it is
/// missing rather than failing on each agent object.
async fn updater_namespace_exists(
    cr: &TopologyAwareScheduling,
    ctx: &Context,
) -> Result<(), Error> {
    let name = crate::validate::updater_namespace(cr, &ctx.config.build);
    if name == cr.spec.namespace {
        return Ok(());
    }
    let found = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(name)
        .await
        .map_err(|source| Error::ReadUpdaterNamespace {
            name: name.to_owned(),
            source,
        })?;
    match found {
        Some(ns) if ns.metadata.deletion_timestamp.is_none() => Ok(()),
        _ => Err(Error::UpdaterNamespaceMissing(name.to_owned())),
    }
}

/// With `spec.nrtCRD.manage: false` the operator only checks that someone installed it.
fn nrt_crd_missing(cr: &TopologyAwareScheduling, ctx: &Context) -> Option<Error> {
    let installed = ctx
        .stores
        .nrt_crd()
        .is_some_and(|crd| observed::crd_established(&crd));
    (!cr.spec.nrt_crd.manage && !installed)
        .then(|| Error::NrtCrdMissing(tas_api::nrt::CRD_NAME.to_owned()))
}

/// `status.relatedObjects`: every desired object, sorted.
fn related_objects(objects: &[ApiObject]) -> Vec<RelatedObject> {
    let mut related: Vec<RelatedObject> = objects
        .iter()
        .map(|o| RelatedObject {
            group: o.resource.group.clone(),
            kind: o.resource.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
        })
        .collect();
    related.sort();
    related
}
