//! Why an object did not pass validation, and whether waiting can help.

use tas_api::labels::SelectorError;

/// A TopologyAwareScheduling object the operator refuses. Every message says what to
/// change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// The object has no name (only possible offline).
    #[error("the TopologyAwareScheduling object has no metadata.name")]
    MissingName,
    /// The object is not named `default` (only possible offline: a CEL rule of the CRD
    /// refuses it at apply).
    #[error(
        "metadata.name is '{name}' but must be 'default': TAS runs one stack per cluster, so the TopologyAwareScheduling object is a singleton named 'default' (the API server refuses any other name)"
    )]
    WrongName {
        /// The name as written.
        name: String,
    },
    /// Two node groups share a name (only possible offline: a CEL rule refuses it).
    #[error(
        "spec.nodeGroups[].name must be unique: '{group}' names more than one group (the API server refuses this)"
    )]
    DuplicateNodeGroup {
        /// The repeated name.
        group: String,
    },
    /// `deleteOnUninstall` without `manage` (only possible offline: a CEL rule refuses it).
    #[error(
        "spec.nrtCRD.deleteOnUninstall requires spec.nrtCRD.manage: the operator only deletes a CRD it manages (the API server refuses this)"
    )]
    DeleteUnmanagedCrd,
    /// Neither the CR nor the operator's flags name a node agent image.
    #[error(
        "no node agent image for node group '{group}': set spec.updater.image (or spec.nodeGroups[].updater.image for this group), or start the operator with --updater-image"
    )]
    MissingUpdaterImage {
        /// The node group without an image.
        group: String,
    },
    /// Neither the CR nor the operator's flags name a scheduler image.
    #[error(
        "no scheduler image: set spec.scheduler.image, or start the operator with --scheduler-image"
    )]
    MissingSchedulerImage,
    /// A node group's selector is not a valid label selector.
    #[error("spec.nodeGroups[{index}].nodeSelector (group '{group}'): {reason}")]
    InvalidNodeSelector {
        /// Position of the group in `spec.nodeGroups`.
        index: usize,
        /// The group's name.
        group: String,
        /// What is wrong.
        reason: SelectorError,
    },
    /// Some nodes are selected by more than one node group.
    #[error(transparent)]
    Overlap(#[from] super::OverlapError),
    /// The OTLP endpoint names no port a NetworkPolicy can open (only possible when the
    /// CRD's CEL rule was not there at apply, or offline).
    #[error(
        "spec.observability.otlpEndpoint: {0}; write it as http(s)://host:port, e.g. http://otel-collector.monitoring:4317"
    )]
    InvalidOtlpEndpoint(tas_api::tas::EndpointError),
    /// A host path outside the allow-list (only possible when the CRD's rule was not
    /// there at apply, or offline).
    #[error("{field}: {error}")]
    HostPathNotAllowed {
        /// The field, with the node group's index, e.g.
        /// `spec.nodeGroups[1].updater.kubelet.podResourcesDir`.
        field: String,
        /// The path and the rule refusing it.
        error: tas_api::tas::HostPathError,
    },
    /// An image the operator's install does not allow.
    #[error(
        "{field} is '{image}': {why}. The images allowed are {}: the operator's --updater-image and --scheduler-image, and its --allowed-images (TAS_ALLOWED_IMAGES; the chart's operator.allowedImages). Unset {field} to run the default, or have the installer allow the image",
        list(.allowed)
    )]
    ImageNotAllowed {
        /// The field, e.g. `spec.nodeGroups[0].updater.image`.
        field: String,
        /// The image as written.
        image: String,
        /// Malformed, or not in the set.
        why: String,
        /// The images allowed.
        allowed: Vec<String>,
    },
    /// A toleration whose taint key the operator's install does not allow.
    #[error(
        "{field} {}; the taint keys the operator's install allows tolerations of: {} (its --allowed-toleration-keys, TAS_ALLOWED_TOLERATION_KEYS; the chart's operator.allowedTolerationKeys; '*' allows any toleration)",
        toleration(.key),
        list(.allowed)
    )]
    TolerationNotAllowed {
        /// The field, e.g. `spec.updater.tolerations[0]`.
        field: String,
        /// The toleration's key; empty when it has none (it tolerates every taint).
        key: String,
        /// The taint keys allowed.
        allowed: Vec<String>,
    },
    /// A pod annotation that would change the operands' confinement (AppArmor, seccomp;
    /// only possible when the CRD's rule was not there at apply, or offline).
    #[error(
        "{field} sets the annotation '{key}', which changes the pod's AppArmor or seccomp confinement: the operator sets the operands' confinement itself; remove it"
    )]
    AnnotationNotAllowed {
        /// The field, e.g. `spec.nodeGroups[0].updater.podAnnotations`.
        field: String,
        /// The annotation key.
        key: String,
    },
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

fn toleration(key: &str) -> String {
    if key.is_empty() {
        "has no key, so it tolerates every taint (control-plane nodes included)".to_owned()
    } else {
        format!("tolerates the taint key '{key}', which is not allowed")
    }
}

impl ValidationError {
    /// Whether only a change of the object (or of the nodes, or of the operator's
    /// flags) can fix this: then the object is `Degraded` and waits for that change;
    /// otherwise the reconcile is retried with a backoff.
    ///
    /// Validation reads only the object, the operator's settings and the watch caches,
    /// so the same input fails the same way: every variant is permanent today. The
    /// match is exhaustive on purpose: a new variant must decide.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::MissingName
            | Self::WrongName { .. }
            | Self::DuplicateNodeGroup { .. }
            | Self::DeleteUnmanagedCrd
            | Self::MissingUpdaterImage { .. }
            | Self::MissingSchedulerImage
            | Self::InvalidNodeSelector { .. }
            | Self::Overlap(_)
            | Self::InvalidOtlpEndpoint(_)
            | Self::HostPathNotAllowed { .. }
            | Self::ImageNotAllowed { .. }
            | Self::TolerationNotAllowed { .. }
            | Self::AnnotationNotAllowed { .. } => true,
        }
    }

    /// CamelCase reason for the `Degraded` condition and the Warning Event.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingName => "MissingName",
            Self::WrongName { .. } => "WrongName",
            Self::DuplicateNodeGroup { .. } => "DuplicateNodeGroup",
            Self::DeleteUnmanagedCrd => "DeleteUnmanagedCrd",
            Self::MissingUpdaterImage { .. } | Self::MissingSchedulerImage => "MissingImage",
            Self::InvalidNodeSelector { .. } => "InvalidNodeSelector",
            Self::Overlap(_) => super::OverlapError::REASON,
            Self::InvalidOtlpEndpoint(_) => "InvalidOtlpEndpoint",
            Self::HostPathNotAllowed { .. } => "HostPathNotAllowed",
            Self::ImageNotAllowed { .. } => "ImageNotAllowed",
            Self::TolerationNotAllowed { .. } => "TolerationNotAllowed",
            Self::AnnotationNotAllowed { .. } => "AnnotationNotAllowed",
        }
    }
}
