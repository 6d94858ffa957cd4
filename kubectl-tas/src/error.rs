//! What can go wrong talking to the cluster.

/// A `kubectl tas` failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or has no such context.
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// The client could not be built from the kubeconfig.
    #[error("kubeconfig: {0}")]
    Config(#[from] kube::config::InferConfigError),
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was asked for.
        what: String,
        /// The error.
        source: kube::Error,
    },
    /// The scheduler's debug endpoint answered something that is not its JSON.
    #[error("{path}: unexpected answer: {source}")]
    Decode {
        /// The proxy path.
        path: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// `--scheduler-token-file` could not be read.
    #[error("reading the token file {path}: {source}")]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A command-line flag cannot be used as given.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A support bundle could not be written or read.
    #[error("bundle {path}: {message}")]
    Bundle {
        /// The bundle's path (or the file in it).
        path: std::path::PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The pod cannot be parsed the way the scheduler parses it.
    #[error("pod {pod}: {message}")]
    Pod {
        /// `namespace/name`.
        pod: String,
        /// Why.
        message: String,
    },
}

impl Error {
    /// An API error with what was asked for.
    pub fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Api { what, source }
    }
}
