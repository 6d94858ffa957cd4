//! Claims and their classes → the normalized requests the search works on, or the
//! reason a claim cannot be handled (a feature TAS does not support, a selector that
//! does not compile, a missing class).
//!
//! Each request becomes a list of alternatives: one for `exactly`, one per subrequest
//! of `firstAvailable`, tried in order. An alternative carries its class's selectors
//! and its own, compiled, and how many devices it needs. Every alternative is
//! checked here, also those the search may never reach, as Kubernetes does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    CapacityRequirements, DeviceClass, DeviceSelector, DeviceToleration, ResourceClaim,
};

use super::cel::{Selector, SelectorCache};
use super::constraint::{Constraint, ConstraintKind};
use super::error::{AllocateError, SelectorOrigin, Unsupported};

/// Most devices one claim's allocation may hold (the API's limit on results).
pub const MAX_DEVICES_PER_CLAIM: usize = 32;

/// Looks device classes up by name.
pub trait DeviceClasses {
    fn class(&self, name: &str) -> Option<&DeviceClass>;
}

impl DeviceClasses for BTreeMap<String, DeviceClass> {
    fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.get(name)
    }
}

impl DeviceClasses for HashMap<String, DeviceClass> {
    fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.get(name)
    }
}

/// How many devices an alternative takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Exact(usize),
    All,
}

/// A compiled selector and where it comes from, for error messages.
#[derive(Debug, Clone)]
pub(crate) struct PlannedSelector {
    pub origin: SelectorOrigin,
    pub index: usize,
    pub selector: Arc<Selector>,
}

/// One way to satisfy a request: the request itself or one of its subrequests.
#[derive(Debug, Clone)]
pub(crate) struct Alternative<'a> {
    /// Dense id over all alternatives of the plan (for per-alternative caches).
    pub id: usize,
    /// The name results carry: `request` or `request/subrequest`.
    pub result_name: String,
    pub class: &'a DeviceClass,
    pub class_name: String,
    /// Class selectors first, then the request's.
    pub selectors: Vec<PlannedSelector>,
    pub mode: Mode,
}

#[derive(Debug, Clone)]
pub(crate) struct PlannedRequest<'a> {
    pub name: String,
    pub alternatives: Vec<Alternative<'a>>,
}

/// A claim to allocate, normalized.
#[derive(Debug, Clone)]
pub(crate) struct PlannedClaim<'a> {
    /// Index of the claim in the caller's list.
    pub index: usize,
    pub name: String,
    pub claim: &'a ResourceClaim,
    pub requests: Vec<PlannedRequest<'a>>,
    pub constraints: Vec<Constraint>,
}

/// `namespace/name` of a claim.
pub fn claim_name(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// What an `exactly` request and a subrequest have in common.
struct RequestFields<'a> {
    name: String,
    class_name: &'a str,
    allocation_mode: Option<&'a str>,
    count: Option<i64>,
    admin_access: Option<bool>,
    capacity: Option<&'a CapacityRequirements>,
    tolerations: Option<&'a Vec<DeviceToleration>>,
    selectors: Option<&'a Vec<DeviceSelector>>,
}

/// Normalizes one claim without an allocation; `next_id` numbers alternatives.
pub(crate) fn plan_claim<'a>(
    index: usize,
    claim: &'a ResourceClaim,
    classes: &'a dyn DeviceClasses,
    cache: &SelectorCache,
    next_id: &mut usize,
) -> Result<PlannedClaim<'a>, AllocateError> {
    let name = claim_name(claim);
    let invalid = |problem: String| AllocateError::InvalidClaim {
        claim: name.clone(),
        problem,
    };
    let devices = &claim.spec.devices;
    let mut requests = Vec::new();
    let mut minimum = 0usize;
    for request in devices
        .as_ref()
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
    {
        let fields: Vec<RequestFields<'a>> = match (&request.exactly, &request.first_available) {
            (Some(exact), None) => vec![RequestFields {
                name: request.name.clone(),
                class_name: &exact.device_class_name,
                allocation_mode: exact.allocation_mode.as_deref(),
                count: exact.count,
                admin_access: exact.admin_access,
                capacity: exact.capacity.as_ref(),
                tolerations: exact.tolerations.as_ref(),
                selectors: exact.selectors.as_ref(),
            }],
            (None, Some(subs)) if !subs.is_empty() => subs
                .iter()
                .map(|sub| RequestFields {
                    name: sub.name.clone(),
                    class_name: &sub.device_class_name,
                    allocation_mode: sub.allocation_mode.as_deref(),
                    count: sub.count,
                    admin_access: None,
                    capacity: sub.capacity.as_ref(),
                    tolerations: sub.tolerations.as_ref(),
                    selectors: sub.selectors.as_ref(),
                })
                .collect(),
            _ => {
                return Err(invalid(format!(
                    "request {}: exactly one of exactly and firstAvailable must be set",
                    request.name
                )));
            }
        };
        let subrequests = request.first_available.is_some();
        let mut alternatives = Vec::with_capacity(fields.len());
        for field in fields {
            let result_name = if subrequests {
                format!("{}/{}", request.name, field.name)
            } else {
                field.name.clone()
            };
            alternatives.push(plan_alternative(
                &name,
                result_name,
                &field,
                classes,
                cache,
                next_id,
            )?);
        }
        let fewest = alternatives
            .iter()
            .map(|a| match a.mode {
                Mode::Exact(n) => n,
                Mode::All => 1,
            })
            .min()
            .unwrap_or(0);
        minimum = minimum.saturating_add(fewest);
        requests.push(PlannedRequest {
            name: request.name.clone(),
            alternatives,
        });
    }
    if minimum > MAX_DEVICES_PER_CLAIM {
        return Err(invalid(format!(
            "asks for at least {minimum} devices, more than the limit of {MAX_DEVICES_PER_CLAIM} per claim"
        )));
    }
    let known: BTreeSet<String> = requests
        .iter()
        .flat_map(|r| {
            std::iter::once(r.name.clone())
                .chain(r.alternatives.iter().map(|a| a.result_name.clone()))
        })
        .collect();
    let mut constraints = Vec::new();
    for (i, constraint) in devices
        .as_ref()
        .and_then(|d| d.constraints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let kind = match (&constraint.match_attribute, &constraint.distinct_attribute) {
            (Some(attribute), None) => ConstraintKind::Match(attribute.clone()),
            (None, Some(attribute)) => ConstraintKind::Distinct(attribute.clone()),
            _ => {
                return Err(invalid(format!(
                    "constraint #{i}: exactly one of matchAttribute and distinctAttribute must be set"
                )));
            }
        };
        let (ConstraintKind::Match(attribute) | ConstraintKind::Distinct(attribute)) = &kind;
        if !attribute.contains('/') {
            return Err(invalid(format!(
                "constraint #{i}: attribute {attribute:?} is not fully qualified (domain/id)"
            )));
        }
        let names: BTreeSet<String> = constraint.requests.iter().flatten().cloned().collect();
        if let Some(unknown) = names.iter().find(|n| !known.contains(*n)) {
            return Err(invalid(format!(
                "constraint #{i}: unknown request {unknown:?}"
            )));
        }
        constraints.push(Constraint::new(kind, names));
    }
    Ok(PlannedClaim {
        index,
        name,
        claim,
        requests,
        constraints,
    })
}

fn plan_alternative<'a>(
    claim: &str,
    result_name: String,
    fields: &RequestFields<'a>,
    classes: &'a dyn DeviceClasses,
    cache: &SelectorCache,
    next_id: &mut usize,
) -> Result<Alternative<'a>, AllocateError> {
    let unsupported = |feature| AllocateError::Unsupported {
        claim: claim.to_owned(),
        request: result_name.clone(),
        feature,
    };
    let invalid = |problem: String| AllocateError::InvalidClaim {
        claim: claim.to_owned(),
        problem: format!("request {result_name}: {problem}"),
    };
    if fields.admin_access == Some(true) {
        return Err(unsupported(Unsupported::AdminAccess));
    }
    if fields
        .capacity
        .and_then(|c| c.requests.as_ref())
        .is_some_and(|r| !r.is_empty())
    {
        return Err(unsupported(Unsupported::ConsumableCapacity));
    }
    if fields.tolerations.is_some_and(|t| !t.is_empty()) {
        return Err(unsupported(Unsupported::Tolerations));
    }
    if fields.class_name.is_empty() {
        return Err(invalid("no device class name".to_owned()));
    }
    let class = classes
        .class(fields.class_name)
        .ok_or_else(|| AllocateError::ClassNotFound {
            claim: claim.to_owned(),
            request: result_name.clone(),
            class: fields.class_name.to_owned(),
        })?;
    let mode = match (fields.allocation_mode.unwrap_or("ExactCount"), fields.count) {
        // A count past the limit per claim is not an error of its own: such a
        // subrequest never fits and the next one is tried, as in kube-scheduler; the
        // claim's minimum (in `plan_claim`) catches a request that cannot fit at all.
        ("ExactCount", count) => {
            let count = count.unwrap_or(1);
            match usize::try_from(count) {
                Ok(n) if n >= 1 => Mode::Exact(n),
                _ => return Err(invalid(format!("count {count} is not positive"))),
            }
        }
        ("All", _) => Mode::All,
        (other, _) => return Err(invalid(format!("unsupported allocationMode {other:?}"))),
    };
    let class_name = fields.class_name.to_owned();
    let class_selectors = class.spec.selectors.iter().flatten();
    let origin = SelectorOrigin::Class(class_name.clone());
    let mut selectors = compile_all(class_selectors, &origin, cache)?;
    let origin = SelectorOrigin::Claim {
        claim: claim.to_owned(),
        request: result_name.clone(),
    };
    selectors.extend(compile_all(
        fields.selectors.into_iter().flatten(),
        &origin,
        cache,
    )?);
    let id = *next_id;
    *next_id += 1;
    Ok(Alternative {
        id,
        result_name,
        class,
        class_name,
        selectors,
        mode,
    })
}

/// Compiles a list of selectors, failing on the first that does not compile.
fn compile_all<'s>(
    selectors: impl Iterator<Item = &'s DeviceSelector>,
    origin: &SelectorOrigin,
    cache: &SelectorCache,
) -> Result<Vec<PlannedSelector>, AllocateError> {
    let mut compiled = Vec::new();
    for (index, selector) in selectors.enumerate() {
        let Some(cel) = &selector.cel else {
            return Err(AllocateError::SelectorCompile {
                origin: origin.clone(),
                index,
                error: super::cel::CompileError::Unsupported("selectors other than CEL"),
            });
        };
        let selector = cache.get(&cel.expression);
        if let Some(error) = selector.error() {
            return Err(AllocateError::SelectorCompile {
                origin: origin.clone(),
                index,
                error: error.clone(),
            });
        }
        compiled.push(PlannedSelector {
            origin: origin.clone(),
            index,
            selector,
        });
    }
    Ok(compiled)
}
