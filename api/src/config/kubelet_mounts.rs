//! Where the kubelet's configuration files appear inside a node agent pod.
//!
//! The *directory* holding the config file is mounted, not the file: tools that update
//! the kubelet's configuration write a new file and rename it over the old one, and a
//! bind mount of a single file keeps showing the old inode until the pod restarts. The
//! drop-in directory (`--config-dir`) is reached through the same mount when it lies
//! inside that directory (EKS's `config.json.d`), else it gets a mount of its own.

use crate::tas::KubeletPaths;
use std::path::Path;

/// Container directory the host directory holding the kubelet config file is mounted at.
pub const KUBELET_CONFIG_DIR_MOUNT: &str = "/host-kubelet";
/// Container directory the kubelet's drop-in directory is mounted at when it lies
/// outside the config file's directory.
pub const KUBELET_DROPIN_MOUNT: &str = "/host-kubelet-config-dir";

/// One read-only host directory mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirMount {
    /// Volume name.
    pub name: &'static str,
    /// Directory on the host.
    pub host: String,
    /// Where it appears in the container.
    pub container: String,
}

/// The kubelet configuration's mounts and the container paths the agent reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletMounts {
    /// Directory mounts (one or two).
    pub mounts: Vec<DirMount>,
    /// The config file, inside the container.
    pub config_file: String,
    /// The drop-in directory, inside the container.
    pub config_dir: Option<String>,
}

impl KubeletMounts {
    /// The layout for the host paths in `paths` (absolute, as the CRD requires).
    pub fn for_paths(paths: &KubeletPaths) -> Self {
        let file = Path::new(&paths.config_file);
        let host_dir = file
            .parent()
            .map_or_else(|| "/".to_owned(), |p| p.display().to_string());
        let host_dir = if host_dir.is_empty() {
            "/".to_owned()
        } else {
            host_dir
        };
        let name = file.file_name().map_or_else(
            || "config.yaml".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        );
        let mut mounts = vec![DirMount {
            name: "kubelet-config",
            host: host_dir.clone(),
            container: KUBELET_CONFIG_DIR_MOUNT.to_owned(),
        }];
        let config_dir = paths.config_dir.as_deref().map(|dir| {
            let dir = dir.trim_end_matches('/');
            match Path::new(dir).strip_prefix(&host_dir) {
                Ok(rest) if !rest.as_os_str().is_empty() => {
                    format!("{KUBELET_CONFIG_DIR_MOUNT}/{}", rest.display())
                }
                _ => {
                    mounts.push(DirMount {
                        name: "kubelet-config-dir",
                        host: dir.to_owned(),
                        container: KUBELET_DROPIN_MOUNT.to_owned(),
                    });
                    KUBELET_DROPIN_MOUNT.to_owned()
                }
            }
        });
        Self {
            config_file: format!("{KUBELET_CONFIG_DIR_MOUNT}/{name}"),
            config_dir,
            mounts,
        }
    }

    /// `--host-path` flag values: `container=host` per mount, so the agent names host
    /// paths in what it reports.
    pub fn host_path_flags(&self) -> Vec<String> {
        self.mounts
            .iter()
            .map(|m| format!("{}={}", m.container, m.host))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(file: &str, dir: Option<&str>) -> KubeletPaths {
        KubeletPaths {
            config_file: file.to_owned(),
            config_dir: dir.map(str::to_owned),
            ..KubeletPaths::default()
        }
    }

    #[test]
    fn the_file_s_directory_is_mounted() {
        let m = KubeletMounts::for_paths(&KubeletPaths::default());
        assert_eq!(m.config_file, "/host-kubelet/config.yaml");
        assert_eq!(m.mounts.len(), 1);
        assert_eq!(m.mounts[0].host, "/var/lib/kubelet");
        assert_eq!(m.config_dir, None);
        assert_eq!(m.host_path_flags(), ["/host-kubelet=/var/lib/kubelet"]);
    }

    #[test]
    fn a_drop_in_directory_inside_shares_the_mount() {
        let m = KubeletMounts::for_paths(&paths(
            "/etc/kubernetes/kubelet/config.json",
            Some("/etc/kubernetes/kubelet/config.json.d/"),
        ));
        assert_eq!(m.mounts.len(), 1);
        assert_eq!(m.config_file, "/host-kubelet/config.json");
        assert_eq!(m.config_dir.as_deref(), Some("/host-kubelet/config.json.d"));
    }

    #[test]
    fn a_drop_in_directory_elsewhere_gets_its_own_mount() {
        let m = KubeletMounts::for_paths(&paths(
            "/var/lib/kubelet/config.yaml",
            Some("/etc/kubernetes/kubelet.conf.d"),
        ));
        assert_eq!(m.mounts.len(), 2);
        assert_eq!(m.mounts[1].host, "/etc/kubernetes/kubelet.conf.d");
        assert_eq!(m.config_dir.as_deref(), Some(KUBELET_DROPIN_MOUNT));
    }
}
