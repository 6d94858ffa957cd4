//! The node agent's command line, as the operator renders it into the DaemonSet.

use super::kubelet_mounts::KubeletMounts;
use crate::tas::{PodsFingerprint, RefreshMode, UpdaterSpec};

/// The agent's sysfs root in its container (`--sysfs-root`). The DaemonSet mounts only the
/// host's `/sys/devices/system/node` beneath it, at `devices/system/node`.
pub const SYSFS_MOUNT: &str = "/host-sys";
/// Container directory the host's pod-resources directory is mounted at.
pub const POD_RESOURCES_MOUNT: &str = "/host-pod-resources";
/// Container path of the kubelet config file with the default `spec.updater.kubelet` (its
/// directory is mounted, see [`super::kubelet_mounts`]).
pub const KUBELET_CONFIG_MOUNT: &str = "/host-kubelet/config.yaml";
/// Name of the kubelet's socket inside the pod-resources directory.
pub const SOCKET_NAME: &str = "kubelet.sock";
/// Port of `/healthz`, `/readyz` and `/metrics`.
pub const HTTP_PORT: u16 = 8080;

/// Settings that become `tas-updater` flags.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdaterArgs {
    /// `--sysfs-root`
    pub sysfs_root: String,
    /// `--podresources-socket`
    pub podresources_socket: String,
    /// `--kubelet-config`
    pub kubelet_config: String,
    /// `--refresh-mode`
    pub refresh_mode: RefreshMode,
    /// `--refresh-period` (Go duration)
    pub refresh_period: String,
    /// `--debounce` (Go duration)
    pub debounce: String,
    /// `--pods-fingerprint`
    pub pods_fingerprint: PodsFingerprint,
    /// `--exclude-pods` (one flag per entry)
    pub exclude_pods: Vec<String>,
    /// `--http-address`
    pub http_address: String,
    /// `--log-level`
    pub log_level: String,
    /// `--kubelet-config-dir` (the drop-in directory, inside the container)
    pub kubelet_config_dir: Option<String>,
    /// `--host-path` (one flag per mount: `container=host`)
    pub host_paths: Vec<String>,
    /// `--kubelet-configz`
    pub kubelet_configz: bool,
    /// `--topology-manager-policy`
    pub topology_manager_policy: Option<String>,
    /// `--topology-manager-scope`
    pub topology_manager_scope: Option<String>,
    /// `--topology-manager-policy-options` (`name=value` pairs joined by commas)
    pub topology_manager_policy_options: Option<String>,
    /// `--take-over-nrt`
    pub take_over_nrt: bool,
    /// `--heartbeat-period` (Go duration; rendered only when not the agent's default)
    pub heartbeat_period: String,
}

impl UpdaterArgs {
    /// The arguments for an agent in a DaemonSet pod, with host paths mounted at the
    /// `*_MOUNT` locations.
    pub fn for_daemonset(spec: &UpdaterSpec, log_level: &str) -> Self {
        let mounts = KubeletMounts::for_paths(&spec.kubelet);
        let tm = &spec.topology_manager;
        Self {
            sysfs_root: SYSFS_MOUNT.to_owned(),
            podresources_socket: format!("{POD_RESOURCES_MOUNT}/{SOCKET_NAME}"),
            kubelet_config: mounts.config_file.clone(),
            refresh_mode: spec.refresh.mode,
            refresh_period: spec.refresh.period.clone(),
            debounce: spec.refresh.debounce.clone(),
            pods_fingerprint: spec.pods_fingerprint,
            exclude_pods: spec.exclude_pods.clone(),
            http_address: format!("0.0.0.0:{HTTP_PORT}"),
            log_level: log_level.to_owned(),
            kubelet_config_dir: mounts.config_dir.clone(),
            host_paths: mounts.host_path_flags(),
            kubelet_configz: spec.kubelet.configz,
            topology_manager_policy: tm.policy.clone(),
            topology_manager_scope: tm.scope.clone(),
            topology_manager_policy_options: tm.options.as_ref().map(|options| {
                options
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            take_over_nrt: spec.take_over_nrt,
            heartbeat_period: spec.refresh.heartbeat_period.clone(),
        }
    }

    /// The flags, in a stable order.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--sysfs-root={}", self.sysfs_root),
            format!("--podresources-socket={}", self.podresources_socket),
            format!("--kubelet-config={}", self.kubelet_config),
            format!("--refresh-mode={}", refresh_mode_flag(self.refresh_mode)),
            format!("--refresh-period={}", self.refresh_period),
            format!("--debounce={}", self.debounce),
            format!(
                "--pods-fingerprint={}",
                pods_fingerprint_flag(self.pods_fingerprint)
            ),
        ];
        args.extend(
            self.exclude_pods
                .iter()
                .map(|p| format!("--exclude-pods={p}")),
        );
        args.push(format!("--http-address={}", self.http_address));
        args.push(format!("--log-level={}", self.log_level));
        args.extend(self.kubelet_args());
        if crate::duration::parse(&self.heartbeat_period)
            != Ok(crate::nrt::heartbeat::DEFAULT_PERIOD)
        {
            args.push(format!("--heartbeat-period={}", self.heartbeat_period));
        }
        args
    }

    /// The kubelet discovery and NRT ownership flags, after the others (only those that
    /// differ from the agent's defaults, except `--host-path`).
    fn kubelet_args(&self) -> Vec<String> {
        let mut args: Vec<String> = self
            .host_paths
            .iter()
            .map(|m| format!("--host-path={m}"))
            .collect();
        if let Some(dir) = &self.kubelet_config_dir {
            args.push(format!("--kubelet-config-dir={dir}"));
        }
        if self.kubelet_configz {
            args.push("--kubelet-configz".to_owned());
        }
        for (flag, value) in [
            ("topology-manager-policy", &self.topology_manager_policy),
            ("topology-manager-scope", &self.topology_manager_scope),
            (
                "topology-manager-policy-options",
                &self.topology_manager_policy_options,
            ),
        ] {
            if let Some(value) = value {
                args.push(format!("--{flag}={value}"));
            }
        }
        if self.take_over_nrt {
            args.push("--take-over-nrt".to_owned());
        }
        args
    }
}

/// The `--refresh-mode` value of a mode.
pub fn refresh_mode_flag(mode: RefreshMode) -> &'static str {
    match mode {
        RefreshMode::Periodic => "periodic",
        RefreshMode::Events => "events",
        RefreshMode::PeriodicAndEvents => "periodic-and-events",
    }
}

/// The `--pods-fingerprint` value of a setting.
pub fn pods_fingerprint_flag(fp: PodsFingerprint) -> &'static str {
    match fp {
        PodsFingerprint::All => "all",
        PodsFingerprint::WithExclusiveResources => "with-exclusive-resources",
        PodsFingerprint::Disabled => "disabled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_spec_renders_every_flag() {
        let args = UpdaterArgs::for_daemonset(&UpdaterSpec::default(), "info").to_args();
        assert_eq!(
            args,
            [
                "--sysfs-root=/host-sys",
                "--podresources-socket=/host-pod-resources/kubelet.sock",
                "--kubelet-config=/host-kubelet/config.yaml",
                "--refresh-mode=periodic-and-events",
                "--refresh-period=10s",
                "--debounce=200ms",
                "--pods-fingerprint=with-exclusive-resources",
                "--http-address=0.0.0.0:8080",
                "--log-level=info",
                "--host-path=/host-kubelet/config.yaml=/var/lib/kubelet/config.yaml",
            ]
        );
    }

    #[test]
    fn a_heartbeat_period_is_rendered_only_when_not_the_default() {
        let mut spec = UpdaterSpec::default();
        spec.refresh.heartbeat_period = "600s".to_owned();
        let args = UpdaterArgs::for_daemonset(&spec, "info").to_args();
        assert!(!args.iter().any(|a| a.starts_with("--heartbeat-period")));
        spec.refresh.heartbeat_period = "2m".to_owned();
        let args = UpdaterArgs::for_daemonset(&spec, "info").to_args();
        assert_eq!(
            args.last().map(String::as_str),
            Some("--heartbeat-period=2m")
        );
    }
}
