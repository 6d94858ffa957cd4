//! `values.yaml`: every value the chart reads, with its default (from config/ where
//! config/ has one) and what it sets. `values.schema.json` ([`super::schema`]) checks
//! the same tree; a test checks that the two cover the same keys.

use serde_json::Value;

use super::ChartError;
use super::operator::OperatorDefaults;
use super::templatize::{GENERATED, to_yaml};

/// `value` as YAML indented by `indent` spaces (each line), after `key:`.
fn block(key: &str, value: &Value, indent: usize) -> Result<String, ChartError> {
    let pad = " ".repeat(indent);
    let empty = value.as_object().is_some_and(|m| m.is_empty())
        || value.as_array().is_some_and(|a| a.is_empty())
        || value.is_null();
    if empty || !value.is_object() && !value.is_array() {
        let inline = serde_json::to_string(value).unwrap_or_default();
        return Ok(format!("{pad}{key}: {inline}\n"));
    }
    let mut out = format!("{pad}{key}:\n");
    for line in to_yaml(value)?.lines() {
        out.push_str(&format!("{pad}  {line}\n"));
    }
    Ok(out)
}

/// values.yaml for the operator's defaults and the sample object's `spec` (without
/// its namespace, which follows the release).
pub fn values_yaml(operator: &OperatorDefaults, spec: &Value) -> Result<String, ChartError> {
    let mut out = format!(
        "# Values of the TAS chart. {GENERATED}
# With these defaults the chart installs what `kubectl apply -k config/default` installs.
# values.schema.json refuses unknown keys and values of the wrong type or form.

image:
  # Registry (and path) of the three images: <registry>/tas-operator, tas-updater,
  # tas-scheduler. The operator passes the operand images to the node agents and the
  # scheduler unless the TopologyAwareScheduling object names its own.
  registry: {}
  # Tag of all three; empty: the chart's appVersion.
  tag: \"\"
  # Digests (sha256:<64 hex>); a digest wins over the tag: <registry>/<name>@<digest>.
  # digest: the operator's; updaterDigest, schedulerDigest: the operands' defaults.
  digest: \"\"
  updaterDigest: \"\"
  schedulerDigest: \"\"
  # The operator container's imagePullPolicy (and the uninstall hook's); empty:
  # Kubernetes' default. The operands' is the object's spec.imagePullPolicy.
  pullPolicy: \"\"

# The operator Deployment (leader election: one replica reconciles, the others stand by).
operator:
  replicas: {}
",
        operator.registry, operator.replicas
    );
    out.push_str(&block("resources", &operator.resources, 2)?);
    for (field, value) in &operator.blocks {
        out.push_str(&block(field, value, 2)?);
    }
    out.push_str(
        "  tolerations: []
  # Secrets of the release namespace holding registry credentials, as
  # [{name: my-registry}] (the operator pod's imagePullSecrets; the operands' are the
  # object's spec.imagePullSecrets).
  imagePullSecrets: []
  priorityClassName: \"\"
  # Env vars added to the operator container, e.g. where it sends its own traces and
  # metrics until the object names an endpoint:
  # [{name: OTEL_EXPORTER_OTLP_ENDPOINT, value: \"http://otel-collector.monitoring:4317\"}]
  extraEnv: []
  # Added to the operator pods (not to the Deployment's selector).
  podLabels: {}
  podAnnotations: {}
  # What the TopologyAwareScheduling object may choose (docs/user-guide.md, \"What the
  # installer decides\"): images it may name besides the release's own two, as full
  # references (repository:tag, repository@sha256:<digest> or both), exactly as the
  # object writes them (TAS_ALLOWED_IMAGES); and the taint keys its tolerations may name,
  # \"*\" for any toleration, also one of every taint (TAS_ALLOWED_TOLERATION_KEYS).
  # Empty: the release's images only, no tolerations.
",
    );
    for (field, value) in &operator.lists {
        out.push_str(&block(field, value, 2)?);
    }
    out.push_str(
        "
# The TopologyAwareScheduling CRD, a template (not crds/, which Helm never upgrades): a
# `helm upgrade` applies its changes. install: false when something else installs it.
# keep: `helm uninstall` leaves it (and with it any object of the kind) in place;
# false deletes it with the release.
crds:
  install: true
  keep: true

# The node agents' namespace (the operator's TAS_UPDATER_NAMESPACE). Empty: the release
# namespace with `-system` taken off and `-node` added (tas-system → tas-node, other →
# other-node). The chart creates it with the Pod Security level `privileged` the agents
# need (read-only host paths, uid 0) and binds the operator tas-operator-operands there,
# so that the release namespace (the operator's, and by default the scheduler's) can
# enforce `restricted`. Set it to the release namespace to run the agents there (that
# namespace must then allow them).
updaterNamespace: \"\"

# The operands' namespace: spec.namespace of the chart's TopologyAwareScheduling object
# and of the object NOTES.txt shows, and where the scheduler's ServiceMonitor goes.
# Empty: the release namespace (topologyAwareScheduling.spec.namespace wins if set).
operandNamespace: \"\"

# The operator's NetworkPolicy (config/network-policies; its OTLP rule opens 4317, patch
# it for a collector on another port), and spec.networkPolicy.enabled of the chart's
# TopologyAwareScheduling object (unless its spec sets it): the operator renders the
# operands' policies in spec.namespace, on the port of spec.observability.otlpEndpoint.
networkPolicies:
  enabled: true

# The monitoring bundle (config/prometheus); needs the Prometheus Operator's CRDs.
monitoring:
  serviceMonitors:
    enabled: false
  prometheusRule:
    enabled: false
  # A ConfigMap labelled grafana_dashboard=\"1\" holding the dashboard JSON.
  grafanaDashboard:
    enabled: false
  # Labels added to the ServiceMonitors, the PrometheusRule and the dashboard
  # ConfigMap, e.g. {release: kube-prometheus-stack} for a Prometheus that selects on it.
  labels: {}
  # The scraper's ServiceAccount: bound the ClusterRole tas-metrics-reader (get
  # /metrics) by a ClusterRoleBinding tas-metrics-reader. Empty name: no binding.
  # Namespace empty: the release namespace.
  prometheusServiceAccount:
    name: \"\"
    namespace: \"\"

# `helm uninstall` first runs a pre-delete hook (a Job with its own ServiceAccount, allowed
# only to list, watch and delete TopologyAwareScheduling objects; docs/rbac.md) that
# deletes the object and waits until the operator has removed the operands, so that
# the uninstall leaves nothing behind. timeoutSeconds: how long it waits.
uninstallHook:
  enabled: true
  timeoutSeconds: 300

# A TopologyAwareScheduling object (cluster-scoped, named default), off by default: the
# object is usually created apart from the release that installs its CRD (NOTES.txt and
# docs/user-guide.md show how). With create: true the chart creates it from the spec
# below (config/samples/tas_v1alpha1_topologyawarescheduling.yaml; spec.namespace:
# operandNamespace unless set here), after the CRD: on the first install as a
# post-install hook, then as a release object that upgrades change. See
# docs/user-guide.md for every field.
topologyAwareScheduling:
  create: false
",
    );
    out.push_str(&block("spec", spec, 2)?);
    Ok(out)
}
