//! The harness's error type.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting a test cluster or talking to it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes binaries are not where the harness looks for them.
    #[error(
        "test cluster binaries missing in {dir}: {missing}. Build them with `make cluster-tools` \
         (or set TAS_TOOLS_BIN to a directory holding etcd, kube-apiserver, \
         kube-controller-manager, kube-scheduler, kubectl and kwok)"
    )]
    ToolsMissing {
        /// Directory searched.
        dir: PathBuf,
        /// Comma-separated names not found there.
        missing: String,
    },

    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Generating the service-account signing key failed.
    #[error("generating the service-account signing key: {0}")]
    Key(#[from] rcgen::Error),

    /// A component exited or never became ready; `log_tail` is the end of its log.
    #[error(
        "{component} failed to start: {reason}\n--- last lines of {component}'s log ---\n{log_tail}"
    )]
    Startup {
        /// Component name, e.g. `kube-apiserver`.
        component: &'static str,
        /// Why startup is considered failed.
        reason: String,
        /// The end of the component's log.
        log_tail: String,
    },

    /// A polled condition did not hold before its deadline.
    #[error("timed out after {after:?} waiting for {what}{}", last_error.as_ref().map(|e| format!(" (last error: {e})")).unwrap_or_default())]
    Timeout {
        /// What was awaited.
        what: String,
        /// The deadline that passed.
        after: Duration,
        /// The last error the check returned, if any.
        last_error: Option<String>,
    },

    /// The kubeconfig the harness wrote could not be loaded.
    #[error("loading the test cluster kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),

    /// A Kubernetes API call failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),

    /// A YAML manifest could not be read or written.
    #[error("YAML in {path}: {source}")]
    Yaml {
        /// File (or logical name) of the document.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_norway::Error,
    },

    /// A manifest parsed as YAML but is not the expected object.
    #[error("{path}: not a valid object: {source}")]
    Manifest {
        /// File the document came from.
        path: PathBuf,
        /// The decoding error.
        #[source]
        source: serde_json::Error,
    },

    /// A directory expected to hold manifests holds none.
    #[error("no YAML manifests in {0}")]
    NoManifests(PathBuf),

    /// The process-wide shared cluster failed to start (reported to every test using it).
    #[error("the shared test cluster failed to start: {0}")]
    SharedStartFailed(String),

    /// A TokenRequest was answered without a token (the ServiceAccount named).
    #[error("the token request for {0} was answered without a token")]
    NoToken(String),

    /// A client built from the test cluster's kubeconfig points at another server.
    #[error("a client of the test cluster at {expected} points at {got}")]
    WrongServer {
        /// The test cluster's URL.
        expected: String,
        /// The URL the client configuration holds.
        got: String,
    },
}

impl Error {
    /// An [`Error::Io`] with a description of the failed operation.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }

    /// A component that failed to start because its port was taken in the meantime.
    pub fn is_port_taken(&self) -> bool {
        matches!(self, Self::Startup { log_tail, .. } if log_tail.contains("address already in use"))
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn a_taken_port_is_recognised_from_the_log() {
        let startup = |log: &str| Error::Startup {
            component: "kube-scheduler",
            reason: "exited with exit status: 1".into(),
            log_tail: log.into(),
        };
        let taken = "failed to listen on 127.0.0.1:42581: listen tcp 127.0.0.1:42581: \
                     bind: address already in use";
        assert!(startup(taken).is_port_taken());
        assert!(!startup("unknown flag: --bogus").is_port_taken());
    }
}
