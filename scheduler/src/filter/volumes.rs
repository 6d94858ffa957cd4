//! A pod's volumes, resolved once per scheduling attempt into what the per-node volume
//! filters compare ([`VolumeInput`]) — or into the reason no node can take the pod yet
//! ([`VolumeProblem`]), which keeps it Pending with a message naming the claim.
//!
//! [`prepare`] walks the pod's `persistentVolumeClaim` and generic `ephemeral` volumes
//! (whose claim is `<pod>-<volume>`, and must be owned by the pod) in order, like
//! kube-scheduler's `VolumeBinding` PreFilter and `VolumeRestrictions`:
//!
//! 1. the claim must exist and not be being deleted;
//! 2. it must be bound (a volume named and the binding complete). TAS does not bind
//!    volumes: an unbound claim keeps the pod Pending — with a `WaitForFirstConsumer`
//!    storage class the message says so (the claim will never be bound for a pod
//!    nobody places: bind it first, or let the default scheduler place the pod);
//!    otherwise it waits for the claim to be bound;
//! 3. its PersistentVolume must be known; its node affinity and zone labels go to
//!    [`super::volume_binding`] and [`super::volume_zone`], which judge each node;
//! 4. a `ReadWriteOncePod` claim must not be used by another pod on any node — bound,
//!    or assumed while its binding is in flight ([`super::volume_restrictions`]).
//!
//! Nothing here is node-specific, so every problem is unresolvable by preemption.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::node::NodeInfo;
use super::volume_catalog::{BindingMode, VolumeCatalog, VolumeInfo};
use super::volume_restrictions;

/// What the per-node volume filters compare, for one pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeInput {
    /// The pod's bound volumes that constrain nodes (node affinity or zone labels).
    pub volumes: Vec<Arc<VolumeInfo>>,
}

impl VolumeInput {
    /// Whether no volume constrains the pod's node.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
    }
}

/// Why no node can take the pod because of a volume; the message names the claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeProblem {
    /// The claim does not exist.
    #[error("persistentvolumeclaim \"{claim}\" not found")]
    ClaimMissing {
        /// Claim name.
        claim: String,
    },
    /// The claim is being deleted.
    #[error("persistentvolumeclaim \"{claim}\" is being deleted")]
    ClaimDeleting {
        /// Claim name.
        claim: String,
    },
    /// A generic ephemeral volume's claim exists but belongs to something else.
    #[error(
        "persistentvolumeclaim \"{claim}\" was not created for pod \"{pod}\" (pod is not owner)"
    )]
    NotOwner {
        /// Claim name.
        claim: String,
        /// Pod name.
        pod: String,
    },
    /// The claim is bound to a volume that does not exist.
    #[error(
        "persistentvolumeclaim \"{claim}\" is bound to persistentvolume \"{volume}\", which was not found"
    )]
    VolumeMissing {
        /// Claim name.
        claim: String,
        /// Volume name.
        volume: String,
    },
    /// The claim is unbound and its storage class does not exist.
    #[error(
        "persistentvolumeclaim \"{claim}\" is unbound and its storageclass \"{class}\" was not found"
    )]
    ClassMissing {
        /// Claim name.
        claim: String,
        /// Storage class name.
        class: String,
    },
    /// The claim is unbound and waits for a consumer to be placed: TAS does not bind.
    #[error(
        "persistentvolumeclaim \"{claim}\" is unbound and uses WaitForFirstConsumer storage class \"{class}\"; TAS does not bind volumes: bind the claim first (a PersistentVolume pre-bound to it, or an Immediate storage class), or leave this pod to the default scheduler"
    )]
    WaitForFirstConsumer {
        /// Claim name.
        claim: String,
        /// Storage class name.
        class: String,
    },
    /// The claim is unbound and binds without waiting for a consumer.
    #[error(
        "persistentvolumeclaim \"{claim}\" is not bound yet ({class}): waiting for the claim to be bound"
    )]
    Unbound {
        /// Claim name.
        claim: String,
        /// How the claim is provisioned, for the message.
        class: ClassNote,
    },
    /// A `ReadWriteOncePod` claim is used by another pod.
    #[error(
        "persistentvolumeclaim \"{claim}\" has the ReadWriteOncePod access mode and is already used by pod {user}"
    )]
    ReadWriteOncePodInUse {
        /// Claim name.
        claim: String,
        /// `namespace/name` of the pod using it.
        user: String,
    },
}

/// The storage class of an unbound claim, as its message words it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassNote(pub Option<String>);

impl fmt::Display for ClassNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_deref() {
            None | Some("") => f.write_str("no storage class"),
            Some(class) => write!(f, "storage class \"{class}\" binds immediately"),
        }
    }
}

/// The names of the claims the pod's volumes use (in its namespace), in volume order:
/// `persistentVolumeClaim.claimName`, and `<pod>-<volume>` for a generic ephemeral
/// volume.
pub fn claim_names(pod: &Pod) -> Vec<String> {
    claims(pod).map(|(name, _)| name).collect()
}

/// Whether the pod uses any claim.
pub fn has_claims(pod: &Pod) -> bool {
    claims(pod).next().is_some()
}

/// Each claim of the pod with whether it is a generic ephemeral volume's.
fn claims(pod: &Pod) -> impl Iterator<Item = (String, bool)> + '_ {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(move |v| {
            if let Some(pvc) = &v.persistent_volume_claim {
                Some((pvc.claim_name.clone(), false))
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| (format!("{pod_name}-{}", v.name), true))
            }
        })
}

/// Resolves the pod's claims against `catalog` and checks its `ReadWriteOncePod`
/// claims against the pods on `nodes`; see the module documentation.
pub fn prepare<'a>(
    catalog: &VolumeCatalog,
    pod: &Pod,
    nodes: impl IntoIterator<Item = &'a NodeInfo>,
) -> Result<VolumeInput, VolumeProblem> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let mut input = VolumeInput::default();
    let mut exclusive = Vec::new();
    for (name, ephemeral) in claims(pod) {
        let Some(claim) = catalog.claim(namespace, &name) else {
            return Err(VolumeProblem::ClaimMissing { claim: name });
        };
        if claim.deleting {
            return Err(VolumeProblem::ClaimDeleting { claim: name });
        }
        if ephemeral && claim.controller_uid.as_deref() != Some(uid) {
            let pod = pod.metadata.name.clone().unwrap_or_default();
            return Err(VolumeProblem::NotOwner { claim: name, pod });
        }
        if claim.read_write_once_pod {
            exclusive.push(name.clone());
        }
        let volume = match (&claim.volume_name, claim.is_bound()) {
            (Some(volume), true) => volume,
            _ => return Err(unbound(catalog, name, claim.storage_class.clone())),
        };
        let Some(info) = catalog.volume(volume) else {
            return Err(VolumeProblem::VolumeMissing {
                claim: name,
                volume: volume.clone(),
            });
        };
        if info.is_constrained() && !input.volumes.contains(info) {
            input.volumes.push(info.clone());
        }
    }
    if !exclusive.is_empty()
        && let Some((claim, user)) =
            volume_restrictions::read_write_once_pod_user(nodes, namespace, uid, &exclusive)
    {
        return Err(VolumeProblem::ReadWriteOncePodInUse { claim, user });
    }
    Ok(input)
}

/// Why an unbound claim keeps its pod waiting.
fn unbound(catalog: &VolumeCatalog, claim: String, class: Option<String>) -> VolumeProblem {
    match class.as_deref().filter(|c| !c.is_empty()) {
        None => VolumeProblem::Unbound {
            claim,
            class: ClassNote(class),
        },
        Some(name) => match catalog.class(name) {
            None => VolumeProblem::ClassMissing {
                claim,
                class: name.to_owned(),
            },
            Some(BindingMode::WaitForFirstConsumer) => VolumeProblem::WaitForFirstConsumer {
                claim,
                class: name.to_owned(),
            },
            Some(BindingMode::Immediate) => VolumeProblem::Unbound {
                claim,
                class: ClassNote(class),
            },
        },
    }
}
