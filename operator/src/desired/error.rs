//! Why the desired state could not be built.

/// A failure to build the desired objects. Builders are pure, so the same object fails
/// the same way until someone changes it: every variant says what to change.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
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
    /// A node group's selector cannot be turned into node affinity.
    #[error("spec.nodeGroups[{index}].nodeSelector (group '{group}'): {reason}")]
    InvalidNodeSelector {
        /// Position of the group in `spec.nodeGroups`.
        index: usize,
        /// The group's name.
        group: String,
        /// What is wrong, for a human.
        reason: String,
    },
    /// The TopologyAwareScheduling object has no name (only possible offline).
    #[error("the TopologyAwareScheduling object has no metadata.name")]
    MissingName,
    /// The scheduler's configuration could not be rendered as YAML.
    #[error("rendering the scheduler configuration: {0}")]
    RenderConfig(#[source] serde_norway::Error),
    /// A built object could not be serialised.
    #[error("serialising {kind} '{name}': {source}")]
    Serialize {
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        /// The serialiser's error.
        #[source]
        source: serde_json::Error,
    },
}

impl BuildError {
    /// Whether retrying cannot help until the CR (or the operator's flags) change.
    ///
    /// Building is pure: the same input fails the same way, so every variant is permanent.
    /// The match is exhaustive on purpose: a new variant must decide.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::MissingUpdaterImage { .. }
            | Self::MissingSchedulerImage
            | Self::InvalidNodeSelector { .. }
            | Self::MissingName => true,
            // Not the user's doing (a bug), but retrying renders the same bytes again.
            Self::RenderConfig(_) | Self::Serialize { .. } => true,
        }
    }

    /// CamelCase reason for the `Degraded` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingUpdaterImage { .. } | Self::MissingSchedulerImage => "MissingImage",
            Self::InvalidNodeSelector { .. } => "InvalidNodeSelector",
            Self::MissingName => "MissingName",
            Self::RenderConfig(_) | Self::Serialize { .. } => "InternalError",
        }
    }
}
