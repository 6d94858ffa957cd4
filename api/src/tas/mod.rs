//! The `TopologyAwareScheduling` custom resource (`tas.dev/v1alpha1`, cluster-scoped).
//!
//! One object, named `default`, describes the whole topology-aware scheduling stack of a
//! cluster: where the operands run, which nodes get a node agent (node groups), how the
//! agents publish NodeResourceTopology objects, and how the NUMA-aware scheduler scores
//! and caches. The operator reconciles it and reports back through [`status`].
//!
//! Everything a schema rule can check is checked by the API server at `kubectl apply`
//! (defaults, enums, ranges and CEL rules declared on these types); what only the
//! operator can judge (e.g. overlapping node groups) becomes a `Degraded` condition.

pub mod host_paths;
mod kubelet;
mod network_policy;
mod node_group;
mod pod;
mod scheduler;
pub mod status;
mod updater;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use host_paths::{
    HostPathError, HostPathRule, KUBELET_CONFIG_DIR_PATTERN, KUBELET_CONFIG_FILE_PATTERN,
    POD_RESOURCES_DIR_PATTERN, PathTrick, check_config_dir, check_config_file,
    check_pod_resources_dir,
};
pub use kubelet::{KubeletOverride, TopologyManagerOverride};
pub use network_policy::{EndpointError, NetworkPolicySpec, otlp_port};
pub use node_group::{NodeGroup, NodeGroupUpdater, RefreshOverride};
pub use pod::{
    DEFAULT_SCHEDULER_PRIORITY_CLASS, DEFAULT_UPDATER_PRIORITY_CLASS, ImagePullPolicy,
    ImagePullSecret, RESERVED_KEY_PREFIX, RESERVED_POD_LABELS, SECURITY_ANNOTATION_PATTERN,
    is_security_annotation,
};
pub use scheduler::{
    CacheSpec, DEFAULT_SCHEDULER_NAME, DraAlignment, ForeignPodsDetection, InformerMode,
    NodesWithoutTopology, PreemptionSpec, ResourceWeight, SchedulerSpec, ScoringSpec,
    ScoringStrategy,
};
pub use status::{
    Condition, CreatedObject, ForeignNrtWriter, KubeletConfigIssue, NodeGroupStatus, NrtCrdStatus,
    RelatedObject, SchedulerStatus, TopologyAwareSchedulingStatus,
};
pub use updater::{KubeletPaths, PodsFingerprint, RefreshMode, RefreshSpec, UpdaterSpec};

/// The only accepted object name: there is one TAS stack per cluster.
pub const SINGLETON_NAME: &str = "default";
/// Default namespace for the operands.
pub const DEFAULT_NAMESPACE: &str = "tas-system";

/// Desired state of the topology-aware scheduling stack: node agents that publish each
/// node's NUMA topology, and a NUMA-aware scheduler that places pods where the kubelet's
/// Topology Manager will admit them.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "tas.dev",
    version = "v1alpha1",
    kind = "TopologyAwareScheduling",
    plural = "topologyawareschedulings",
    singular = "topologyawarescheduling",
    shortname = "tas",
    category = "tas",
    status = "TopologyAwareSchedulingStatus",
    doc = "TopologyAwareScheduling runs the whole topology-aware (NUMA-aware) scheduling stack of the cluster: the NodeResourceTopology CRD, a node agent per node group and the NUMA-aware scheduler. There is exactly one, named 'default'.",
    validation = Rule::new("self.metadata.name == 'default'").message("metadata.name must be 'default': TAS runs one stack per cluster, so the TopologyAwareScheduling object is a singleton named 'default'"),
    printcolumn(name = "Available", type_ = "string", json_path = ".status.conditions[?(@.type==\"Available\")].status", description = "All operands are running and ready"),
    printcolumn(name = "Degraded", type_ = "string", json_path = ".status.conditions[?(@.type==\"Degraded\")].status", description = "Something needs attention: see the Degraded condition's message"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Degraded\")].reason", description = "Why the stack is degraded", priority = 1),
    printcolumn(name = "Scheduler", type_ = "string", json_path = ".spec.scheduler.schedulerName", description = "Pods with this spec.schedulerName are scheduled NUMA-aware"),
    printcolumn(name = "Nodes", type_ = "integer", json_path = ".status.desiredNodes", description = "Nodes selected by the node groups"),
    printcolumn(name = "Fresh-NRT", type_ = "integer", json_path = ".status.nodesWithFreshNRT", description = "Nodes whose NodeResourceTopology is up to date"),
    printcolumn(name = "Paused", type_ = "boolean", json_path = ".spec.paused", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAwareSchedulingSpec {
    /// Namespace the operator runs the updater DaemonSets and the scheduler Deployment
    /// in: the operator's own namespace (`tas-system`) or a namespace that does not exist
    /// yet, which the operator then creates (and deletes on uninstall). Never a system
    /// namespace. Changing it moves the operands.
    #[serde(default = "default_namespace")]
    #[schemars(length(min = 1, max = 63))]
    #[x_kube(
        validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("spec.namespace must be a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit"),
        validation = Rule::new(NAMESPACE_NOT_SYSTEM_RULE).message("spec.namespace must not be default or a kube-* or openshift* namespace: the operands run in the operator's own namespace or in a new namespace the operator creates")
    )]
    pub namespace: String,

    /// Stop reconciling: the operator keeps every operand exactly as it is and reports
    /// `Progressing=False` with reason `Paused` until this is set back to false.
    #[serde(default)]
    pub paused: bool,

    /// Whether the operator installs and upgrades the NodeResourceTopology CRD.
    #[serde(default, rename = "nrtCRD")]
    pub nrt_crd: NrtCrdSpec,

    /// Node agent settings shared by every node group (each group may override them).
    #[serde(default)]
    pub updater: UpdaterSpec,

    /// Groups of nodes that run the node agent, selected by plain label selectors. Groups
    /// must not overlap. When empty, one group named `all` covers every node.
    #[serde(default)]
    #[schemars(length(max = 32))]
    #[x_kube(
        merge_strategy = ListMerge::Map(vec!["name".into()]),
        validation = Rule::new("self.all(g, self.filter(h, h.name == g.name).size() == 1)").message("spec.nodeGroups[].name must be unique")
    )]
    pub node_groups: Vec<NodeGroup>,

    /// The NUMA-aware scheduler.
    #[serde(default)]
    pub scheduler: SchedulerSpec,

    /// Logs, traces and metrics of the operator and its operands.
    #[serde(default)]
    pub observability: ObservabilitySpec,

    /// Secrets the kubelet uses to pull the operand images (scheduler and node agents)
    /// from a private registry: `kubernetes.io/dockerconfigjson` Secrets in
    /// `spec.namespace`, which the operator neither creates nor copies (create them there,
    /// e.g. with `kubectl create secret docker-registry`). At most 16. Default: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub image_pull_secrets: Vec<ImagePullSecret>,

    /// When the kubelet pulls the operand images: Always, IfNotPresent or Never. Default:
    /// unset, which is Kubernetes' own default (Always for an untagged or `:latest` image,
    /// IfNotPresent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,

    /// The operands' NetworkPolicies, which the operator renders in `spec.namespace`
    /// with egress to the port of `spec.observability.otlpEndpoint`.
    #[serde(default)]
    pub network_policy: NetworkPolicySpec,
}

/// CEL: the operands never go to a namespace of the system or of the platform, where
/// the operator has no rights and other workloads' ServiceAccounts and ConfigMaps live.
const NAMESPACE_NOT_SYSTEM_RULE: &str =
    "self != 'default' && !self.startsWith('kube-') && !self.startsWith('openshift')";

fn default_namespace() -> String {
    DEFAULT_NAMESPACE.to_owned()
}

/// Ownership of the NodeResourceTopology CRD (`noderesourcetopologies.topology.node.k8s.io`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!self.deleteOnUninstall || self.manage").message("spec.nrtCRD.deleteOnUninstall requires spec.nrtCRD.manage: the operator only deletes a CRD it manages"))]
pub struct NrtCrdSpec {
    /// Install the CRD and keep it up to date. Set to false when another tool (for
    /// example node-feature-discovery) owns it; the operator then only checks it exists.
    #[serde(default = "crate::tas::default_true")]
    pub manage: bool,
    /// Delete the CRD, and with it every NodeResourceTopology object, when this
    /// TopologyAwareScheduling is deleted. By default the CRD is kept because other tools
    /// may read or write NodeResourceTopology objects.
    #[serde(default)]
    pub delete_on_uninstall: bool,
    /// With `manage`, apply the CRD even when another field manager (e.g.
    /// node-feature-discovery's Helm release) manages it, taking over the fields both
    /// set. By default the operator leaves such a CRD alone and reports its manager in
    /// the `NRTOwnership` condition.
    #[serde(default)]
    pub take_over: bool,
}

impl Default for NrtCrdSpec {
    fn default() -> Self {
        Self {
            manage: true,
            delete_on_uninstall: false,
            take_over: false,
        }
    }
}

/// Log verbosity.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    /// The value `tracing`'s filters understand.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
            Self::Debug => "debug",
            Self::Trace => "trace",
        }
    }
}

/// Logs, traces and metrics.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObservabilitySpec {
    /// Log level of the operator's operands (updater and scheduler).
    #[serde(default)]
    pub log_level: LogLevel,
    /// OpenTelemetry collector endpoint, e.g. `http://otel-collector.monitoring:4317`
    /// for OTLP/gRPC or `http://otel-collector.monitoring:4318` with `otlpProtocol:
    /// http/protobuf` (signals are posted to `<endpoint>/v1/traces` and `/v1/metrics`);
    /// without a port the client dials the scheme's (80 or 443), so name the collector's. The operands' NetworkPolicies
    /// (`spec.networkPolicy`) allow egress to this port. When unset the operator falls back to its
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` environment variable; when neither is set, no traces
    /// or OTLP metrics are exported (Prometheus `/metrics` is always served).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(
        validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')").message("spec.observability.otlpEndpoint must be an http:// or https:// URL"),
        validation = Rule::new(OTLP_ENDPOINT_PORT_RULE).message("spec.observability.otlpEndpoint must name a host and, if any, a port from 1 to 65535 (IPv6 addresses in brackets), e.g. http://otel-collector.monitoring:4317")
    )]
    pub otlp_endpoint: Option<String>,
    /// The OTLP transport of every component: `grpc` or `http/protobuf`. When unset the
    /// operator uses its `OTEL_EXPORTER_OTLP_PROTOCOL` (gRPC when that is unset too) and
    /// the operands use gRPC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp_protocol: Option<OtlpProtocol>,
    /// Where the operands' HTTPS serving certificate (of `/metrics`, `/healthz`,
    /// `/readyz`) comes from. `SelfSigned` (default): generated at start, so scrapers
    /// cannot verify it. `Secret`: each operand mounts the `kubernetes.io/tls` Secret
    /// named after its metrics Service plus `-tls` — `tas-scheduler-metrics-tls` in
    /// `spec.namespace`, `tas-updater-metrics-tls` in the node agents' namespace — as
    /// cert-manager or OpenShift's service CA write them (the operator annotates the
    /// Services for the latter), and serves a renewed certificate without a restart. The
    /// pods wait until their Secret exists.
    #[serde(default)]
    pub serving_certificate: ServingCertificate,
}

/// The OTLP transport of every component: `grpc` (collectors listen on 4317) or
/// `http/protobuf` (on 4318). When unset the operator uses its
/// `OTEL_EXPORTER_OTLP_PROTOCOL` (gRPC when that is unset too) and the operands use gRPC.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum OtlpProtocol {
    /// OTLP/gRPC (collectors listen on 4317).
    #[default]
    #[serde(rename = "grpc")]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (collectors listen on 4318).
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

impl OtlpProtocol {
    /// The value as `OTEL_EXPORTER_OTLP_PROTOCOL` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::HttpProtobuf => "http/protobuf",
        }
    }
}

/// Where the operands' serving certificate comes from.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum ServingCertificate {
    /// Generated self-signed at start.
    #[default]
    SelfSigned,
    /// From the Secret `<metrics Service>-tls` in the operand's namespace.
    Secret,
}

/// CEL: the endpoint is a URL whose port, if any, the operands' NetworkPolicy can open
/// (what `network_policy::otlp_port` accepts).
const OTLP_ENDPOINT_PORT_RULE: &str = "isURL(self) && url(self).getHostname() != '' && (url(self).getPort() == '' || (int(url(self).getPort()) >= 1 && int(url(self).getPort()) <= 65535))";

pub(crate) fn default_true() -> bool {
    true
}

impl TopologyAwareScheduling {
    /// The node groups to run, with the implicit `all` group when none is declared.
    pub fn effective_node_groups(&self) -> Vec<NodeGroup> {
        if self.spec.node_groups.is_empty() {
            vec![NodeGroup::all_nodes()]
        } else {
            self.spec.node_groups.clone()
        }
    }
}

#[cfg(test)]
mod tests;
