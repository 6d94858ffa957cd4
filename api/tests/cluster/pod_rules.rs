//! The operands' pod settings on the real API server: the CEL rules refuse what would
//! break the operator's pods or selectors, a fully customised object is accepted, and
//! `kubectl explain` shows the fields' descriptions.

use serde_json::json;
use std::time::Duration;
use tas_testcluster::wait_for;
use tokio::process::Command;

use super::cel_rules::{api, assert_each_refused, dry_run_create, object};
use super::shared;

#[tokio::test]
async fn pod_settings_rules_refuse_naming_the_field() {
    let api = api().await;
    // (case, spec, text the refusal must contain)
    let cases = vec![
        (
            "scheduler label: operator's selector",
            json!({"scheduler": {"podLabels": {"app.kubernetes.io/name": "other"}}}),
            "spec.scheduler.podLabels must not set the labels the operator selects",
        ),
        (
            "scheduler label: tas.dev domain",
            json!({"scheduler": {"podLabels": {"tas.dev/stack": "other"}}}),
            "spec.scheduler.podLabels must not set the labels the operator selects",
        ),
        (
            "scheduler label: controller's hash",
            json!({"scheduler": {"podLabels": {"pod-template-hash": "x"}}}),
            "spec.scheduler.podLabels must not set the labels the operator selects",
        ),
        (
            "scheduler label key syntax",
            json!({"scheduler": {"podLabels": {"bad key": "x"}}}),
            "spec.scheduler.podLabels keys must be qualified names",
        ),
        (
            "scheduler label value syntax",
            json!({"scheduler": {"podLabels": {"team": "-x"}}}),
            "spec.scheduler.podLabels values must be label values",
        ),
        (
            "scheduler label value length",
            json!({"scheduler": {"podLabels": {"team": "a".repeat(64)}}}),
            "spec.scheduler.podLabels",
        ),
        (
            "updater label: group selector",
            json!({"updater": {"podLabels": {"tas.dev/node-group": "other"}}}),
            "spec.updater.podLabels must not set the labels the operator selects",
        ),
        (
            "updater label: component",
            json!({"updater": {"podLabels": {"app.kubernetes.io/component": "x"}}}),
            "spec.updater.podLabels must not set the labels the operator selects",
        ),
        (
            "group label: operator's selector",
            json!({"nodeGroups": [{"name": "a", "updater": {"podLabels": {"app.kubernetes.io/name": "x"}}}]}),
            "spec.nodeGroups[].updater.podLabels must not set the labels the operator selects",
        ),
        (
            "scheduler annotation: config hash",
            json!({"scheduler": {"podAnnotations": {"tas.dev/config-hash": "0"}}}),
            "spec.scheduler.podAnnotations must not set tas.dev/* annotations",
        ),
        (
            "updater annotation key syntax",
            json!({"updater": {"podAnnotations": {"a/b/c": "x"}}}),
            "spec.updater.podAnnotations keys must be qualified names",
        ),
        (
            "group annotation: tas.dev domain",
            json!({"nodeGroups": [{"name": "a", "updater": {"podAnnotations": {"tas.dev/x": "y"}}}]}),
            "spec.nodeGroups[].updater.podAnnotations must not set tas.dev/* annotations",
        ),
        (
            "updater annotation: AppArmor unconfined",
            json!({"updater": {"podAnnotations": {"container.apparmor.security.beta.kubernetes.io/tas-updater": "unconfined"}}}),
            "spec.updater.podAnnotations must not set tas.dev/* annotations (the operator owns them) nor *security.alpha.kubernetes.io/*",
        ),
        (
            "group annotation: seccomp",
            json!({"nodeGroups": [{"name": "a", "updater": {"podAnnotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}}]}),
            "spec.nodeGroups[].updater.podAnnotations must not set tas.dev/* annotations (the operator owns them) nor *security.alpha.kubernetes.io/*",
        ),
        (
            "too many labels",
            json!({"scheduler": {"podLabels": (0..33).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}}),
            "spec.scheduler.podLabels",
        ),
        (
            "nodeSelector off Linux",
            json!({"scheduler": {"nodeSelector": {"kubernetes.io/os": "windows"}}}),
            "spec.scheduler.nodeSelector may not select kubernetes.io/os other than 'linux'",
        ),
        (
            "nodeSelector value syntax",
            json!({"scheduler": {"nodeSelector": {"pool": "a b"}}}),
            "spec.scheduler.nodeSelector values must be label values",
        ),
        (
            "scheduler priority class",
            json!({"scheduler": {"priorityClassName": "Critical"}}),
            "spec.scheduler.priorityClassName must be the name of a PriorityClass",
        ),
        (
            "updater priority class",
            json!({"updater": {"priorityClassName": "a_b"}}),
            "spec.updater.priorityClassName must be the name of a PriorityClass",
        ),
        (
            "group priority class",
            json!({"nodeGroups": [{"name": "a", "updater": {"priorityClassName": "-x"}}]}),
            "spec.nodeGroups[].updater.priorityClassName must be the name of a PriorityClass",
        ),
        (
            "pull policy enum",
            json!({"imagePullPolicy": "Sometimes"}),
            "spec.imagePullPolicy",
        ),
        (
            "pull secret without a name",
            json!({"imagePullSecrets": [{"name": ""}]}),
            "spec.imagePullSecrets[0].name",
        ),
        (
            "pull secret twice",
            json!({"imagePullSecrets": [{"name": "reg"}, {"name": "reg"}]}),
            "spec.imagePullSecrets[1]: Duplicate value",
        ),
        (
            "pull secret name syntax",
            json!({"imagePullSecrets": [{"name": "Reg_Creds"}]}),
            "spec.imagePullSecrets[].name must be a Secret name",
        ),
        (
            "maxUnavailable zero",
            json!({"updater": {"maxUnavailable": 0}}),
            "spec.updater.maxUnavailable must be a number of at least 1 or a percentage",
        ),
        (
            "maxUnavailable over 100%",
            json!({"updater": {"maxUnavailable": "150%"}}),
            "spec.updater.maxUnavailable must be a number of at least 1 or a percentage",
        ),
        (
            "maxUnavailable garbage",
            json!({"nodeGroups": [{"name": "a", "updater": {"maxUnavailable": "half"}}]}),
            "spec.nodeGroups[].updater.maxUnavailable must be a number of at least 1",
        ),
        (
            "too many spread constraints",
            json!({"scheduler": {"topologySpreadConstraints": (0..9).map(|_| json!({"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "ScheduleAnyway"})).collect::<Vec<_>>()}}),
            "spec.scheduler.topologySpreadConstraints",
        ),
    ];
    let cases: Vec<(&str, &str, serde_json::Value, &str)> = cases
        .into_iter()
        .map(|(case, spec, want)| (case, "default", spec, want))
        .collect();
    assert_each_refused(&api, &cases).await;
}

#[tokio::test]
async fn customised_pods_are_accepted_and_defaults_filled() {
    let api = api().await;
    let spec = json!({
        "imagePullSecrets": [{"name": "registry"}, {"name": "mirror"}],
        "imagePullPolicy": "IfNotPresent",
        "updater": {
            "priorityClassName": "",
            "maxUnavailable": null,
            "podLabels": {"team": "numa", "example.com/tier": ""},
            "podAnnotations": {"example.com/note": "any text at all: {\"json\": true}"},
        },
        "nodeGroups": [
            {"name": "gpu", "updater": {"priorityClassName": "gpu-agents", "podLabels": {}, "maxUnavailable": 2}},
            {"name": "cpu", "updater": {"maxUnavailable": "100%"}},
        ],
        "scheduler": {
            "nodeSelector": {"kubernetes.io/os": "linux", "node-role.kubernetes.io/infra": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/infra", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "tas-scheduler"}}},
            ]}},
            "priorityClassName": "tas.critical-1",
            "topologySpreadConstraints": [],
            "podLabels": {"app.kubernetes.io/instance": "numa", "team": "sched"},
            "podAnnotations": {"prometheus.io/scrape": "true"},
        },
    });
    let created = dry_run_create(&api, &object("default", spec))
        .await
        .expect("customised object accepted");
    let s = &created.data["spec"];
    assert_eq!(
        s["scheduler"]["topologySpreadConstraints"],
        json!([]),
        "[] is kept"
    );
    assert_eq!(s["updater"]["priorityClassName"], "");
    assert_eq!(s["updater"]["maxUnavailable"], "10%", "null is defaulted");
    assert_eq!(s["nodeGroups"][0]["updater"]["maxUnavailable"], 2);

    let defaulted = dry_run_create(&api, &object("default", json!({})))
        .await
        .unwrap();
    let s = &defaulted.data["spec"];
    assert_eq!(
        s["scheduler"]["priorityClassName"],
        "system-cluster-critical"
    );
    assert_eq!(s["updater"]["priorityClassName"], "system-node-critical");
    for absent in [
        &s["imagePullPolicy"],
        &s["imagePullSecrets"],
        &s["scheduler"]["topologySpreadConstraints"],
        &s["scheduler"]["podLabels"],
    ] {
        assert!(absent.is_null(), "unset stays unset: {absent}");
    }
}

/// `kubectl explain` against the API server prints the fields' doc comments (once the
/// server has published the CRD's OpenAPI schema, which happens asynchronously).
#[tokio::test]
async fn kubectl_explain_shows_the_pod_settings() {
    let cluster = shared();
    api().await;
    let kubectl = cluster.binaries_dir().join("kubectl");
    let kubeconfig = cluster.kubeconfig_path();
    let explain = |field: &str| {
        let mut kubectl = Command::new(&kubectl);
        kubectl
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["explain", &format!("topologyawareschedulings.{field}")]);
        async move {
            let out = kubectl.output().await.expect("kubectl runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    // (field, texts its explanation must contain)
    let cases: [(&str, &[&str]); 10] = [
        (
            "spec.imagePullSecrets",
            &[
                "<[]Object>",
                "Secrets the kubelet uses to pull the operand images",
            ],
        ),
        (
            "spec.imagePullPolicy",
            &["<string>", "Always", "IfNotPresent", "Never"],
        ),
        (
            "spec.scheduler.priorityClassName",
            &["<string>", "system-cluster-critical"],
        ),
        (
            "spec.scheduler.tolerations",
            &["<[]Object>", "Tolerations of the scheduler pods"],
        ),
        (
            "spec.scheduler.affinity",
            &["<Object>", "pod anti-affinity of the scheduler pods"],
        ),
        (
            "spec.scheduler.topologySpreadConstraints",
            &[
                "<[]Object>",
                "`[]`: none. Set: exactly these, replacing that default",
            ],
        ),
        (
            "spec.updater.priorityClassName",
            &["<string>", "system-node-critical"],
        ),
        (
            "spec.nodeGroups.updater.podLabels",
            &[
                "<map[string]string>",
                "Extra labels of this group's agent pods",
            ],
        ),
        (
            "spec.updater.refresh.heartbeatPeriod",
            &[
                "<string>",
                "`tas.dev/heartbeat`",
                "at most 6 writes an hour",
            ],
        ),
        (
            "spec.scheduler.cache.missedHeartbeats",
            &["<integer>", "never forces such a node clean"],
        ),
    ];
    for (field, wants) in cases {
        let text = wait_for(
            format!("kubectl explain {field}"),
            Duration::from_secs(60),
            || async {
                // kubectl wraps descriptions: compare with whitespace runs as one space.
                let text = explain(field)
                    .await
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                Ok::<_, std::convert::Infallible>(
                    wants.iter().all(|w| text.contains(w)).then_some(text),
                )
            },
        )
        .await
        .map_err(|e| e.to_string());
        let text = match text {
            Ok(text) => text,
            Err(e) => panic!("{e}; last output:\n{}", explain(field).await),
        };
        assert!(text.contains("DESCRIPTION"), "{text}");
    }
}

/// The full sample, which documents every field, is an object the API server accepts
/// and the operator's types read.
#[tokio::test]
async fn the_full_sample_is_accepted() {
    let api = api().await;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../config/samples/tas_v1alpha1_topologyawarescheduling_full.yaml"
    );
    let text = std::fs::read_to_string(path).expect("the full sample is readable");
    let sample: serde_json::Value = serde_norway::from_str(&text).expect("the sample is YAML");
    let typed: tas_api::tas::TopologyAwareScheduling =
        serde_json::from_value(sample.clone()).expect("the operator's types read the sample");
    assert_eq!(typed.spec.scheduler.tolerations.len(), 1);
    let created = dry_run_create(&api, &object("default", sample["spec"].clone()))
        .await
        .unwrap_or_else(|e| panic!("the full sample is refused: {e}"));
    assert_eq!(
        created.data["spec"]["scheduler"]["tolerations"][0]["key"],
        "node-role.kubernetes.io/infra"
    );
}
