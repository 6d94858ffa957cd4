//! Transitional. The agent's `/healthz`, `/readyz` and `/metrics` are served by
//! [`tas_runtime::http`], and the agent reports readiness through a
//! [`tas_runtime::http::Readiness`]. What remains here lets callers that still hand
//! [`Agent::new`](crate::agent::Agent::new) an `Arc<http::Readiness>` (the end-to-end
//! stack) build until they pass a `tas_runtime::http::Readiness`; then it goes.

use std::sync::Arc;

/// The readiness the agent used to take: a handle on a
/// [`tas_runtime::http::Readiness`].
#[derive(Debug, Clone)]
pub struct Readiness(tas_runtime::http::Readiness);

impl Readiness {
    /// Not ready, for `reason`, until the agent's first publish.
    pub fn new(reason: impl Into<String>) -> Self {
        Self(tas_runtime::http::Readiness::not_ready(reason))
    }

    /// `None` when ready, else the reason.
    pub fn reason(&self) -> Option<String> {
        self.0.check().err()
    }
}

/// What [`Agent::new`](crate::agent::Agent::new) accepts as its readiness.
pub trait IntoReadiness {
    /// The readiness the agent flips.
    fn into_readiness(self) -> tas_runtime::http::Readiness;
}

impl IntoReadiness for tas_runtime::http::Readiness {
    fn into_readiness(self) -> tas_runtime::http::Readiness {
        self
    }
}

impl IntoReadiness for Arc<Readiness> {
    fn into_readiness(self) -> tas_runtime::http::Readiness {
        self.0.clone()
    }
}
