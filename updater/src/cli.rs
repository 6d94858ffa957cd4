//! The agent's command line, shared by the binary and by tests that run the agent
//! in-process with exactly the flags a DaemonSet passes.

use crate::agent::AgentConfig;
use crate::kubelet_source::{Overrides, SourceConfig};
use crate::pods_fingerprint::FingerprintPolicy;
use crate::triggers::Mode;
use clap::Parser;
use std::collections::BTreeMap;
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
    /// policies, reserved CPUs). A missing file means kubelet defaults, reported as a
    /// problem unless Topology Manager overrides are given.
    #[arg(long, default_value = "/var/lib/kubelet/config.yaml")]
    pub kubelet_config: PathBuf,
    /// The kubelet's drop-in directory (its `--config-dir`): `*.conf` files merged over
    /// the config file in lexical order.
    #[arg(long)]
    pub kubelet_config_dir: Option<PathBuf>,
    /// Read the kubelet's configuration from `/configz` through the API server's node
    /// proxy instead of the files (needs `get` on `nodes/proxy`).
    #[arg(long)]
    pub kubelet_configz: bool,
    /// Topology Manager policy options to publish instead of the configuration's,
    /// `name=value` pairs separated by commas.
    #[arg(long, value_parser = parse_options)]
    pub topology_manager_policy_options: Option<BTreeMap<String, String>>,
    /// `CONTAINER=HOST`: a directory of this container that is a host directory, so that
    /// problems name the host's files (repeatable).
    #[arg(long = "host-path", value_parser = parse_host_path)]
    pub host_paths: Vec<(PathBuf, String)>,
    /// Write this node's NodeResourceTopology even when another field manager (another
    /// NRT publisher) writes it.
    #[arg(long)]
    pub take_over_nrt: bool,
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
    /// How often the kubelet's podresources `List` is polled for pod changes in the
    /// events modes (Go duration, at least 100ms). Each poll is one local gRPC call; the
    /// default keeps a pod's admission → NRT within a second with the default debounce.
    #[arg(long, default_value = "500ms", value_parser = parse_poll_interval)]
    pub pod_poll_interval: Duration,
    /// Coalescing window for pod changes (Go duration).
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub debounce: Duration,
    /// Re-apply unchanged content this often, repairing edits by others (Go duration).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub reapply_interval: Duration,
    /// Longest time between two writes of the object: when its content has not changed
    /// for this long it is rewritten with a fresh `tas.dev/heartbeat` (Go duration).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub heartbeat_period: Duration,
    /// Pods covered by the fingerprint: all, with-exclusive-resources or disabled.
    #[arg(long, default_value = "with-exclusive-resources")]
    pub pods_fingerprint: String,
    /// Pods left out of the fingerprint, `namespace/name` globs (repeatable).
    #[arg(long)]
    pub exclude_pods: Vec<String>,
    /// Publish the containers' NUMA placement (`topology.node.k8s.io/numaplacement-*`,
    /// resource-topology-exporter's format) for schedulers that read it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub numa_placement: bool,
    /// Where the agent reads its own container's cpuset (the `Cpus_allowed_list` line):
    /// under the CPU manager `static` it is the shared pool, which tells the CPUs
    /// regular init containers keep (published as `initContainerCpus`). An empty value
    /// turns this off.
    #[arg(long, default_value = crate::shared_pool::DEFAULT_STATUS_PATH)]
    pub shared_cpus_from: String,
    /// Kubeconfig, HTTP address, logging and identity, as every TAS binary takes them.
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    tas_api::duration::parse(s).map_err(|e| e.to_string())
}
/// The shortest `--pod-poll-interval`: the kubelet allows 100 podresources calls per
/// second for all its clients, and the agent's own client paces itself at 20.
const MIN_POD_POLL_INTERVAL: Duration = Duration::from_millis(100);
fn parse_poll_interval(s: &str) -> Result<Duration, String> {
    let interval = parse_duration(s)?;
    if interval < MIN_POD_POLL_INTERVAL {
        return Err(format!("must be at least {MIN_POD_POLL_INTERVAL:?}"));
    }
    Ok(interval)
}
fn parse_policy(s: &str) -> Result<TopologyManagerPolicy, String> {
    s.parse().map_err(|e| format!("{e}"))
}
fn parse_options(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| format!("{pair:?} is not name=value"))
        })
        .collect()
}
fn parse_host_path(s: &str) -> Result<(PathBuf, String), String> {
    s.split_once('=')
        .map(|(c, h)| (PathBuf::from(c), h.to_owned()))
        .ok_or_else(|| format!("{s:?} is not CONTAINER=HOST"))
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
            kubelet: SourceConfig {
                file: self.kubelet_config.clone(),
                config_dir: self.kubelet_config_dir.clone(),
                configz: self.kubelet_configz,
                overrides: Overrides {
                    policy: self.topology_manager_policy,
                    scope: self.topology_manager_scope,
                    options: self.topology_manager_policy_options.clone(),
                },
                host_paths: self.host_paths.clone(),
            },
            take_over_nrt: self.take_over_nrt,
            mode: self.refresh_mode,
            period: self.refresh_period,
            pod_poll_interval: self.pod_poll_interval,
            debounce: self.debounce,
            reapply_interval: self.reapply_interval,
            fingerprint: FingerprintPolicy::new(method, &self.exclude_pods),
            heartbeat_period: self.heartbeat_period.max(Duration::from_secs(1)),
            numa_placement: self.numa_placement,
            shared_cpus_from: (!self.shared_cpus_from.is_empty())
                .then(|| PathBuf::from(&self.shared_cpus_from)),
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
        assert_eq!(
            config.kubelet.host_path(&config.kubelet.file),
            "/var/lib/kubelet/config.yaml"
        );
    }

    #[test]
    fn the_pod_poll_interval_defaults_to_half_a_second_and_refuses_a_busy_loop() {
        let parse = |extra: &[&str]| {
            Args::try_parse_from(["tas-updater", "--node-name=n"].iter().chain(extra))
                .map(|args| args.agent_config().unwrap().pod_poll_interval)
        };
        assert_eq!(parse(&[]).unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse(&["--pod-poll-interval=2s"]).unwrap(),
            Duration::from_secs(2)
        );
        for bad in ["0s", "50ms", "soon"] {
            let flag = format!("--pod-poll-interval={bad}");
            assert!(parse(&[flag.as_str()]).is_err(), "{bad}");
        }
    }

    /// An exclude entry the glob library refuses (the shape the CRD allowed) no longer
    /// stops the agent: the configuration is built without it.
    #[test]
    fn a_bad_exclude_glob_does_not_stop_the_agent() {
        let args = Args::try_parse_from([
            "tas-updater",
            "--node-name=n",
            "--exclude-pods=ns/[unclosed",
            "--exclude-pods=kube-system/*",
        ])
        .unwrap();
        let config = args.agent_config().expect("the agent starts");
        assert_eq!(config.fingerprint.ignored().len(), 1);
        assert!(config.fingerprint.ignored()[0].contains("ns/[unclosed"));
        assert_eq!(
            config.fingerprint.exclude_attribute().as_deref(),
            Some("kube-system/*")
        );
    }

    #[test]
    fn a_group_s_kubelet_settings_parse() {
        let spec: UpdaterSpec = serde_json::from_value(serde_json::json!({
            "kubelet": {
                "configFile": "/etc/kubernetes/kubelet/config.json",
                "configDir": "/etc/kubernetes/kubelet/config.json.d",
                "configz": true
            },
            "topologyManager": {
                "policy": "restricted",
                "scope": "pod",
                "options": {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "12"}
            },
            "takeOverNRT": true
        }))
        .unwrap();
        let rendered = UpdaterArgs::for_daemonset(&spec, "info").to_args();
        let argv = ["tas-updater", "--node-name=n"]
            .into_iter()
            .map(str::to_owned)
            .chain(rendered);
        let config = Args::try_parse_from(argv).unwrap().agent_config().unwrap();
        let k = &config.kubelet;
        assert_eq!(k.file, PathBuf::from("/host-kubelet/config.json"));
        assert_eq!(
            k.config_dir.as_deref(),
            Some(std::path::Path::new("/host-kubelet/config.json.d"))
        );
        assert_eq!(
            k.host_path(k.config_dir.as_ref().unwrap()),
            "/etc/kubernetes/kubelet/config.json.d"
        );
        assert!(k.configz && config.take_over_nrt);
        assert_eq!(k.overrides.policy, Some(TopologyManagerPolicy::Restricted));
        assert_eq!(k.overrides.scope, Some(TopologyManagerScope::Pod));
        assert_eq!(k.overrides.options.as_ref().map(BTreeMap::len), Some(2));
    }

    #[test]
    fn a_group_s_heartbeat_period_reaches_the_agent() {
        let defaults = UpdaterArgs::for_daemonset(&UpdaterSpec::default(), "info").to_args();
        let argv = ["tas-updater", "--node-name=n"]
            .into_iter()
            .map(str::to_owned)
            .chain(defaults);
        let config = Args::try_parse_from(argv).unwrap().agent_config().unwrap();
        assert_eq!(config.heartbeat_period, Duration::from_secs(600));

        let spec: UpdaterSpec =
            serde_json::from_value(serde_json::json!({"refresh": {"heartbeatPeriod": "90s"}}))
                .unwrap();
        let rendered = UpdaterArgs::for_daemonset(&spec, "info").to_args();
        let argv = ["tas-updater", "--node-name=n"]
            .into_iter()
            .map(str::to_owned)
            .chain(rendered);
        let config = Args::try_parse_from(argv).unwrap().agent_config().unwrap();
        assert_eq!(config.heartbeat_period, Duration::from_secs(90));
    }
}
