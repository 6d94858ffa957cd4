//! Where the kubelet's configuration files appear inside a node agent pod.
//!
//! The *directory* holding the config file is mounted, not the file: tools that update
//! the kubelet's configuration write a new file and rename it over the old one, and a
//! bind mount of a single file keeps showing the old inode until the pod restarts. The
//! drop-in directory (`--config-dir`) is reached through the same mount when it lies
//! inside that directory (EKS's `config.json.d`), else it gets a mount of its own.
//!
//! Except where the file's directory holds more than kubelet configuration
//! ([`SHARED_DIRS`]: the kubelet's root directory with every pod's volumes and secrets,
//! `/etc/kubernetes` with the cluster's keys and kubeconfigs): there only the file is
//! mounted, so the agent never sees the rest. A file replaced by rename then shows a link
//! count of 0 through the mount, and the agent exits to be restarted on the new file
//! (`updater/src/kubelet_source/stamp.rs`).

use crate::tas::KubeletPaths;
use std::path::Path;

/// Container directory the host directory holding the kubelet config file is mounted at.
pub const KUBELET_CONFIG_DIR_MOUNT: &str = "/host-kubelet";
/// Container directory the kubelet's drop-in directory is mounted at when it lies
/// outside the config file's directory.
pub const KUBELET_DROPIN_MOUNT: &str = "/host-kubelet-config-dir";

/// Directories whose other content the agent must not see: the config file in them is
/// mounted alone.
pub const SHARED_DIRS: [&str; 4] = [
    "/var/lib/kubelet",
    "/etc/kubernetes",
    "/home/kubernetes",
    "/var/lib/k0s",
];

/// One read-only hostPath mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirMount {
    /// Volume name.
    pub name: &'static str,
    /// hostPath type: `Directory`, or `File` for a config file mounted alone.
    pub kind: &'static str,
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
        let file_alone = SHARED_DIRS.contains(&host_dir.as_str());
        let config_file = format!("{KUBELET_CONFIG_DIR_MOUNT}/{name}");
        let mut mounts = vec![if file_alone {
            DirMount {
                name: "kubelet-config",
                kind: "File",
                host: paths.config_file.clone(),
                container: config_file.clone(),
            }
        } else {
            DirMount {
                name: "kubelet-config",
                kind: "Directory",
                host: host_dir.clone(),
                container: KUBELET_CONFIG_DIR_MOUNT.to_owned(),
            }
        }];
        let config_dir = paths.config_dir.as_deref().map(|dir| {
            let dir = dir.trim_end_matches('/');
            match Path::new(dir).strip_prefix(&host_dir) {
                Ok(rest) if !file_alone && !rest.as_os_str().is_empty() => {
                    format!("{KUBELET_CONFIG_DIR_MOUNT}/{}", rest.display())
                }
                _ => {
                    mounts.push(DirMount {
                        name: "kubelet-config-dir",
                        kind: "Directory",
                        host: dir.to_owned(),
                        container: KUBELET_DROPIN_MOUNT.to_owned(),
                    });
                    KUBELET_DROPIN_MOUNT.to_owned()
                }
            }
        });
        Self {
            config_file,
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
    use crate::tas::{HostPathRule, check_config_dir, check_config_file};
    use proptest::prelude::*;

    fn paths(file: &str, dir: Option<&str>) -> KubeletPaths {
        KubeletPaths {
            config_file: file.to_owned(),
            config_dir: dir.map(str::to_owned),
            ..KubeletPaths::default()
        }
    }

    #[test]
    fn in_the_kubelet_s_root_directory_only_the_file_is_mounted() {
        let m = KubeletMounts::for_paths(&KubeletPaths::default());
        assert_eq!(m.config_file, "/host-kubelet/config.yaml");
        assert_eq!(m.mounts.len(), 1);
        assert_eq!(m.mounts[0].host, "/var/lib/kubelet/config.yaml");
        assert_eq!(m.mounts[0].kind, "File");
        assert_eq!(m.config_dir, None);
        assert_eq!(
            m.host_path_flags(),
            ["/host-kubelet/config.yaml=/var/lib/kubelet/config.yaml"]
        );
        // /etc/kubernetes holds the cluster's keys: the file alone there too, and a
        // drop-in directory inside gets its own mount.
        let m = KubeletMounts::for_paths(&paths(
            "/etc/kubernetes/kubelet.conf",
            Some("/etc/kubernetes/kubelet.conf.d"),
        ));
        assert!(m.mounts.iter().all(|d| d.host != "/etc/kubernetes"));
        assert_eq!(m.mounts[0].kind, "File");
        assert_eq!(m.mounts[1].host, "/etc/kubernetes/kubelet.conf.d");
        assert_eq!(m.config_dir.as_deref(), Some(KUBELET_DROPIN_MOUNT));
    }

    #[test]
    fn a_dedicated_directory_is_mounted_whole() {
        let m = KubeletMounts::for_paths(&paths("/etc/kubernetes/kubelet/config.json", None));
        assert_eq!(m.mounts.len(), 1);
        assert_eq!(m.mounts[0].host, "/etc/kubernetes/kubelet");
        assert_eq!(m.mounts[0].kind, "Directory");
        assert_eq!(m.config_file, "/host-kubelet/config.json");
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

    /// Directories the agent (root) must never see whole: the host's root, the shared
    /// directories, and those holding sockets, keys or every pod's secrets.
    const NEVER_WHOLE: [&str; 10] = [
        "/",
        "/etc",
        "/var",
        "/var/lib",
        "/run",
        "/var/run",
        "/etc/kubernetes/pki",
        "/var/lib/kubelet/pki",
        "/var/lib/kubelet/pods",
        "/run/containerd",
    ];

    fn allowed(rule: HostPathRule) -> impl Strategy<Value = String> {
        let p = rule.pattern();
        proptest::string::string_regex(&p[1..p.len() - 1]).unwrap()
    }

    proptest! {
        /// For every config file and drop-in directory the allow-list accepts, the
        /// mounts are the file alone or a directory of kubelet configuration: never `/`,
        /// a shared directory, or a directory above one that holds sockets or keys.
        #[test]
        fn every_allowed_path_mounts_only_kubelet_configuration(
            file in allowed(HostPathRule::ConfigFile),
            dir in proptest::option::of(allowed(HostPathRule::ConfigDir)),
        ) {
            let m = KubeletMounts::for_paths(&paths(&file, dir.as_deref()));
            let parent = Path::new(&file).parent().unwrap().to_str().unwrap().to_owned();
            for mount in &m.mounts {
                prop_assert!(mount.host.starts_with('/'), "{mount:?}");
                match mount.kind {
                    "File" => prop_assert_eq!(&mount.host, &file),
                    "Directory" => {
                        let host = Path::new(&mount.host);
                        prop_assert!(
                            mount.host == parent
                                || Some(mount.host.as_str()) == dir.as_deref().map(|d| d.trim_end_matches('/')),
                            "{mount:?} is neither the file's directory nor the drop-in directory"
                        );
                        for never in NEVER_WHOLE.iter().chain(SHARED_DIRS.iter()) {
                            prop_assert!(
                                !Path::new(never).starts_with(host),
                                "{mount:?} shows {never}"
                            );
                        }
                        prop_assert!(check_config_dir(&mount.host).is_ok()
                            || (mount.host == parent && check_config_file(&file).is_ok()),
                            "{mount:?}");
                    }
                    other => prop_assert!(false, "unexpected kind {other}"),
                }
            }
        }
    }
}
