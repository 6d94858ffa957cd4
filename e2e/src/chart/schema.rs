//! `values.schema.json` (JSON Schema draft-07): Helm checks every install, upgrade,
//! lint and template against it and refuses bad values with the field's path in the
//! message. Every object refuses unknown keys, so a misspelt value is an error rather
//! than silently ignored.

use serde_json::{Value, json};

use super::operator::OperatorDefaults;

/// A DNS-1123 label, or empty.
const NAMESPACE_OR_EMPTY: &str = "^([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$";
/// Labels the chart's templates set themselves: a duplicate key would break the YAML.
const CHART_LABELS: &str = "^(app\\.kubernetes\\.io/(name|part-of|component|instance|managed-by|version)|helm\\.sh/chart)$";

fn object(description: &str, properties: Value) -> Value {
    json!({
        "type": "object",
        "description": description,
        "additionalProperties": false,
        "properties": properties,
    })
}

fn boolean(description: &str) -> Value {
    json!({ "type": "boolean", "description": description })
}

fn string(description: &str, pattern: &str) -> Value {
    json!({ "type": "string", "description": description, "pattern": pattern })
}

/// A map of label or annotation values (strings), keys not matching `forbidden` (a
/// regex): those are refused with the key in the error's path.
fn string_map(description: &str, forbidden: Option<&str>) -> Value {
    let mut map = json!({
        "type": "object",
        "description": description,
        "additionalProperties": { "type": "string" },
    });
    if let Some(pattern) = forbidden {
        map["patternProperties"] = json!({ pattern: false });
    }
    map
}

/// The schema of values.yaml; `operator` gives the env names extra env must not repeat.
pub fn values_schema(operator: &OperatorDefaults) -> String {
    let digest = |whose: &str| {
        string(
            &format!("Digest of {whose} (sha256:<64 hex>); wins over the tag. Empty: the tag."),
            "^(sha256:[a-f0-9]{64})?$",
        )
    };
    let chart_env = json!(operator.env_names);
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Values of the TAS chart",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "image": object("The three images: <registry>/tas-operator, tas-updater, tas-scheduler.", json!({
                "registry": string("Registry and path of the images, without a trailing slash.", "^[^\\s/]+(/[^\\s/]+)*$"),
                "tag": string("Tag of all three images. Empty: the chart's appVersion.", "^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$"),
                "digest": digest("the operator's image"),
                "updaterDigest": digest("the node agents' default image"),
                "schedulerDigest": digest("the scheduler's default image"),
                "pullPolicy": {
                    "type": "string",
                    "description": "The operator container's imagePullPolicy. Empty: Kubernetes' default.",
                    "enum": ["", "Always", "IfNotPresent", "Never"],
                },
            })),
            "operator": object("The operator Deployment.", json!({
                "replicas": { "type": "integer", "minimum": 1, "description": "Replicas (one leads, the others stand by)." },
                "resources": {
                    "type": "object",
                    "description": "The operator container's resources (requests, limits).",
                    "additionalProperties": false,
                    "properties": {
                        "requests": { "type": "object", "additionalProperties": { "type": ["string", "number"] } },
                        "limits": { "type": "object", "additionalProperties": { "type": ["string", "number"] } },
                        "claims": { "type": "array" },
                    },
                },
                "nodeSelector": string_map("The operator pod's nodeSelector.", None),
                "affinity": { "type": "object", "description": "The operator pod's affinity." },
                "tolerations": {
                    "type": "array",
                    "description": "The operator pod's tolerations.",
                    "items": { "type": "object" },
                },
                "imagePullSecrets": {
                    "type": "array",
                    "description": "Secrets of the release namespace with registry credentials, as {name: ...}.",
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "required": ["name"],
                        "properties": { "name": { "type": "string", "minLength": 1 } },
                    },
                },
                "priorityClassName": { "type": "string", "description": "The operator pod's PriorityClass. Empty: none." },
                "extraEnv": {
                    "type": "array",
                    "description": "Env vars added to the operator container (not those the chart sets).",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {
                                "type": "string",
                                "pattern": "^[-._a-zA-Z][-._a-zA-Z0-9]*$",
                                "not": { "enum": chart_env },
                            },
                        },
                    },
                },
                "podLabels": string_map("Labels added to the operator pods.", Some(CHART_LABELS)),
                "podAnnotations": string_map("Annotations added to the operator pods.", None),
                "allowedImages": {
                    "type": "array",
                    "description": "Images the TopologyAwareScheduling object may name besides the release's own (full references).",
                    "items": { "type": "string", "pattern": "^[^\\s,]+$" },
                },
                "allowedTolerationKeys": {
                    "type": "array",
                    "description": "Taint keys the object's tolerations may name; \"*\": any.",
                    "items": { "type": "string", "pattern": "^[^\\s,]+$" },
                },
            })),
            "crds": object("The TopologyAwareScheduling CRD (a template: upgrades apply it).", json!({
                "install": boolean("Install and upgrade the CRD with the release."),
                "keep": boolean("Leave the CRD in place on helm uninstall."),
            })),
            "updaterNamespace": string("The node agents' namespace. Empty: <release namespace without -system>-node.", NAMESPACE_OR_EMPTY),
            "operandNamespace": string("The operands' namespace (spec.namespace). Empty: the release namespace.", NAMESPACE_OR_EMPTY),
            "networkPolicies": object("NetworkPolicies.", json!({
                "enabled": boolean("The operator's NetworkPolicy, and the object's spec.networkPolicy.enabled unless its spec sets it."),
            })),
            "monitoring": object("The monitoring bundle (needs the Prometheus Operator's CRDs).", json!({
                "serviceMonitors": object("ServiceMonitors.", json!({ "enabled": boolean("Install the ServiceMonitors.") })),
                "prometheusRule": object("Alerting rules.", json!({ "enabled": boolean("Install the PrometheusRule.") })),
                "grafanaDashboard": object("The dashboard ConfigMap.", json!({ "enabled": boolean("Install the dashboard ConfigMap.") })),
                "labels": string_map("Labels added to the monitoring objects (e.g. release: kube-prometheus-stack).", Some(CHART_LABELS)),
                "prometheusServiceAccount": object("The scraper's ServiceAccount, bound tas-metrics-reader.", json!({
                    "name": string("Its name. Empty: no binding.", "^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)?$"),
                    "namespace": string("Its namespace. Empty: the release namespace.", NAMESPACE_OR_EMPTY),
                })),
            })),
            "uninstallHook": object("The pre-delete hook deleting the TopologyAwareScheduling objects.", json!({
                "enabled": boolean("Run the hook on helm uninstall."),
                "timeoutSeconds": { "type": "integer", "minimum": 10, "description": "How long the hook waits for the objects to be gone." },
            })),
            "topologyAwareScheduling": object("The TopologyAwareScheduling object default.", json!({
                "create": boolean("Create the object with the release (after its CRD)."),
                "spec": {
                    "type": "object",
                    "description": "Its spec (the CRD validates it); spec.namespace defaults to operandNamespace.",
                    "properties": {
                        "namespace": string("The operands' namespace.", NAMESPACE_OR_EMPTY),
                    },
                },
            })),
        },
    });
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
