//! Why the desired state could not be built from a validated object.

/// A failure to build the desired objects. Everything the user can get wrong is refused
/// earlier, by `crate::validate`; what is left here is the operator's own doing.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
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
    /// Whether retrying cannot help until the CR (or the operator) changes.
    ///
    /// Building is pure: the same input fails the same way, so every variant is
    /// permanent. The match is exhaustive on purpose: a new variant must decide.
    pub fn is_permanent(&self) -> bool {
        match self {
            // Not the user's doing (a bug), but retrying renders the same bytes again.
            Self::RenderConfig(_) | Self::Serialize { .. } => true,
        }
    }

    /// CamelCase reason for the `Degraded` condition.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::RenderConfig(_) | Self::Serialize { .. } => "InternalError",
        }
    }
}
