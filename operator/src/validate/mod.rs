//! The validate step: everything the operator refuses in a TopologyAwareScheduling
//! object, checked before anything is built.
//!
//! ```text
//! CR + BuildContext (the operator's images and allow-lists) + node-group membership (observed)
//!   └─ validate() ─┬─ Ok(ValidatedSpec: name, per group its settings, image, selector;
//!                  │                    the scheduler image) ─► desired::build
//!                  └─ Err(ValidationError) ─► Degraded with its reason; permanent or not
//! ```
//!
//! Checks, in the order they are reported:
//! 1. what the CRD's CEL rules refuse at apply, that `render` must refuse offline too:
//!    the name (`default`), unique node-group names, `deleteOnUninstall` only with
//!    `manage` (formats and ranges are left to the API server's schema);
//! 2. what the installer decides ([`policy`]): every host path on the allow-list, every
//!    image in the allowed set, every toleration of an allowed taint key — shared, per
//!    node group and the scheduler's, each refusal naming the field;
//! 3. per node group: an image (the group's, the shared one, or the operator's default),
//!    and a valid label selector;
//! 4. the scheduler's image, and the port of the OTLP endpoint (for the operands'
//!    NetworkPolicies; the CRD's CEL rule refuses an endpoint without one at apply);
//! 5. with the nodes observed (not offline): no node in two groups ([`overlap`]).
//!
//! The builders take a [`ValidatedSpec`], so they cannot run on an object that was not
//! validated, and have nothing left to refuse.

mod error;
pub mod images;
mod overlap;
pub mod policy;

pub use error::ValidationError;
pub use overlap::{OverlapError, check_overlaps};

use crate::desired::BuildContext;
use crate::node_groups::Membership;
use std::collections::BTreeSet;
use tas_api::labels::Selector;
use tas_api::tas::{NodeGroup, SINGLETON_NAME, TopologyAwareScheduling, UpdaterSpec};

/// An object that passed validation, with what validation resolved.
#[derive(Debug, Clone)]
pub struct ValidatedSpec<'a> {
    /// The object.
    pub cr: &'a TopologyAwareScheduling,
    /// Its `metadata.name`.
    pub name: &'a str,
    /// The node groups in effect (one group `all` when the spec names none), in spec
    /// order.
    pub groups: Vec<ValidGroup>,
    /// The scheduler's image: the CR's, else the operator's default.
    pub scheduler_image: String,
    /// The TCP port of `spec.observability.otlpEndpoint`, for the operands'
    /// NetworkPolicies; `None` without an endpoint.
    pub otlp_port: Option<u16>,
    /// The node agents' namespace: the installer's (`--updater-namespace`), else
    /// `spec.namespace`.
    pub updater_namespace: String,
}

/// One node group, validated.
#[derive(Debug, Clone)]
pub struct ValidGroup {
    /// The group as written.
    pub group: NodeGroup,
    /// Its node agent settings: the shared ones with the group's overrides.
    pub updater: UpdaterSpec,
    /// Its node agent image: the group's, the shared one, else the operator's default.
    pub image: String,
    /// Its parsed node selector.
    pub selector: Selector,
}

/// Validates `cr` against the operator's settings and, unless offline (`None`), the
/// node-group membership observed in the cluster.
pub fn validate<'a>(
    cr: &'a TopologyAwareScheduling,
    ctx: &BuildContext,
    membership: Option<&Membership>,
) -> Result<ValidatedSpec<'a>, ValidationError> {
    let name = object_rules(cr)?;
    policy::check(cr, ctx)?;
    let groups = cr
        .effective_node_groups()
        .into_iter()
        .enumerate()
        .map(|(index, group)| valid_group(cr, ctx, index, group))
        .collect::<Result<Vec<_>, _>>()?;
    let scheduler_image = image(&cr.spec.scheduler.image, &ctx.scheduler_image_default)
        .ok_or(ValidationError::MissingSchedulerImage)?;
    let otlp_port = otlp_port(cr)?;
    if let Some(membership) = membership {
        check_overlaps(membership)?;
    }
    Ok(ValidatedSpec {
        cr,
        name,
        groups,
        scheduler_image,
        otlp_port,
        updater_namespace: updater_namespace(cr, ctx).to_owned(),
    })
}

/// Where the node agents of `cr` run: the installer's namespace for them, else
/// `spec.namespace`.
pub fn updater_namespace<'a>(cr: &'a TopologyAwareScheduling, ctx: &'a BuildContext) -> &'a str {
    ctx.updater_namespace
        .as_deref()
        .unwrap_or(cr.spec.namespace.as_str())
}

/// The port of the object's OTLP endpoint (an empty one counts as none, as everywhere).
fn otlp_port(cr: &TopologyAwareScheduling) -> Result<Option<u16>, ValidationError> {
    cr.spec
        .observability
        .otlp_endpoint
        .as_deref()
        .filter(|e| !e.trim().is_empty())
        .map(tas_api::tas::otlp_port)
        .transpose()
        .map_err(ValidationError::InvalidOtlpEndpoint)
}

/// The CEL rules on the whole object and its lists; returns the object's name.
fn object_rules(cr: &TopologyAwareScheduling) -> Result<&str, ValidationError> {
    let name = cr
        .metadata
        .name
        .as_deref()
        .ok_or(ValidationError::MissingName)?;
    if name != SINGLETON_NAME {
        return Err(ValidationError::WrongName {
            name: name.to_owned(),
        });
    }
    let mut seen = BTreeSet::new();
    if let Some(repeated) = cr
        .spec
        .node_groups
        .iter()
        .find(|g| !seen.insert(g.name.as_str()))
    {
        return Err(ValidationError::DuplicateNodeGroup {
            group: repeated.name.clone(),
        });
    }
    let crd = &cr.spec.nrt_crd;
    if crd.delete_on_uninstall && !crd.manage {
        return Err(ValidationError::DeleteUnmanagedCrd);
    }
    Ok(name)
}

fn valid_group(
    cr: &TopologyAwareScheduling,
    ctx: &BuildContext,
    index: usize,
    group: NodeGroup,
) -> Result<ValidGroup, ValidationError> {
    let updater = group.merged_updater(&cr.spec.updater);
    let image = image(&updater.image, &ctx.updater_image_default).ok_or_else(|| {
        ValidationError::MissingUpdaterImage {
            group: group.name.clone(),
        }
    })?;
    let selector = Selector::parse(&group.node_selector).map_err(|reason| {
        ValidationError::InvalidNodeSelector {
            index,
            group: group.name.clone(),
            reason,
        }
    })?;
    Ok(ValidGroup {
        group,
        updater,
        image,
        selector,
    })
}

/// The object's image, else the operator's default; an empty one counts as none (and
/// an empty one in the object does not fall back to the default).
fn image(in_object: &Option<String>, default: &Option<String>) -> Option<String> {
    in_object
        .clone()
        .or_else(|| default.clone())
        .filter(|i| !i.is_empty())
}

#[cfg(test)]
mod tests;
