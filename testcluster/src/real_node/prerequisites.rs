//! What a real node needs from the machine, checked before anything on the host
//! changes: root, containerd, ctr, runc, unshare, ip, the CNI plugins, the kubelet
//! among the test binaries and the sandbox image archive.

use std::path::{Path, PathBuf};

use super::{PAUSE_IMAGE_ENV, RealNodeError};

/// Where the Debian package puts the CNI plugins, and the upstream default.
const CNI_BIN_DIRS: [&str; 2] = ["/usr/lib/cni", "/opt/cni/bin"];

/// The programs a node runs, found before anything changes on the host.
pub(super) struct Programs {
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    pub kubelet: PathBuf,
    pub cni_bin_dir: PathBuf,
    pub pause_image: PathBuf,
    tools_dir: PathBuf,
}

impl Programs {
    /// Checks that the caller is root and finds every program; `tools_dir` holds the
    /// Kubernetes binaries (the kubelet among them).
    pub fn locate(tools_dir: &Path) -> Result<Self, RealNodeError> {
        Self::locate_with(
            tools_dir,
            &std::env::var_os("PATH").unwrap_or_default(),
            rustix::process::geteuid().as_raw(),
        )
    }

    /// [`Programs::locate`] for the effective `uid` and the search path `path`.
    fn locate_with(
        tools_dir: &Path,
        path: &std::ffi::OsStr,
        uid: u32,
    ) -> Result<Self, RealNodeError> {
        if uid != 0 {
            return Err(RealNodeError::NotRoot { uid });
        }
        let on_path = |program: &'static str| {
            std::env::split_paths(path)
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
                .ok_or(RealNodeError::RuntimeMissing {
                    program,
                    looked: "on PATH".into(),
                })
        };
        let containerd = on_path("containerd")?;
        let ctr = on_path("ctr")?;
        on_path("runc")?;
        on_path("unshare")?;
        on_path("ip")?;
        let cni_bin_dir = CNI_BIN_DIRS
            .iter()
            .map(PathBuf::from)
            .find(|d| d.join("bridge").is_file() && d.join("host-local").is_file())
            .ok_or(RealNodeError::RuntimeMissing {
                program: "the CNI plugins bridge and host-local",
                looked: CNI_BIN_DIRS.join(", "),
            })?;
        let kubelet = tools_dir.join("kubelet");
        if !kubelet.is_file() {
            return Err(RealNodeError::KubeletMissing(tools_dir.into()));
        }
        let pause_image = std::env::var_os(PAUSE_IMAGE_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(format!("(${PAUSE_IMAGE_ENV} not set)")));
        if !pause_image.is_file() {
            return Err(RealNodeError::PauseImageMissing(pause_image));
        }
        Ok(Self {
            containerd,
            ctr,
            kubelet,
            cni_bin_dir,
            pause_image,
            tools_dir: tools_dir.into(),
        })
    }

    /// `program` among the test binaries when `wanted` (kube-proxy and the device plugin
    /// are built with the kubelet), `None` when not.
    pub fn optional(&self, program: &str, wanted: bool) -> Result<Option<PathBuf>, RealNodeError> {
        if !wanted {
            return Ok(None);
        }
        let path = self.tools_dir.join(program);
        if !path.is_file() {
            return Err(RealNodeError::KubeletMissing(self.tools_dir.clone()));
        }
        Ok(Some(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_is_named_with_the_script_that_installs_it() {
        let e = Programs::locate_with(Path::new("/nonexistent"), std::ffi::OsStr::new(""), 0)
            .err()
            .expect("nothing is on an empty PATH");
        assert!(e.is_missing_prerequisite());
        let text = e.to_string();
        assert!(
            text.starts_with("containerd not found (on PATH)")
                && text.contains("testcluster/tools/install-node-runtime.sh"),
            "{text}"
        );
    }

    #[test]
    fn a_user_other_than_root_is_told_why() {
        let e = Programs::locate_with(Path::new("/"), std::ffi::OsStr::new("/usr/bin"), 1000)
            .err()
            .expect("not root");
        assert!(e.to_string().contains("needs root"), "{e}");
    }
}
