//! Node agent (`tas-updater`) settings: how each node's NodeResourceTopology is kept true.

use super::pod;
use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::host_paths::HostPathRule;
use super::kubelet::TopologyManagerOverride;

/// A Go-style duration such as `10s`, `1m30s` or `500ms`.
/// (`[.]` rather than an escaped dot: the pattern is embedded in CEL string literals.)
pub(crate) const DURATION_PATTERN: &str = "^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$";

/// Node agent settings. Set here for every node group; a group's `updater` overrides
/// individual fields.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdaterSpec {
    /// Container image of the node agent. Default: the image the operator was released
    /// with (its `--updater-image` flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    #[x_kube(validation = Rule::new("!self.contains(' ')").message("spec.updater.image must not contain spaces"))]
    pub image: Option<String>,

    /// When the agent re-reads the kubelet and publishes.
    #[serde(default)]
    pub refresh: RefreshSpec,

    /// Which pods the published pod-set fingerprint covers. Schedulers compare it with the
    /// pods they placed to know when the NodeResourceTopology reflects their decisions.
    #[serde(default)]
    pub pods_fingerprint: PodsFingerprint,

    /// Where the kubelet's files are on the host.
    #[serde(default)]
    pub kubelet: KubeletPaths,

    /// Pods left out of the fingerprint, as `namespace/name` globs (`*` matches any run
    /// of characters, `?` one, `[abc]` or `[!abc]` one of a set without ranges, `{a,b}`
    /// either word), e.g. `kube-system/*`. Only globs every agent compiles are accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 253)))]
    #[x_kube(validation = Rule::new(r#"self.all(p, p.matches('^([^/\\s\\[\\]{}\\\\]|\\[!?[^/\\s\\[\\]\\\\^!-]+\\]|\\{[^/\\s\\[\\]{}\\\\]+\\})+/([^/\\s\\[\\]{}\\\\]|\\[!?[^/\\s\\[\\]\\\\^!-]+\\]|\\{[^/\\s\\[\\]{}\\\\]+\\})+$'))"#).message("spec.updater.excludePods entries must look like 'namespace/name' (globs: *, ?, [class] without ranges, {a,b} without nesting), e.g. 'kube-system/*'"))]
    pub exclude_pods: Vec<String>,

    /// Tolerations of the agent's pods. Default: none beyond the ones every DaemonSet pod
    /// gets (not-ready, unreachable, disk/memory/PID pressure, unschedulable), so the
    /// agent runs on untainted nodes only and not on control-plane nodes. Tolerate the
    /// taints of your NUMA node groups here or per group (`spec.nodeGroups[].updater`).
    #[serde(default)]
    pub tolerations: Vec<Toleration>,

    /// Compute resources of the agent's container.
    #[serde(default = "default_resources")]
    pub resources: ResourceRequirements,

    /// PriorityClass of the agent pods; empty for none (the cluster's default priority).
    /// Default: `system-node-critical`, so that under node pressure the agent is evicted
    /// last and workloads do not preempt it: a node without its agent stops publishing
    /// its topology.
    #[serde(default = "pod::default_updater_priority_class")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = pod::priority_class_name("spec.updater.priorityClassName"))]
    pub priority_class_name: String,

    /// Extra labels of the agent pods (not of the DaemonSets). The operator's own
    /// (`app.kubernetes.io/name`, `managed-by`, `part-of`, `component`, `tas.dev/*`) and
    /// the controllers' (`controller-revision-hash`, `pod-template-generation`) are
    /// refused. At most 32. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "pod::label_map_schema")]
    #[x_kube(
        validation = pod::reserved_label_keys("spec.updater.podLabels"),
        validation = pod::qualified_keys("spec.updater.podLabels"),
        validation = pod::label_values("spec.updater.podLabels")
    )]
    pub pod_labels: BTreeMap<String, String>,

    /// Extra annotations of the agent pods. `tas.dev/*` keys are the operator's and
    /// refused. At most 32. Default: none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "pod::annotation_map_schema")]
    #[x_kube(
        validation = pod::reserved_annotation_keys("spec.updater.podAnnotations"),
        validation = pod::qualified_keys("spec.updater.podAnnotations")
    )]
    pub pod_annotations: BTreeMap<String, String>,

    /// How many of a group's agents may be down at once while a change rolls them: a
    /// number of at least 1 or a percentage of the group's nodes (`1%` to `100%`). While
    /// an agent restarts, its node's NodeResourceTopology only ages; the scheduler keeps
    /// using it. Default: `10%`.
    #[serde(default = "pod::default_max_unavailable")]
    #[schemars(schema_with = "pod::max_unavailable_schema")]
    #[x_kube(validation = pod::max_unavailable("spec.updater.maxUnavailable"))]
    pub max_unavailable: IntOrString,
    /// Topology Manager settings to publish instead of the kubelet configuration's, for
    /// kubelets configured by command-line flags.
    #[serde(default, skip_serializing_if = "TopologyManagerOverride::is_empty")]
    pub topology_manager: TopologyManagerOverride,

    /// Write a node's NodeResourceTopology even when another field manager (e.g.
    /// node-feature-discovery's topology-updater) writes it. By default the agent leaves
    /// such an object alone and the operator reports the node in
    /// `status.nodeGroups[].foreignNRTWriters`.
    #[serde(default, rename = "takeOverNRT")]
    pub take_over_nrt: bool,
}

impl Default for UpdaterSpec {
    fn default() -> Self {
        Self {
            image: None,
            refresh: RefreshSpec::default(),
            pods_fingerprint: PodsFingerprint::default(),
            kubelet: KubeletPaths::default(),
            exclude_pods: Vec::new(),
            tolerations: Vec::new(),
            resources: default_resources(),
            priority_class_name: pod::default_updater_priority_class(),
            pod_labels: BTreeMap::new(),
            pod_annotations: BTreeMap::new(),
            max_unavailable: pod::default_max_unavailable(),
            topology_manager: TopologyManagerOverride::default(),
            take_over_nrt: false,
        }
    }
}

fn default_resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.to_owned());
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), q("10m")),
            ("memory".to_owned(), q("32Mi")),
        ])),
        limits: Some(BTreeMap::from([("memory".to_owned(), q("64Mi"))])),
        ..ResourceRequirements::default()
    }
}

/// What makes the agent publish.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum RefreshMode {
    /// Every `period`.
    Periodic,
    /// When pods on the node start, change or stop (after `debounce`), as the agent
    /// sees by polling the kubelet's podresources API (its `--pod-poll-interval`,
    /// 500 ms by default); it reads no pods from the API server.
    Events,
    /// Both: react to pod changes and re-check every `period`.
    #[default]
    PeriodicAndEvents,
}

/// Publishing triggers. The agent writes the object only when its content changed, so a
/// short period costs reads of the kubelet, not API-server writes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RefreshSpec {
    /// Periodic, Events or PeriodicAndEvents.
    #[serde(default)]
    pub mode: RefreshMode,
    /// Re-check interval for the periodic modes (at least 1s).
    #[serde(default = "default_period")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(period_rule()).message("spec.updater.refresh.period must be a duration of at least 1s, e.g. '10s' or '1m'"))]
    pub period: String,
    /// How long to wait after a pod event for more events before publishing, so a burst
    /// of pod starts becomes one write (0s to 10s).
    #[serde(default = "default_debounce")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(debounce_rule()).message("spec.updater.refresh.debounce must be a duration between 0s and 10s, e.g. '200ms'"))]
    pub debounce: String,
    /// Longest time between two writes of a node's NodeResourceTopology, in every mode
    /// (10s to 1h). The agent writes when the content changes; when it has not changed
    /// for this long it rewrites the object with a fresh `tas.dev/heartbeat` attribute
    /// (and `tas.dev/heartbeat-period` set to this value), so readers can tell an idle
    /// node from a stopped agent: the scheduler and the operator treat an object whose
    /// heartbeat is older than `spec.scheduler.cache.missedHeartbeats` periods as stale.
    /// Default `10m`: at most 6 writes an hour on an idle node.
    #[serde(default = "default_heartbeat_period")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new(heartbeat_period_rule()).message("spec.updater.refresh.heartbeatPeriod must be a duration between 10s and 1h, e.g. '10m'"))]
    pub heartbeat_period: String,
}

impl Default for RefreshSpec {
    fn default() -> Self {
        Self {
            mode: RefreshMode::default(),
            period: default_period(),
            debounce: default_debounce(),
            heartbeat_period: default_heartbeat_period(),
        }
    }
}

pub(crate) fn default_heartbeat_period() -> String {
    "10m".to_owned()
}

/// CEL: a well-formed duration between 10s and 1h.
pub(crate) fn heartbeat_period_rule() -> String {
    format!(
        "self.matches('{DURATION_PATTERN}') && duration(self) >= duration('10s') && duration(self) <= duration('1h')"
    )
}

fn default_period() -> String {
    "10s".to_owned()
}

fn default_debounce() -> String {
    "200ms".to_owned()
}

/// CEL: a well-formed duration of at least 1s. The pattern is checked first so that a
/// malformed value fails with the rule's message rather than a CEL evaluation error.
pub(crate) fn period_rule() -> String {
    format!("self.matches('{DURATION_PATTERN}') && duration(self) >= duration('1s')")
}

pub(crate) fn debounce_rule() -> String {
    format!("self.matches('{DURATION_PATTERN}') && duration(self) <= duration('10s')")
}

/// Which pods the node's pod-set fingerprint covers.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum PodsFingerprint {
    /// Every pod on the node.
    All,
    /// Only pods holding exclusive CPUs, NUMA-pinned memory or NUMA-affine devices:
    /// the only pods that change per-zone availability.
    #[default]
    WithExclusiveResources,
    /// Publish no fingerprint (schedulers then cannot tell when their cache is stale).
    Disabled,
}

/// The field path of [`KubeletPaths`], named in refusals.
const KUBELET: &str = "spec.updater.kubelet";

/// Host paths of the kubelet's files, mounted read-only into the agent. Each must be on
/// the allow-list of kubelet paths of the common distributions ([`super::host_paths`],
/// the user guide), so editing the object cannot mount other host directories into the
/// agent, which runs as root.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KubeletPaths {
    /// Directory holding the kubelet's pod-resources socket (`kubelet.sock`). The whole
    /// directory is mounted so the agent survives kubelet restarts that recreate the socket.
    /// One of `/var/lib/kubelet/pod-resources`, `/var/lib/k0s/kubelet/pod-resources`,
    /// `/var/snap/microk8s/common/var/lib/kubelet/pod-resources`.
    #[serde(default = "default_pod_resources_dir")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = HostPathRule::PodResourcesDir.cel(KUBELET))]
    pub pod_resources_dir: String,
    /// The kubelet's configuration file, read for the Topology Manager policy and scope and
    /// the CPU and memory manager policies. A kubelet configuration file of a known layout
    /// (see the user guide), never a kubeconfig or a key.
    #[serde(default = "default_config_file")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = HostPathRule::ConfigFile.cel(KUBELET))]
    pub config_file: String,
    /// The kubelet's drop-in directory (its `--config-dir`): files named `*.conf` in it
    /// are merged over the config file in lexical order, as the kubelet does. Unset: the
    /// kubelet has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    #[x_kube(validation = HostPathRule::ConfigDir.cel(KUBELET))]
    pub config_dir: Option<String>,
    /// Read the running kubelet's configuration from its `/configz` endpoint, through the
    /// API server's node proxy, instead of the files. Off by default: it grants the node
    /// agents `nodes/proxy` (see docs/rbac.md).
    #[serde(default)]
    pub configz: bool,
}

impl Default for KubeletPaths {
    fn default() -> Self {
        Self {
            pod_resources_dir: default_pod_resources_dir(),
            config_file: default_config_file(),
            config_dir: None,
            configz: false,
        }
    }
}

fn default_pod_resources_dir() -> String {
    "/var/lib/kubelet/pod-resources".to_owned()
}

fn default_config_file() -> String {
    "/var/lib/kubelet/config.yaml".to_owned()
}
