//! A pod's `spec.resourceClaims` → the ResourceClaim objects to allocate, from the
//! store, or why no node can take the pod yet.
//!
//! A pod claim names its ResourceClaim directly (`resourceClaimName`) or through a
//! template (`resourceClaimTemplateName`), whose generated claim's name the
//! ResourceClaim controller writes to `status.resourceClaimStatuses` (an entry without
//! a name means no claim is needed). A generated claim must be owned by the pod. A
//! claim being deleted, or reserved for as many consumers as the API allows, cannot
//! take the pod.

use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::ResourceExt;

use super::DraStore;

/// Most consumers `status.reservedFor` may list (the API's limit).
pub const MAX_CONSUMERS: usize = 256;

/// Why a pod's claims cannot be allocated on any node yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimProblem {
    /// The claim does not exist (yet).
    #[error("waiting for ResourceClaim {0} to be created")]
    Missing(ClaimRef),
    /// The template's claim has not been generated yet.
    #[error(
        "waiting for the ResourceClaim of pod claim {pod_claim} (template {template}) to be created"
    )]
    NotGenerated { pod_claim: String, template: String },
    /// A generated claim that belongs to another pod.
    #[error("ResourceClaim {0} was not generated for this pod")]
    NotForPod(ClaimRef),
    /// The claim is being deleted.
    #[error("ResourceClaim {0} is being deleted")]
    Deleting(ClaimRef),
    /// `status.reservedFor` is full.
    #[error(
        "ResourceClaim {0} is already reserved for {MAX_CONSUMERS} consumers, the most the API allows"
    )]
    Full(ClaimRef),
    /// A pod claim naming neither a claim nor a template.
    #[error("pod claim {0} names neither a ResourceClaim nor a ResourceClaimTemplate")]
    Unnamed(String),
}

/// `namespace/name` of a claim, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Whether the pod lists any resource claim.
pub fn has_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

/// The pod's claims in `spec.resourceClaims` order (pod claims that need no claim
/// left out), as the store has them.
pub fn resolve(store: &DraStore, pod: &Pod) -> Result<Vec<ResourceClaim>, ClaimProblem> {
    let namespace = pod.namespace().unwrap_or_default();
    let uid = pod.uid().unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut claims = Vec::new();
    for pod_claim in pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
    {
        let (name, generated) = match (
            &pod_claim.resource_claim_name,
            &pod_claim.resource_claim_template_name,
        ) {
            (Some(name), _) => (name.clone(), false),
            (None, Some(template)) => {
                let status = statuses
                    .into_iter()
                    .flatten()
                    .find(|s| s.name == pod_claim.name)
                    .ok_or_else(|| ClaimProblem::NotGenerated {
                        pod_claim: pod_claim.name.clone(),
                        template: template.clone(),
                    })?;
                match &status.resource_claim_name {
                    Some(name) => (name.clone(), true),
                    // The controller decided no claim is needed.
                    None => continue,
                }
            }
            (None, None) => return Err(ClaimProblem::Unnamed(pod_claim.name.clone())),
        };
        let reference = || ClaimRef {
            namespace: namespace.clone(),
            name: name.clone(),
        };
        let claim = store
            .claim(&namespace, &name)
            .ok_or_else(|| ClaimProblem::Missing(reference()))?;
        if generated && !owned_by(claim, &uid) {
            return Err(ClaimProblem::NotForPod(reference()));
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Err(ClaimProblem::Deleting(reference()));
        }
        let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref());
        let ours = reserved.is_some_and(|r| r.iter().any(|c| c.uid == uid));
        if !ours && reserved.is_some_and(|r| r.len() >= MAX_CONSUMERS) {
            return Err(ClaimProblem::Full(reference()));
        }
        claims.push(ResourceClaim::clone(claim));
    }
    Ok(claims)
}

/// Whether `claim`'s controlling owner is the pod with `uid`.
fn owned_by(claim: &ResourceClaim, uid: &str) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}
