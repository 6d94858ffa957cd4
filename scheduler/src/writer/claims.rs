//! The ResourceClaim writes of a bind: each claim of the pod gets the allocation TAS
//! chose (if it had none) and the pod in `status.reservedFor`, before the pod is bound;
//! and their undo when the pod is not bound after all.
//!
//! [`reservations`] and [`release_patch`] are pure (claims in, writes out);
//! [`reserve`] and [`release`] send them. A reservation is written against the claim's
//! `resourceVersion` the allocation was computed from (a JSON merge patch carrying it
//! is refused with 409 if the claim changed since), so a claim changed meanwhile is
//! never overwritten: the pod is retried on the new claim. A claim newly allocated
//! first gets the `resource.kubernetes.io/delete-protection` finalizer, as
//! kube-scheduler adds it: with it, the ResourceClaim controller clears the allocation
//! once the last consumer is gone, and the claim cannot vanish while allocated.
//!
//! A release reads the claim afresh and removes only this pod's entry from
//! `reservedFor`; the allocation is cleared too if it is the one TAS wrote and nobody
//! else is reserved. The ResourceClaim controller removes entries of deleted pods as
//! well: whichever comes second finds nothing to do, and a conflict is retried on the
//! claim as it is then.

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::dra::Allocation;
use crate::dra_state::allocated_devices;

/// The finalizer that keeps an allocated claim until it is deallocated.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// How often a release retries on a conflict before giving up.
const RELEASE_ATTEMPTS: usize = 3;

/// One claim's write before a bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimReservation {
    /// Claim namespace.
    pub namespace: String,
    /// Claim name.
    pub name: String,
    /// The claim's `resourceVersion` the allocation was computed from.
    pub resource_version: String,
    /// `metadata.finalizers` with [`DELETE_PROTECTION`] added, when an allocation is
    /// written and the claim lacks it.
    pub finalizers: Option<Vec<String>>,
    /// The `status` fields to write: `reservedFor` (whole, with the pod) and, for a
    /// claim TAS allocates, `allocation`.
    pub status: Value,
}

impl ClaimReservation {
    /// `namespace/name`.
    pub fn claim(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The undo of a [`ClaimReservation`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRelease {
    /// Claim namespace.
    pub namespace: String,
    /// Claim name.
    pub name: String,
    /// The claim's uid (a claim of the same name created since is not touched).
    pub claim_uid: String,
    /// The pod whose `reservedFor` entry goes.
    pub pod_uid: String,
    /// The devices (`driver/pool/device`, sorted) of the allocation TAS wrote, if it
    /// wrote one: cleared when the claim still holds exactly these and nobody else is
    /// reserved.
    pub ours: Option<Vec<String>>,
}

/// The writes that reserve `claims` (the pod's, as the allocation was computed from
/// them) for the pod `pod_name`/`pod_uid`, with `allocation`'s new results; claims
/// already allocated and reserved for the pod need none. Also the releases that undo
/// them.
pub fn reservations(
    claims: &[ResourceClaim],
    allocation: &Allocation,
    pod_name: &str,
    pod_uid: &str,
) -> (Vec<ClaimReservation>, Vec<ClaimRelease>) {
    let mut writes = Vec::new();
    let mut releases = Vec::new();
    for (claim, allocated) in claims.iter().zip(&allocation.claims) {
        let mut reserved: Vec<ResourceClaimConsumerReference> = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.clone())
            .unwrap_or_default();
        let ours = reserved.iter().any(|r| r.uid == pod_uid);
        if ours && allocated.result.is_none() {
            continue;
        }
        if !ours {
            reserved.push(ResourceClaimConsumerReference {
                api_group: None,
                resource: "pods".to_owned(),
                name: pod_name.to_owned(),
                uid: pod_uid.to_owned(),
            });
        }
        let mut status = json!({ "reservedFor": reserved });
        let mut finalizers = None;
        if let Some(result) = &allocated.result {
            status["allocation"] = json!(result);
            if !claim.finalizers().iter().any(|f| f == DELETE_PROTECTION) {
                let mut list = claim.finalizers().to_vec();
                list.push(DELETE_PROTECTION.to_owned());
                finalizers = Some(list);
            }
        }
        let namespace = claim.namespace().unwrap_or_default();
        writes.push(ClaimReservation {
            namespace: namespace.clone(),
            name: claim.name_any(),
            resource_version: claim.resource_version().unwrap_or_default(),
            finalizers,
            status,
        });
        releases.push(ClaimRelease {
            namespace,
            name: claim.name_any(),
            claim_uid: claim.uid().unwrap_or_default(),
            pod_uid: pod_uid.to_owned(),
            ours: allocated.result.as_ref().map(|_| {
                let mut devices: Vec<String> =
                    allocated.devices.iter().map(|d| d.id.to_string()).collect();
                devices.sort();
                devices
            }),
        });
    }
    (writes, releases)
}

/// The merge patch that undoes `release` on `claim` as it is now, or `None` when
/// there is nothing to undo (the entry is gone, the claim is another one).
pub fn release_patch(claim: &ResourceClaim, release: &ClaimRelease) -> Option<Value> {
    if claim.uid().as_deref() != Some(release.claim_uid.as_str()) {
        return None;
    }
    let reserved: Vec<ResourceClaimConsumerReference> = claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.clone())
        .unwrap_or_default();
    let kept: Vec<&ResourceClaimConsumerReference> = reserved
        .iter()
        .filter(|r| r.uid != release.pod_uid)
        .collect();
    let removed = kept.len() < reserved.len();
    let clear = kept.is_empty()
        && release.ours.as_ref().is_some_and(|ours| {
            let mut held: Vec<String> = allocated_devices(claim)
                .iter()
                .map(ToString::to_string)
                .collect();
            held.sort();
            !held.is_empty() && &held == ours
        });
    if !removed && !clear {
        return None;
    }
    let mut status = json!({
        "reservedFor": if kept.is_empty() { Value::Null } else { json!(kept) }
    });
    if clear {
        status["allocation"] = Value::Null;
    }
    Some(json!({
        "metadata": {"resourceVersion": claim.resource_version().unwrap_or_default()},
        "status": status,
    }))
}

/// Sends `write`: the finalizer first if needed, then the status, each against the
/// claim's resourceVersion.
pub(super) async fn reserve(client: &Client, write: &ClaimReservation) -> Result<(), kube::Error> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &write.namespace);
    let params = PatchParams::default();
    let mut version = write.resource_version.clone();
    if let Some(finalizers) = &write.finalizers {
        let patch = json!({"metadata": {"resourceVersion": version, "finalizers": finalizers}});
        let updated = api
            .patch(&write.name, &params, &Patch::Merge(&patch))
            .await?;
        version = updated.resource_version().unwrap_or_default();
    }
    let patch = json!({"metadata": {"resourceVersion": version}, "status": write.status});
    api.patch_status(&write.name, &params, &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Sends `release`: reads the claim, writes [`release_patch`] if there is anything to
/// undo, again on a conflict.
pub(super) async fn release(client: &Client, release: &ClaimRelease) -> Result<(), kube::Error> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &release.namespace);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let Some(claim) = api.get_opt(&release.name).await? else {
            return Ok(());
        };
        let Some(patch) = release_patch(&claim, release) else {
            return Ok(());
        };
        match api
            .patch_status(
                &release.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < RELEASE_ATTEMPTS => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
