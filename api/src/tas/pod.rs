//! Pod-level settings of the operands that belong to the cluster admin rather than to
//! TAS: how images are pulled, where the scheduler may run, with which priority, which
//! extra labels and annotations the pods carry, and how many agents a rollout may take
//! down at once.
//!
//! The types and the CEL rules they share live here; the fields sit at the end of
//! [`TopologyAwareSchedulingSpec`](super::TopologyAwareSchedulingSpec),
//! [`SchedulerSpec`](super::SchedulerSpec), [`UpdaterSpec`](super::UpdaterSpec) and
//! [`NodeGroupUpdater`](super::NodeGroupUpdater). The operator renders them into the pod
//! templates (`operator/src/desired/pod.rs`); every default reproduces the pods the
//! operator rendered before these fields existed, so an upgrade rolls nothing.

use super::node_group::NodeGroupUpdater;
use super::updater::UpdaterSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::KubeSchema;
use kube::core::{Message, Rule};
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// Default priority class of the scheduler pods: pods that name this scheduler wait for
/// nobody else, so the scheduler ranks with the cluster's own control-plane add-ons.
pub const DEFAULT_SCHEDULER_PRIORITY_CLASS: &str = "system-cluster-critical";
/// Default priority class of the node agent pods: a node without its agent publishes no
/// topology and gets no NUMA-sensitive pods, so the agent is the last pod the kubelet
/// evicts under node pressure and is not preempted by workloads.
pub const DEFAULT_UPDATER_PRIORITY_CLASS: &str = "system-node-critical";

/// Pod label keys the operator or the workload controllers own: the operator's pod
/// selectors and common labels, and the labels the Deployment and DaemonSet controllers
/// stamp on pods. Extra pod labels may not set them (nor any `tas.dev/` key).
pub const RESERVED_POD_LABELS: [&str; 7] = [
    "app.kubernetes.io/name",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/component",
    "pod-template-hash",
    "controller-revision-hash",
    "pod-template-generation",
];
/// Prefix of the operator's own label and annotation keys (`tas.dev/stack`,
/// `tas.dev/node-group`, `tas.dev/config-hash`): reserved in extra labels and annotations.
pub const RESERVED_KEY_PREFIX: &str = "tas.dev/";

/// Most extra labels, annotations or node-selector entries per pod template.
const MAX_ENTRIES: u32 = 32;

/// A label or annotation key: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 characters. (`[.]` rather than an escaped dot: embedded in CEL literals.)
const QUALIFIED_NAME: &str =
    "^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";
/// A label value: empty, or at most 63 characters starting and ending alphanumeric.
const LABEL_VALUE: &str = "^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$";
/// A DNS-1123 subdomain (the name of a PriorityClass).
const DNS_SUBDOMAIN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// When the kubelet pulls the operand images (their containers' `imagePullPolicy`):
/// Always, IfNotPresent or Never. Unset: Kubernetes' own default (Always for an untagged
/// or `:latest` image, IfNotPresent otherwise).
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImagePullPolicy {
    /// On every container start (the registry is asked for the tag's current digest).
    Always,
    /// Only when the node does not have the image yet.
    IfNotPresent,
    /// Never: the image must already be on the node.
    Never,
}

impl ImagePullPolicy {
    /// The value of a container's `imagePullPolicy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        }
    }
}

/// A Secret in `spec.namespace` holding registry credentials
/// (`kubernetes.io/dockerconfigjson`), as in a pod's `imagePullSecrets`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ImagePullSecret {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new(format!("self.matches('{DNS_SUBDOMAIN}')")).message("spec.imagePullSecrets[].name must be a Secret name (a DNS-1123 subdomain)"))]
    pub name: String,
}

pub(crate) fn default_scheduler_priority_class() -> String {
    DEFAULT_SCHEDULER_PRIORITY_CLASS.to_owned()
}

pub(crate) fn default_updater_priority_class() -> String {
    DEFAULT_UPDATER_PRIORITY_CLASS.to_owned()
}

pub(crate) fn default_max_unavailable() -> IntOrString {
    IntOrString::String("10%".to_owned())
}

/// Schema of a map of extra pod labels (or node-selector entries): at most
/// [`MAX_ENTRIES`] string values of at most 63 characters (bounded sizes also keep the
/// API server's CEL cost estimate of the rules on the map low).
pub(crate) fn label_map_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string", "maxLength": 63},
        "maxProperties": MAX_ENTRIES,
    })
}

/// Schema of a `maxUnavailable` that is never null: kube marks an optional
/// int-or-string nullable, and a stored `null` would neither be defaulted by the API
/// server (which prunes nulls of non-nullable fields, then defaults them) nor read by
/// the operator. At most 4 characters (`100%`), which bounds the cost of its CEL rule.
pub(crate) fn max_unavailable_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"x-kubernetes-int-or-string": true, "nullable": false, "maxLength": 4})
}

/// Schema of an optional `maxUnavailable` override (unset: inherited).
pub(crate) fn max_unavailable_override_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"x-kubernetes-int-or-string": true, "nullable": true, "maxLength": 4})
}

/// Schema of a map of extra pod annotations: at most [`MAX_ENTRIES`] entries.
pub(crate) fn annotation_map_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "maxProperties": MAX_ENTRIES,
    })
}

fn rule(expression: String, message: String) -> Rule {
    Rule::new(expression).message(Message::Message(message))
}

/// CEL: no key of the map at `path` is one the operator or a workload controller owns.
pub(crate) fn reserved_label_keys(path: &str) -> Rule {
    let reserved = RESERVED_POD_LABELS
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(", ");
    rule(
        format!("self.all(k, !k.startsWith('{RESERVED_KEY_PREFIX}') && !(k in [{reserved}]))"),
        format!(
            "{path} must not set the labels the operator selects and manages its pods by \
             ({}, {RESERVED_KEY_PREFIX}*)",
            RESERVED_POD_LABELS.join(", ")
        ),
    )
}

/// Annotation keys that change a container's confinement: the AppArmor and seccomp
/// annotations (`container.apparmor.security.beta.kubernetes.io/<container>`,
/// `seccomp.security.alpha.kubernetes.io/pod`, ...), which kubelets still honour or the
/// API server still copies into the security context. The operator sets the operands'
/// confinement itself; the object must not loosen it (e.g. AppArmor `unconfined` on the
/// node agent, which runs as root).
pub const SECURITY_ANNOTATION_PATTERN: &str =
    r"^([^/]*[.])?security[.](alpha|beta)[.]kubernetes[.]io/";

/// Whether `key` is one of the confinement annotations of [`SECURITY_ANNOTATION_PATTERN`].
pub fn is_security_annotation(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    [
        "security.alpha.kubernetes.io",
        "security.beta.kubernetes.io",
    ]
    .iter()
    .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

/// CEL: no key of the annotation map at `path` is in the operator's `tas.dev/` domain or
/// is a confinement annotation ([`SECURITY_ANNOTATION_PATTERN`]).
pub(crate) fn reserved_annotation_keys(path: &str) -> Rule {
    rule(
        format!(
            "self.all(k, !k.startsWith('{RESERVED_KEY_PREFIX}') && !k.matches('{SECURITY_ANNOTATION_PATTERN}'))"
        ),
        format!(
            "{path} must not set {RESERVED_KEY_PREFIX}* annotations (the operator owns them) \
             nor *security.alpha.kubernetes.io/* or *security.beta.kubernetes.io/* annotations \
             (AppArmor and seccomp: the operator sets the operands' confinement)"
        ),
    )
}

/// CEL: every key of the map at `path` is a well-formed label or annotation key.
pub(crate) fn qualified_keys(path: &str) -> Rule {
    rule(
        format!("self.all(k, k.matches('{QUALIFIED_NAME}'))"),
        format!(
            "{path} keys must be qualified names like label keys: an optional DNS subdomain \
             and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ),
    )
}

/// CEL: every value of the map at `path` is a well-formed label value.
pub(crate) fn label_values(path: &str) -> Rule {
    rule(
        format!("self.all(k, self[k].matches('{LABEL_VALUE}'))"),
        format!(
            "{path} values must be label values: empty, or at most 63 letters, digits, '-', \
             '_' or '.', starting and ending with a letter or digit"
        ),
    )
}

/// CEL: the node selector at `path` keeps the operands on Linux nodes.
pub(crate) fn linux_only(path: &str) -> Rule {
    rule(
        "!('kubernetes.io/os' in self) || self['kubernetes.io/os'] == 'linux'".to_owned(),
        format!(
            "{path} may not select kubernetes.io/os other than 'linux': the operands are \
             Linux binaries"
        ),
    )
}

/// CEL: the priority class name at `path` is empty or a DNS-1123 subdomain.
pub(crate) fn priority_class_name(path: &str) -> Rule {
    rule(
        format!("self == '' || self.matches('{DNS_SUBDOMAIN}')"),
        format!(
            "{path} must be the name of a PriorityClass (a DNS-1123 subdomain), or empty for \
             none"
        ),
    )
}

/// CEL: the int-or-string at `path` is a count of at least 1 or a percentage from 1% to
/// 100% (a DaemonSet's `maxUnavailable` without `maxSurge`).
pub(crate) fn max_unavailable(path: &str) -> Rule {
    rule(
        "type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')".to_owned(),
        format!("{path} must be a number of at least 1 or a percentage from 1% to 100%"),
    )
}

/// Applies a node group's pod and rollout overrides to its merged settings: each one
/// set replaces the shared value.
pub(crate) fn merge_group_pod_overrides(merged: &mut UpdaterSpec, o: &NodeGroupUpdater) {
    if let Some(p) = &o.priority_class_name {
        merged.priority_class_name = p.clone();
    }
    if let Some(l) = &o.pod_labels {
        merged.pod_labels = l.clone();
    }
    if let Some(a) = &o.pod_annotations {
        merged.pod_annotations = a.clone();
    }
    if let Some(m) = &o.max_unavailable {
        merged.max_unavailable = m.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tas::{NodeGroup, TopologyAwareScheduling};
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    #[test]
    fn confinement_annotations_are_recognised_and_the_cel_pattern_agrees() {
        let pattern = regex::Regex::new(SECURITY_ANNOTATION_PATTERN).unwrap();
        for key in [
            "container.apparmor.security.beta.kubernetes.io/tas-updater",
            "seccomp.security.alpha.kubernetes.io/pod",
            "container.seccomp.security.alpha.kubernetes.io/tas-scheduler",
            "security.beta.kubernetes.io/x",
        ] {
            assert!(is_security_annotation(key), "{key}");
            assert!(pattern.is_match(key), "{key}");
        }
        for key in [
            "prometheus.io/scrape",
            "cluster-autoscaler.kubernetes.io/safe-to-evict",
            "example.com/security.beta.kubernetes.io",
            "notsecurity.beta.kubernetes.io/x",
            "apparmor",
        ] {
            assert!(!is_security_annotation(key), "{key}");
            assert!(!pattern.is_match(key), "{key}");
        }
    }

    fn spec(spec: Value) -> crate::tas::TopologyAwareSchedulingSpec {
        let cr: TopologyAwareScheduling = serde_json::from_value(json!({
            "apiVersion": "tas.dev/v1alpha1",
            "kind": "TopologyAwareScheduling",
            "metadata": {"name": "default"},
            "spec": spec,
        }))
        .expect("object parses");
        cr.spec
    }

    /// Unset, every field reproduces the pods the operator rendered before they existed.
    #[test]
    fn unset_fields_default_to_the_former_hard_coded_pods() {
        let s = spec(json!({}));
        assert!(s.image_pull_secrets.is_empty());
        assert_eq!(s.image_pull_policy, None);
        let sched = &s.scheduler;
        assert_eq!(sched.priority_class_name, "system-cluster-critical");
        assert!(sched.node_selector.is_empty() && sched.tolerations.is_empty());
        assert_eq!(sched.affinity, None);
        assert_eq!(
            sched.topology_spread_constraints, None,
            "the operator's spread"
        );
        assert!(sched.pod_labels.is_empty() && sched.pod_annotations.is_empty());
        assert_eq!(s.updater.priority_class_name, "system-node-critical");
        assert!(s.updater.pod_labels.is_empty() && s.updater.pod_annotations.is_empty());
        assert_eq!(s.updater.max_unavailable, IntOrString::String("10%".into()));

        // `[]` and `""` are kept apart from unset: no constraints, no priority class.
        let s =
            spec(json!({"scheduler": {"topologySpreadConstraints": [], "priorityClassName": ""}}));
        assert_eq!(s.scheduler.topology_spread_constraints, Some(vec![]));
        assert_eq!(s.scheduler.priority_class_name, "");
        let back = serde_json::to_value(&s.scheduler).unwrap();
        assert_eq!(back["topologySpreadConstraints"], json!([]));
    }

    #[test]
    fn group_pod_overrides_replace_the_shared_values() {
        let s = spec(json!({
            "updater": {
                "priorityClassName": "agents",
                "podLabels": {"team": "numa", "tier": "node"},
                "podAnnotations": {"example.com/scrape": "true"},
            },
            "nodeGroups": [
                {"name": "own", "updater": {"priorityClassName": "", "podLabels": {"team": "gpu"}, "maxUnavailable": 1}},
                {"name": "inherits", "updater": {"refresh": {"period": "5s"}}},
            ],
        }));
        let merged: Vec<_> = s
            .node_groups
            .iter()
            .map(|g: &NodeGroup| g.merged_updater(&s.updater))
            .collect();
        assert_eq!(merged[0].priority_class_name, "");
        assert_eq!(
            merged[0].pod_labels,
            [("team".to_owned(), "gpu".to_owned())].into(),
            "replaced, not extended"
        );
        assert_eq!(merged[0].pod_annotations, s.updater.pod_annotations);
        assert_eq!(merged[0].max_unavailable, IntOrString::Int(1));
        assert_eq!(merged[1].max_unavailable, s.updater.max_unavailable);
        assert_eq!(merged[1].priority_class_name, "agents");
        assert_eq!(merged[1].pod_labels, s.updater.pod_labels);
    }

    #[test]
    fn every_pod_rule_names_its_field() {
        let crd = serde_json::to_value(TopologyAwareScheduling::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        let sched = &spec["scheduler"]["properties"];
        let upd = &spec["updater"]["properties"];
        let group = &spec["nodeGroups"]["items"]["properties"]["updater"]["properties"];
        let cases: Vec<(&Value, &str, usize)> = vec![
            (
                &spec["imagePullSecrets"]["items"]["properties"]["name"],
                "spec.imagePullSecrets[].name",
                1,
            ),
            (&sched["nodeSelector"], "spec.scheduler.nodeSelector", 3),
            (
                &sched["priorityClassName"],
                "spec.scheduler.priorityClassName",
                1,
            ),
            (&sched["podLabels"], "spec.scheduler.podLabels", 3),
            (&sched["podAnnotations"], "spec.scheduler.podAnnotations", 2),
            (
                &upd["priorityClassName"],
                "spec.updater.priorityClassName",
                1,
            ),
            (&upd["podLabels"], "spec.updater.podLabels", 3),
            (&upd["podAnnotations"], "spec.updater.podAnnotations", 2),
            (&upd["maxUnavailable"], "spec.updater.maxUnavailable", 1),
            (
                &group["maxUnavailable"],
                "spec.nodeGroups[].updater.maxUnavailable",
                1,
            ),
            (
                &group["priorityClassName"],
                "spec.nodeGroups[].updater.priorityClassName",
                1,
            ),
            (
                &group["podLabels"],
                "spec.nodeGroups[].updater.podLabels",
                3,
            ),
            (
                &group["podAnnotations"],
                "spec.nodeGroups[].updater.podAnnotations",
                2,
            ),
        ];
        for (at, field, n) in cases {
            let messages: Vec<&str> = at["x-kubernetes-validations"]
                .as_array()
                .map(|a| a.iter().filter_map(|r| r["message"].as_str()).collect())
                .unwrap_or_default();
            assert_eq!(messages.len(), n, "{field}: {messages:?}");
            assert!(
                messages.iter().all(|m| m.starts_with(field)),
                "{messages:?}"
            );
        }
        assert_eq!(sched["podLabels"]["maxProperties"], 32);
        assert_eq!(sched["podLabels"]["additionalProperties"]["maxLength"], 63);
    }

    /// The values are a container's `imagePullPolicy` values, and the schema an enum.
    #[test]
    fn image_pull_policy_serialises_as_kubernetes_spells_it() {
        for p in [
            ImagePullPolicy::Always,
            ImagePullPolicy::IfNotPresent,
            ImagePullPolicy::Never,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        let crd = serde_json::to_value(TopologyAwareScheduling::crd()).unwrap();
        let field = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["imagePullPolicy"];
        assert_eq!(field["enum"], json!(["Always", "IfNotPresent", "Never"]));
    }

    #[test]
    fn reserved_label_rule_lists_every_reserved_key() {
        let r = reserved_label_keys("spec.x.podLabels");
        for key in RESERVED_POD_LABELS {
            assert!(r.rule.contains(&format!("'{key}'")), "{key}: {}", r.rule);
        }
        assert!(r.rule.contains("startsWith('tas.dev/')"));
    }
}
