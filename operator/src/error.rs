//! Why a reconcile failed, and whether retrying can help.
//!
//! Each step has its own error type ([`ValidationError`], [`BuildError`], [`ApplyError`],
//! [`PruneError`], [`StatusError`]); [`Error`] gathers them for the controller. A
//! *permanent* error is reported as `Degraded` and waits for a change of the object or
//! of the nodes (`Action::await_change`); a *transient* one is retried with a backoff
//! that grows per object ([`crate::backoff`]).

use crate::desired::BuildError;
use crate::reconcile::apply::ApplyError;
use crate::reconcile::prune::PruneError;
use crate::reconcile::status::StatusError;
use crate::validate::ValidationError;
use kube::runtime::finalizer;

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object (with the nodes it selects) is refused.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The desired objects could not be built from the validated object.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Server-side apply failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Pruning (or uninstalling) failed.
    #[error(transparent)]
    Prune(#[from] PruneError),
    /// Writing the status failed.
    #[error(transparent)]
    Status(#[from] StatusError),
    /// `spec.nrtCRD.manage` is false and nobody installed the NRT CRD.
    #[error(
        "spec.nrtCRD.manage is false but the CRD {0} is not installed or not Established: install it, or set spec.nrtCRD.manage to true"
    )]
    NrtCrdMissing(String),
    /// The node agents' namespace of the install (`--updater-namespace`) does not exist.
    #[error(
        "the node agents' namespace {0} (the operator's --updater-namespace) does not exist: the installer creates it, with the Pod Security level privileged and a RoleBinding of the ClusterRole tas-operator-operands to the operator (config/manager/namespace.yaml, config/rbac/operands_role_binding.yaml, or the chart)"
    )]
    UpdaterNamespaceMissing(String),
    /// The node agents' namespace could not be read.
    #[error("reading the node agents' namespace {name}: {source}")]
    ReadUpdaterNamespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The controller's caches never filled.
    #[error("the controller's caches are not synced: {0}")]
    CachesNotSynced(String),
    /// Adding or removing the finalizer failed.
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<finalizer::Error<Error>>),
}

impl Error {
    /// Whether only a change of the object (or of the nodes) can fix this.
    ///
    /// Exhaustive on purpose: a new variant must decide.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Invalid(e) => e.is_permanent(),
            Self::Build(e) => e.is_permanent(),
            Self::NrtCrdMissing(_) => true,
            Self::Apply(e) => e.is_permanent(),
            // The installer fixes it, not an edit of the object: keep retrying.
            Self::UpdaterNamespaceMissing(_) | Self::ReadUpdaterNamespace { .. } => false,
            Self::Prune(_) | Self::Status(_) | Self::CachesNotSynced(_) => false,
            Self::Finalizer(e) => match e.as_ref() {
                finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => {
                    e.is_permanent()
                }
                finalizer::Error::AddFinalizer(_) | finalizer::Error::RemoveFinalizer(_) => false,
                finalizer::Error::UnnamedObject | finalizer::Error::InvalidFinalizer => true,
            },
        }
    }

    /// CamelCase reason for the `Degraded` condition and the Warning event.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Invalid(e) => e.reason(),
            Self::Build(e) => e.reason(),
            Self::Apply(_) => "ApplyFailed",
            Self::Prune(_) => "PruneFailed",
            Self::Status(_) => "StatusUpdateFailed",
            Self::NrtCrdMissing(_) => "NrtCrdMissing",
            Self::UpdaterNamespaceMissing(_) => "UpdaterNamespaceMissing",
            Self::ReadUpdaterNamespace { .. } => "ApplyFailed",
            Self::CachesNotSynced(_) => "CachesNotSynced",
            Self::Finalizer(_) => "FinalizerFailed",
        }
    }
}

/// The finalizer helper wraps the reconcile's own error; unwrap it so that its
/// permanence and reason survive.
impl From<finalizer::Error<Error>> for Error {
    fn from(e: finalizer::Error<Error>) -> Self {
        match e {
            finalizer::Error::ApplyFailed(inner) | finalizer::Error::CleanupFailed(inner) => inner,
            other => Self::Finalizer(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::OverlapError;
    use std::collections::BTreeMap;

    #[test]
    fn permanence_and_reasons() {
        let overlap = Error::from(ValidationError::from(OverlapError {
            overlaps: BTreeMap::from([("n".into(), vec!["a".into(), "b".into()])]),
        }));
        assert!(overlap.is_permanent());
        assert_eq!(overlap.reason(), "NodeGroupsOverlap");
        let image = Error::from(ValidationError::MissingSchedulerImage);
        assert!(image.is_permanent());
        assert_eq!(image.reason(), "MissingImage");
        let unsynced = Error::CachesNotSynced("x".into());
        assert!(!unsynced.is_permanent());
        // The finalizer's wrapping is removed.
        let wrapped: Error = finalizer::Error::ApplyFailed(overlap).into();
        assert!(matches!(
            wrapped,
            Error::Invalid(ValidationError::Overlap(_))
        ));
        let add: Error = finalizer::Error::<Error>::UnnamedObject.into();
        assert!(add.is_permanent());
    }
}
