//! Why a real node could not start or stop cleanly.

use std::path::PathBuf;

/// Everything that keeps a [`RealNode`](super::RealNode) from running.
#[derive(Debug, thiserror::Error)]
pub enum RealNodeError {
    /// Namespaces, mounts and host sysctls need root.
    #[error("a real node needs root (namespaces, mounts, cgroups); running as uid {uid}")]
    NotRoot {
        /// The effective uid.
        uid: u32,
    },

    /// A program the node runs is not installed.
    #[error(
        "{program} not found ({looked}); install the node runtime with \
         `testcluster/tools/install-node-runtime.sh` (containerd, runc, ctr, CNI plugins)"
    )]
    RuntimeMissing {
        /// The missing program, e.g. `containerd`.
        program: &'static str,
        /// Where it was looked for.
        looked: String,
    },

    /// The kubelet is not among the test binaries.
    #[error(
        "the kubelet is not in {0}; build it with `TAS_TOOLS_ONLY=\"k8s etcd kwok kubelet\" \
         testcluster/tools/build.sh` (or `make real-node-test`)"
    )]
    KubeletMissing(PathBuf),

    /// A test program built with the kubelet (the DRA driver, containerd with CDI) is
    /// not among the test binaries.
    #[error(
        "{program} is not in {dir}; build it with `TAS_TOOLS_ONLY=\"k8s etcd kwok kubelet\" \
         testcluster/tools/build.sh` (or `make real-node-test`)"
    )]
    ToolMissing {
        /// The program, e.g. `tas-dradriver`.
        program: &'static str,
        /// The test binaries' directory.
        dir: PathBuf,
    },

    /// The sandbox image archive is not there.
    #[error(
        "the pause image archive {0} does not exist; build it with \
         `testcluster/tools/build-pause.sh` and set TAS_PAUSE_IMAGE to the path it prints"
    )]
    PauseImageMissing(PathBuf),

    /// A file or process operation on the host failed.
    #[error("{what}: {source}")]
    Host {
        /// What the harness was doing.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// containerd or the kubelet did not come up; `log_tail` is the end of its log.
    #[error(
        "{component} of real node {node} did not start: {reason}\n--- last lines of {log} ---\n{log_tail}"
    )]
    Startup {
        /// `containerd`, `kubelet` or `node namespace`.
        component: &'static str,
        /// The node's name.
        node: String,
        /// Why startup is considered failed.
        reason: String,
        /// The log read.
        log: PathBuf,
        /// Its last lines.
        log_tail: String,
    },

    /// The test cluster answered with an error.
    #[error(transparent)]
    Cluster(#[from] crate::Error),
}

impl RealNodeError {
    /// Whether the machine lacks something a real node needs (root, the runtime, the
    /// kubelet, the sandbox image), as opposed to a node that failed: a test may skip,
    /// saying why, on the former only.
    pub fn is_missing_prerequisite(&self) -> bool {
        matches!(
            self,
            Self::NotRoot { .. }
                | Self::RuntimeMissing { .. }
                | Self::KubeletMissing(_)
                | Self::ToolMissing { .. }
                | Self::PauseImageMissing(_)
        )
    }
}
