//! The host-path allow-list: which kubelet files and directories the node agent (root on
//! every node) may have mounted, wherever the object names one.
//!
//! One rule per kind of path ([`HostPathRule`]), one regular expression each. The same
//! expression becomes the CEL rule of every field naming such a path (`spec.updater.kubelet`
//! and `spec.nodeGroups[].updater.kubelet`, through [`HostPathRule::cel`]), so the API
//! server refuses at apply what the operator refuses at render time
//! ([`HostPathRule::check`]): objects stored before a rule existed, objects written
//! around the CRD, and `tas-operator render` go through the same rule.
//!
//! The expressions name whole paths of fixed directories with plain file-name segments
//! (`[A-Za-z0-9_.-]` and a fixed suffix), so nothing they accept is relative, holds a
//! `..` or `.` segment, a `//` or a NUL; the Rust check refuses those first anyway, so
//! that a future pattern cannot let one through unnoticed (the tests prove the pattern
//! alone never accepts one). Directories may end in one `/` (the same directory).

use kube::core::{Message, Rule};
use regex::Regex;
use std::sync::LazyLock;

/// Where the kubelet keeps its pod-resources directory, by distribution: kubeadm, kind,
/// Cluster API, EKS, GKE, AKS, OpenShift, k3s and RKE2 use `/var/lib/kubelet`; k0s and
/// MicroK8s move the kubelet's root directory.
pub const POD_RESOURCES_DIR_PATTERN: &str = "^(/var/lib/kubelet|/var/lib/k0s/kubelet|/var/snap/microk8s/common/var/lib/kubelet)/pod-resources/?$";

/// The kubelet configuration files the agent may read, by distribution:
/// a `.yaml`/`.yml`/`.json`/`.conf` file directly in `/var/lib/kubelet` (kubeadm:
/// `config.yaml`; not `kubeconfig`, not `pki/`), EKS (`/etc/kubernetes/kubelet/
/// kubelet-config.json` on AL2, `config.json` on AL2023), GKE
/// (`/home/kubernetes/kubelet-config.yaml`), OpenShift (`/etc/kubernetes/kubelet.conf`),
/// Kubespray (`/etc/kubernetes/kubelet-config.yaml`),
/// k3s and RKE2 (`/var/lib/rancher/{k3s,rke2}/agent/etc/kubelet.conf.d/*.conf`), k0s
/// (`/var/lib/k0s/kubelet-config.yaml`).
pub const KUBELET_CONFIG_FILE_PATTERN: &str = concat!(
    "^(/var/lib/kubelet/[A-Za-z0-9_.-]+[.](yaml|yml|json|conf)",
    "|/etc/kubernetes/kubelet/(kubelet-config|config)[.]json",
    "|/home/kubernetes/kubelet-config[.]yaml",
    "|/etc/kubernetes/kubelet[.]conf",
    "|/etc/kubernetes/kubelet-config[.]yaml",
    "|/var/lib/rancher/(k3s|rke2)/agent/etc/kubelet[.]conf[.]d/[A-Za-z0-9_.-]+[.]conf",
    "|/var/lib/k0s/kubelet-config[.]yaml)$"
);

/// The kubelet drop-in directories (`--config-dir`) the agent may read: a `*.d` directory
/// in EKS's `/etc/kubernetes/kubelet`, or one named for the kubelet directly in a
/// directory kubelet configuration lives in.
pub const KUBELET_CONFIG_DIR_PATTERN: &str = concat!(
    "^(/etc/kubernetes/kubelet/[A-Za-z0-9_.-]+[.]d",
    "|(/etc|/etc/kubernetes|/var/lib/kubelet|/home/kubernetes|/var/lib/k0s|/var/lib/rancher/(k3s|rke2)/agent/etc)",
    "/[A-Za-z0-9_.-]*kubelet[A-Za-z0-9_.-]*[.]d)/?$"
);

/// A kind of host path the object may name, each with its allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostPathRule {
    /// `kubelet.podResourcesDir`: the directory of the kubelet's pod-resources socket.
    PodResourcesDir,
    /// `kubelet.configFile`: the kubelet's configuration file.
    ConfigFile,
    /// `kubelet.configDir`: the kubelet's drop-in directory.
    ConfigDir,
}

impl HostPathRule {
    /// Every rule.
    pub const ALL: [Self; 3] = [Self::PodResourcesDir, Self::ConfigFile, Self::ConfigDir];

    /// The field's name under `kubelet`.
    pub const fn field(self) -> &'static str {
        match self {
            Self::PodResourcesDir => "podResourcesDir",
            Self::ConfigFile => "configFile",
            Self::ConfigDir => "configDir",
        }
    }

    /// The allow-list as an RE2 expression (what CEL's `matches` and the `regex` crate
    /// both read the same way for these patterns: no look-around, no back-references).
    pub const fn pattern(self) -> &'static str {
        match self {
            Self::PodResourcesDir => POD_RESOURCES_DIR_PATTERN,
            Self::ConfigFile => KUBELET_CONFIG_FILE_PATTERN,
            Self::ConfigDir => KUBELET_CONFIG_DIR_PATTERN,
        }
    }

    /// What a value must be, for a human: completes "`<field>` ...".
    pub const fn requirement(self) -> &'static str {
        match self {
            Self::PodResourcesDir => {
                "must be a kubelet pod-resources directory: /var/lib/kubelet/pod-resources (kubeadm, EKS, GKE, AKS, OpenShift, k3s, RKE2), /var/lib/k0s/kubelet/pod-resources or /var/snap/microk8s/common/var/lib/kubelet/pod-resources"
            }
            Self::ConfigFile => {
                "must be a kubelet configuration file: a .yaml/.yml/.json/.conf file directly in /var/lib/kubelet (kubeadm: config.yaml), /etc/kubernetes/kubelet/kubelet-config.json or config.json (EKS), /home/kubernetes/kubelet-config.yaml (GKE), /etc/kubernetes/kubelet.conf (OpenShift), /etc/kubernetes/kubelet-config.yaml (Kubespray), /var/lib/rancher/k3s|rke2/agent/etc/kubelet.conf.d/*.conf (k3s, RKE2) or /var/lib/k0s/kubelet-config.yaml (k0s)"
            }
            Self::ConfigDir => {
                "must be a kubelet drop-in directory: a directory named *.d directly in /etc/kubernetes/kubelet (EKS: config.json.d), or a *kubelet*.d directory directly in /etc, /etc/kubernetes, /var/lib/kubelet, /home/kubernetes, /var/lib/k0s or /var/lib/rancher/k3s|rke2/agent/etc"
            }
        }
    }

    /// The CEL expression of this rule on a string field.
    pub fn cel_expression(self) -> String {
        format!("self.matches('{}')", self.pattern())
    }

    /// The CRD rule of this field under `kubelet_path` (e.g. `spec.updater.kubelet`):
    /// the refusal names the field.
    pub fn cel(self, kubelet_path: &str) -> Rule {
        Rule::new(self.cel_expression()).message(Message::Message(format!(
            "{kubelet_path}.{} {}",
            self.field(),
            self.requirement()
        )))
    }

    /// Whether `path` is on this allow-list.
    pub fn check(self, path: &str) -> Result<(), HostPathError> {
        let refused = |why| {
            Err(HostPathError {
                rule: self,
                path: path.to_owned(),
                why,
            })
        };
        if let Some(why) = path_trick(path) {
            return refused(why);
        }
        if !self.regex().is_match(path) {
            return refused(PathTrick::NotListed);
        }
        Ok(())
    }

    fn regex(self) -> &'static Regex {
        // The patterns are constants of this file, compiled (and so checked) by the
        // tests: a failure here is a bug of this file, never of the input.
        static COMPILED: LazyLock<[Regex; 3]> = LazyLock::new(|| {
            HostPathRule::ALL.map(|r| {
                Regex::new(r.pattern()).unwrap_or_else(|e| panic!("{:?}: {e}", r.pattern()))
            })
        });
        &COMPILED[self as usize]
    }
}

/// Whether `path` is a kubelet pod-resources directory of the allow-list.
pub fn check_pod_resources_dir(path: &str) -> Result<(), HostPathError> {
    HostPathRule::PodResourcesDir.check(path)
}

/// Whether `path` is a kubelet configuration file of the allow-list.
pub fn check_config_file(path: &str) -> Result<(), HostPathError> {
    HostPathRule::ConfigFile.check(path)
}

/// Whether `path` is a kubelet drop-in directory of the allow-list.
pub fn check_config_dir(path: &str) -> Result<(), HostPathError> {
    HostPathRule::ConfigDir.check(path)
}

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathTrick {
    /// Not absolute.
    Relative,
    /// Holds a NUL byte.
    Nul,
    /// Holds `//`.
    DoubleSlash,
    /// Holds a `.` or `..` segment.
    DotSegment,
    /// Well-formed but not on the allow-list.
    NotListed,
}

/// The shapes no allow-listed path may have, whatever the patterns say.
fn path_trick(path: &str) -> Option<PathTrick> {
    if !path.starts_with('/') {
        Some(PathTrick::Relative)
    } else if path.contains('\0') {
        Some(PathTrick::Nul)
    } else if path.contains("//") {
        Some(PathTrick::DoubleSlash)
    } else if path.split('/').any(|s| s == "." || s == "..") {
        Some(PathTrick::DotSegment)
    } else {
        None
    }
}

/// A host path the allow-list refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path:?} is not allowed ({}): {} {}", .why.text(), .rule.field(), .rule.requirement())]
pub struct HostPathError {
    /// The rule refusing it.
    pub rule: HostPathRule,
    /// The path as written.
    pub path: String,
    /// Why.
    pub why: PathTrick,
}

impl PathTrick {
    /// For a human.
    pub fn text(self) -> &'static str {
        match self {
            PathTrick::Relative => "not an absolute path",
            PathTrick::Nul => "it holds a NUL byte",
            PathTrick::DoubleSlash => "it holds '//'",
            PathTrick::DotSegment => "it holds a '.' or '..' segment",
            PathTrick::NotListed => "not on the allow-list",
        }
    }
}

#[cfg(test)]
mod tests;
