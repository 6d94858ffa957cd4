//! The agent's command line, shared by the binary and by tests that run the agent
//! in-process with exactly the flags a DaemonSet passes.

use crate::agent::AgentConfig;
use crate::pods_fingerprint::FingerprintPolicy;
use crate::triggers::Mode;
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;
use tas_api::fingerprint::Method;
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};
use tas_runtime::cli::CommonArgs;

/// Publishes this node's NUMA topology and free resources as a NodeResourceTopology object.
#[derive(Parser, Debug)]
#[command(version, about)]
pub struct Args {
    /// This node's name (from the downward API in a DaemonSet).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// Where the host's /sys is visible.
    #[arg(long, default_value = "/sys")]
    pub sysfs_root: PathBuf,
    /// The kubelet's podresources socket.
    #[arg(long, default_value = "/var/lib/kubelet/pod-resources/kubelet.sock")]
    pub podresources_socket: PathBuf,
    /// The kubelet's configuration file (Topology Manager policy/scope, CPU/memory manager
    /// policies, reserved CPUs). A missing file means kubelet defaults.
    #[arg(long, default_value = "/var/lib/kubelet/config.yaml")]
    pub kubelet_config: PathBuf,
    /// Publish this Topology Manager policy instead of the kubelet config's.
    #[arg(long, value_parser = parse_policy)]
    pub topology_manager_policy: Option<TopologyManagerPolicy>,
    /// Publish this Topology Manager scope instead of the kubelet config's.
    #[arg(long, value_parser = parse_scope)]
    pub topology_manager_scope: Option<TopologyManagerScope>,
    /// What triggers a publish.
    #[arg(long, value_enum, default_value = "periodic-and-events")]
    pub refresh_mode: Mode,
    /// Interval of the periodic re-check (Go duration).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub refresh_period: Duration,
    /// Coalescing window for pod events (Go duration).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub debounce: Duration,
    /// Re-apply unchanged content this often, repairing edits by others (Go duration).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub reapply_interval: Duration,
    /// Pods covered by the fingerprint: all, with-exclusive-resources or disabled.
    #[arg(long, default_value = "with-exclusive-resources")]
    pub pods_fingerprint: String,
    /// Pods left out of the fingerprint, `namespace/name` globs (repeatable).
    #[arg(long)]
    pub exclude_pods: Vec<String>,
    /// Kubeconfig, HTTP address, logging and identity, as every TAS binary takes them.
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    tas_api::duration::parse(s).map_err(|e| e.to_string())
}
fn parse_policy(s: &str) -> Result<TopologyManagerPolicy, String> {
    s.parse().map_err(|e| format!("{e}"))
}
fn parse_scope(s: &str) -> Result<TopologyManagerScope, String> {
    s.parse().map_err(|e| format!("{e}"))
}

/// A flag value the agent cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// `--pods-fingerprint` is not all, with-exclusive-resources or disabled.
    #[error("--pods-fingerprint: {0}")]
    Fingerprint(String),
    /// An `--exclude-pods` entry is malformed.
    #[error("--exclude-pods: {0}")]
    Exclude(#[from] crate::pods_fingerprint::ExcludeError),
}

impl Args {
    /// The agent's configuration from the flags.
    pub fn agent_config(&self) -> Result<AgentConfig, ArgsError> {
        let method = match self.pods_fingerprint.as_str() {
            "disabled" => None,
            other => Some(
                other
                    .parse::<Method>()
                    .map_err(|e| ArgsError::Fingerprint(e.to_string()))?,
            ),
        };
        Ok(AgentConfig {
            node_name: self.node_name.clone(),
            sysfs_root: self.sysfs_root.clone(),
            kubelet_config: self.kubelet_config.clone(),
            policy_override: self.topology_manager_policy,
            scope_override: self.topology_manager_scope,
            mode: self.refresh_mode,
            period: self.refresh_period,
            debounce: self.debounce,
            reapply_interval: self.reapply_interval,
            fingerprint: FingerprintPolicy::new(method, &self.exclude_pods)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tas_api::config::updater::UpdaterArgs;
    use tas_api::tas::UpdaterSpec;

    #[test]
    fn the_flags_the_operator_renders_parse() {
        let rendered = UpdaterArgs::for_daemonset(&UpdaterSpec::default(), "debug").to_args();
        let argv = ["tas-updater", "--node-name=worker-1"]
            .into_iter()
            .map(str::to_owned)
            .chain(rendered);
        let args = Args::try_parse_from(argv).unwrap();
        assert_eq!(args.common.log_level, "debug");
        assert_eq!(args.common.http_address.port(), 8080);
        let config = args.agent_config().unwrap();
        assert_eq!(config.node_name, "worker-1");
        assert_eq!(config.sysfs_root, PathBuf::from("/host-sys"));
    }
}
