//! Where the Kubernetes binaries come from.
//!
//! `make cluster-tools` (`testcluster/tools/build.sh`) builds them from Go modules into a cache
//! outside the work tree and keeps a directory of symlinks, `bin-<k8s version>`, that
//! the harness runs them from. The harness never builds anything itself: a cold build
//! takes many minutes and would silently stall a test run.

use std::path::{Path, PathBuf};

use crate::Error;

/// Environment variable naming the directory that holds the binaries.
pub const TOOLS_BIN_ENV: &str = "TAS_TOOLS_BIN";

/// Environment variable naming the directory of the oldest supported control plane
/// (`build.sh --oldest`), which the full-stack test also runs against.
pub const TOOLS_BIN_OLDEST_ENV: &str = "TAS_TOOLS_BIN_OLDEST";

/// Kubernetes version the binaries are built at (the newest supported minor); part of
/// the cache directory name.
pub const KUBERNETES_VERSION: &str = "v1.37.2";

/// The oldest supported Kubernetes version: the second control plane of the full-stack
/// test, the real node's kubelet and the referee's.
pub const OLDEST_KUBERNETES_VERSION: &str = "v1.34.4";

/// Every binary the harness may run.
pub const BINARIES: [&str; 6] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
];

/// A directory holding every binary in [`BINARIES`].
#[derive(Debug, Clone)]
pub struct Tools {
    dir: PathBuf,
}

impl Tools {
    /// Finds the binaries: `$TAS_TOOLS_BIN`, else the directory `build.sh` fills,
    /// `bin-<version>` under `$TAS_TOOLS_CACHE` (default
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/tas/tools`).
    pub fn locate() -> Result<Self, Error> {
        let dir = match std::env::var_os(TOOLS_BIN_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => default_dir(),
        };
        Self::in_dir(dir)
    }

    /// The oldest supported control plane: `$TAS_TOOLS_BIN_OLDEST`, else
    /// `bin-<oldest version>` in the cache.
    pub fn locate_oldest() -> Result<Self, Error> {
        let dir = match std::env::var_os(TOOLS_BIN_OLDEST_ENV) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => default_dir().with_file_name(format!("bin-{OLDEST_KUBERNETES_VERSION}")),
        };
        Self::in_dir(dir)
    }

    /// Uses `dir`, failing when any binary is missing from it.
    pub fn in_dir(dir: impl Into<PathBuf>) -> Result<Self, Error> {
        let dir = dir.into();
        let missing: Vec<&str> = BINARIES
            .into_iter()
            .filter(|name| !dir.join(name).is_file())
            .collect();
        if missing.is_empty() {
            Ok(Self { dir })
        } else {
            Err(Error::ToolsMissing {
                dir,
                missing: missing.join(", "),
            })
        }
    }

    /// The directory holding the binaries.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of one binary, e.g. `kwok`.
    pub fn binary(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The cache root resolved the same way as `build.sh` does it.
fn default_dir() -> PathBuf {
    let env_dir = |name: &str| std::env::var_os(name).filter(|dir| !dir.is_empty());
    let root = env_dir("TAS_TOOLS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            env_dir("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| env_dir("HOME").map(|home| PathBuf::from(home).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"))
                .join("tas")
                .join("tools")
        });
    root.join(format!("bin-{KUBERNETES_VERSION}"))
}
