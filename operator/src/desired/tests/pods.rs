//! The CR's pod settings in the operands' pod templates: unset they render the pods the
//! operator always rendered; set they land where Kubernetes reads them; they never
//! override the operator's selector labels or config hash; changing them changes the
//! pod template (so the controllers roll the pods).

use super::{MINIMAL, cr, ctx, desired};
use crate::desired::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;
use std::collections::BTreeMap;
use tas_api::tas::{RESERVED_KEY_PREFIX, RESERVED_POD_LABELS, TopologyAwareScheduling};

fn with_spec(patch: serde_json::Value) -> TopologyAwareScheduling {
    let mut value = serde_json::to_value(cr(MINIMAL)).unwrap();
    value["spec"] = patch;
    serde_json::from_value(value).expect("a valid spec")
}

fn scheduler_template(d: &Desired) -> &PodTemplateSpec {
    &d.deployment.spec.as_ref().unwrap().template
}

fn agent_template<'a>(d: &'a Desired, group: &str) -> &'a PodTemplateSpec {
    let name = updater_daemonset_name(group);
    let ds: &DaemonSet = d
        .daemon_sets
        .iter()
        .find(|ds| ds.metadata.name.as_deref() == Some(name.as_str()))
        .unwrap_or_else(|| panic!("no DaemonSet {name}"));
    &ds.spec.as_ref().unwrap().template
}

fn pod(t: &PodTemplateSpec) -> &PodSpec {
    t.spec.as_ref().unwrap()
}

fn labels(t: &PodTemplateSpec) -> &BTreeMap<String, String> {
    t.metadata.as_ref().unwrap().labels.as_ref().unwrap()
}

fn annotations(t: &PodTemplateSpec) -> &BTreeMap<String, String> {
    t.metadata.as_ref().unwrap().annotations.as_ref().unwrap()
}

fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn unset_pod_settings_render_the_pods_as_before() {
    let d = desired(&cr(MINIMAL), &ctx()).unwrap();
    for (what, t, priority) in [
        (
            "scheduler",
            scheduler_template(&d),
            "system-cluster-critical",
        ),
        ("agent", agent_template(&d, "all"), "system-node-critical"),
    ] {
        let p = pod(t);
        assert_eq!(p.priority_class_name.as_deref(), Some(priority), "{what}");
        assert_eq!(p.image_pull_secrets, None, "{what}");
        assert_eq!(p.containers[0].image_pull_policy, None, "{what}");
        assert_eq!(
            p.node_selector.as_ref().unwrap(),
            &map(&[("kubernetes.io/os", "linux")]),
            "{what}"
        );
        assert_eq!(
            annotations(t).keys().collect::<Vec<_>>(),
            [CONFIG_HASH_ANNOTATION],
            "{what}"
        );
        // Only the operator's labels.
        assert!(
            labels(t)
                .keys()
                .all(|k| k.starts_with("app.kubernetes.io/") || k.starts_with(RESERVED_KEY_PREFIX)),
            "{what}: {:?}",
            labels(t)
        );
    }
    let p = pod(scheduler_template(&d));
    assert_eq!((&p.tolerations, &p.affinity), (&None, &None));
    let spread = p.topology_spread_constraints.as_ref().unwrap();
    assert_eq!(spread.len(), 1);
    assert_eq!(
        (
            spread[0].topology_key.as_str(),
            spread[0].when_unsatisfiable.as_str()
        ),
        ("kubernetes.io/hostname", "ScheduleAnyway")
    );
}

#[test]
fn scheduler_pod_settings_land_in_the_deployments_pods() {
    let d = desired(
        &with_spec(json!({
            "imagePullSecrets": [{"name": "registry"}, {"name": "mirror"}],
            "imagePullPolicy": "Always",
            "scheduler": {
                "nodeSelector": {"node-role.kubernetes.io/infra": ""},
                "tolerations": [{"key": "node-role.kubernetes.io/infra", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}},
                ]}},
                "priorityClassName": "tas-critical",
                "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}],
                "podLabels": {"team": "numa"},
                "podAnnotations": {"example.com/owner": "platform"},
            },
        })),
        &ctx(),
    )
    .unwrap();
    let t = scheduler_template(&d);
    let p = pod(t);
    let secrets: Vec<_> = p
        .image_pull_secrets
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(secrets, ["registry", "mirror"]);
    assert_eq!(p.containers[0].image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        p.node_selector.as_ref().unwrap(),
        &map(&[
            ("kubernetes.io/os", "linux"),
            ("node-role.kubernetes.io/infra", "")
        ]),
        "added to the Linux selector"
    );
    let tolerations = p.tolerations.as_ref().unwrap();
    assert_eq!(
        tolerations[0].key.as_deref(),
        Some("node-role.kubernetes.io/infra")
    );
    let preferred = p
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .unwrap();
    assert_eq!(preferred[0].weight, 10);
    assert_eq!(p.priority_class_name.as_deref(), Some("tas-critical"));
    let spread = p.topology_spread_constraints.as_ref().unwrap();
    assert_eq!(spread.len(), 1, "replaces the operator's constraint");
    assert_eq!(
        (spread[0].max_skew, spread[0].topology_key.as_str()),
        (2, "topology.kubernetes.io/zone")
    );
    assert_eq!(labels(t)["team"], "numa");
    assert_eq!(annotations(t)["example.com/owner"], "platform");
    assert!(annotations(t).contains_key(CONFIG_HASH_ANNOTATION));
    // Labels and annotations go on the pods, not on the Deployment.
    let meta = &d.deployment.metadata;
    assert!(!meta.labels.as_ref().unwrap().contains_key("team"));
    assert_eq!(meta.annotations, None);
    // The node agents get the image settings too, nothing of the scheduler's placement.
    let agent = pod(agent_template(&d, "all"));
    assert_eq!(agent.image_pull_secrets, p.image_pull_secrets);
    assert_eq!(
        agent.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );
    assert_eq!(
        agent.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    assert!(!labels(agent_template(&d, "all")).contains_key("team"));
}

#[test]
fn empty_priority_class_and_spread_mean_none() {
    let d = desired(
        &with_spec(json!({
            "updater": {"priorityClassName": ""},
            "scheduler": {"priorityClassName": "", "topologySpreadConstraints": []},
        })),
        &ctx(),
    )
    .unwrap();
    let p = pod(scheduler_template(&d));
    assert_eq!(p.priority_class_name, None);
    assert_eq!(p.topology_spread_constraints, None);
    assert_eq!(pod(agent_template(&d, "all")).priority_class_name, None);
}

#[test]
fn agent_pod_settings_follow_the_group_overrides() {
    let d = desired(
        &with_spec(json!({
            "updater": {
                "priorityClassName": "numa-agents",
                "podLabels": {"team": "numa"},
                "podAnnotations": {"example.com/owner": "platform"},
            },
            "nodeGroups": [
                {"name": "gpu", "nodeSelector": {"matchLabels": {"gpu": "true"}},
                 "updater": {"priorityClassName": "gpu-agents", "podLabels": {"team": "gpu", "accel": "nvidia"}, "maxUnavailable": 1}},
                {"name": "cpu", "nodeSelector": {"matchLabels": {"gpu": "false"}}},
            ],
        })),
        &ctx(),
    )
    .unwrap();
    let gpu = agent_template(&d, "gpu");
    assert_eq!(pod(gpu).priority_class_name.as_deref(), Some("gpu-agents"));
    assert_eq!(
        (labels(gpu)["team"].as_str(), labels(gpu)["accel"].as_str()),
        ("gpu", "nvidia")
    );
    assert_eq!(
        annotations(gpu)["example.com/owner"],
        "platform",
        "inherited"
    );
    let cpu = agent_template(&d, "cpu");
    assert_eq!(pod(cpu).priority_class_name.as_deref(), Some("numa-agents"));
    assert_eq!(labels(cpu)["team"], "numa");
    assert!(!labels(cpu).contains_key("accel"));

    let max_unavailable = |group: &str| {
        let name = updater_daemonset_name(group);
        let ds = d
            .daemon_sets
            .iter()
            .find(|ds| ds.metadata.name.as_deref() == Some(name.as_str()))
            .unwrap();
        let strategy = ds.spec.as_ref().unwrap().update_strategy.clone().unwrap();
        strategy.rolling_update.unwrap().max_unavailable.unwrap()
    };
    assert_eq!(max_unavailable("gpu"), IntOrString::Int(1));
    assert_eq!(
        max_unavailable("cpu"),
        IntOrString::String("10%".into()),
        "the default"
    );
}

/// The CRD refuses these keys; an object that never went through the API server (as
/// with `render`) still cannot move the operator's selectors or config hash.
#[test]
fn extra_labels_and_annotations_never_override_the_operators() {
    let evil = json!({
        "app.kubernetes.io/name": "other",
        "app.kubernetes.io/managed-by": "someone",
        "app.kubernetes.io/component": "other",
        "tas.dev/stack": "other",
        "tas.dev/node-group": "other",
        "team": "numa",
    });
    let hash = json!({"tas.dev/config-hash": "0000000000000000", "example.com/x": "y"});
    let plain = desired(&cr(MINIMAL), &ctx()).unwrap();
    let d = desired(
        &with_spec(json!({
            "updater": {"podLabels": evil, "podAnnotations": hash},
            "scheduler": {"podLabels": evil, "podAnnotations": hash},
        })),
        &ctx(),
    )
    .unwrap();
    let deployment_selector = d
        .deployment
        .spec
        .as_ref()
        .unwrap()
        .selector
        .match_labels
        .clone()
        .unwrap();
    let ds = &d.daemon_sets[0];
    let ds_selector = ds
        .spec
        .as_ref()
        .unwrap()
        .selector
        .match_labels
        .clone()
        .unwrap();
    for (t, before, selector) in [
        (
            scheduler_template(&d),
            scheduler_template(&plain),
            deployment_selector,
        ),
        (
            agent_template(&d, "all"),
            agent_template(&plain, "all"),
            ds_selector,
        ),
    ] {
        for (k, v) in labels(before) {
            assert_eq!(labels(t).get(k), Some(v), "{k} kept");
        }
        assert_eq!(labels(t)["team"], "numa");
        assert!(selector.iter().all(|(k, v)| labels(t).get(k) == Some(v)));
        assert_eq!(
            annotations(t)[CONFIG_HASH_ANNOTATION],
            annotations(before)[CONFIG_HASH_ANNOTATION]
        );
        assert_eq!(annotations(t)["example.com/x"], "y");
    }
}

/// Every label the operator puts on a pod is one the CRD reserves, so the CEL rule and
/// the builders cannot drift apart.
#[test]
fn the_crd_reserves_every_label_the_operator_sets_on_pods() {
    let d = desired(&cr(MINIMAL), &ctx()).unwrap();
    for t in [scheduler_template(&d), agent_template(&d, "all")] {
        for k in labels(t).keys().chain(annotations(t).keys()) {
            assert!(
                RESERVED_POD_LABELS.contains(&k.as_str()) || k.starts_with(RESERVED_KEY_PREFIX),
                "{k} is not reserved by the CRD"
            );
        }
    }
}

/// A change of any pod setting changes the pod template, which is what makes the
/// Deployment and DaemonSet controllers roll the pods; the config hash stays, as the
/// processes' settings did not change.
#[test]
fn changing_a_pod_setting_changes_the_pod_template() {
    let base = desired(&cr(MINIMAL), &ctx()).unwrap();
    let changes = [
        json!({"imagePullPolicy": "IfNotPresent"}),
        json!({"imagePullSecrets": [{"name": "registry"}]}),
        json!({"scheduler": {"podLabels": {"a": "b"}}, "updater": {"podLabels": {"a": "b"}}}),
        json!({"scheduler": {"podAnnotations": {"a": "b"}}, "updater": {"podAnnotations": {"a": "b"}}}),
        json!({"scheduler": {"priorityClassName": "x"}, "updater": {"priorityClassName": "x"}}),
    ];
    for change in changes {
        let d = desired(&with_spec(change.clone()), &ctx()).unwrap();
        for (t, before) in [
            (scheduler_template(&d), scheduler_template(&base)),
            (agent_template(&d, "all"), agent_template(&base, "all")),
        ] {
            assert_ne!(t, before, "{change}");
            assert_eq!(
                annotations(t)[CONFIG_HASH_ANNOTATION],
                annotations(before)[CONFIG_HASH_ANNOTATION],
                "{change}"
            );
        }
    }
    let d = desired(
        &with_spec(json!({"scheduler": {"tolerations": [{"operator": "Exists"}]}})),
        &ctx(),
    )
    .unwrap();
    assert_ne!(scheduler_template(&d), scheduler_template(&base));
    assert_eq!(agent_template(&d, "all"), agent_template(&base, "all"));
}
