use super::*;
use kube::CustomResourceExt;
use serde_json::{Value, json};

fn crd_json() -> Value {
    serde_json::to_value(TopologyAwareScheduling::crd()).expect("CRD serialises")
}

/// The openAPIV3Schema of the only version.
fn schema() -> Value {
    crd_json()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn rules_at(v: &Value) -> Vec<String> {
    v["x-kubernetes-validations"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| r["message"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn minimal_object_gets_every_default() {
    let tas: TopologyAwareScheduling = serde_json::from_value(json!({
        "apiVersion": "tas.dev/v1alpha1",
        "kind": "TopologyAwareScheduling",
        "metadata": {"name": "default"},
        "spec": {}
    }))
    .expect("minimal object parses");
    let s = &tas.spec;
    assert_eq!(s.namespace, "tas-system");
    assert!(!s.paused);
    assert!(s.nrt_crd.manage && !s.nrt_crd.delete_on_uninstall);
    assert_eq!(s.updater.refresh.mode, RefreshMode::PeriodicAndEvents);
    assert_eq!(s.updater.refresh.period, "10s");
    assert_eq!(
        s.updater.pods_fingerprint,
        PodsFingerprint::WithExclusiveResources
    );
    assert_eq!(
        s.updater.kubelet.pod_resources_dir,
        "/var/lib/kubelet/pod-resources"
    );
    assert!(
        s.updater.tolerations.is_empty(),
        "no taint tolerated by default"
    );
    assert_eq!(s.scheduler.scheduler_name, "topology-aware-scheduler");
    assert_eq!(s.scheduler.replicas, 1);
    assert_eq!(
        s.scheduler.scoring.strategy,
        ScoringStrategy::FragmentationAware
    );
    assert_eq!(s.scheduler.scoring.resources.len(), 2);
    assert_eq!(s.scheduler.cache.resync_period, "5s");
    assert_eq!(
        s.scheduler.cache.foreign_pods,
        ForeignPodsDetection::OnlyExclusiveResources
    );
    let groups = tas.effective_node_groups();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].name, "all");
}

#[test]
fn schema_defaults_match_the_rust_defaults() {
    // The API server fills defaults from the schema; the operator from serde. They must agree.
    let s = schema();
    let spec = &s["properties"]["spec"]["properties"];
    assert_eq!(spec["namespace"]["default"], json!("tas-system"));
    let updater_default: UpdaterSpec =
        serde_json::from_value(spec["updater"]["default"].clone()).expect("updater default");
    assert_eq!(updater_default, UpdaterSpec::default());
    let scheduler_default: SchedulerSpec =
        serde_json::from_value(spec["scheduler"]["default"].clone()).expect("scheduler default");
    assert_eq!(scheduler_default, SchedulerSpec::default());
}

#[test]
fn crd_identity_and_printer_columns() {
    let crd = crd_json();
    assert_eq!(crd["metadata"]["name"], "topologyawareschedulings.tas.dev");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["tas"]));
    let v = &crd["spec"]["versions"][0];
    assert_eq!(v["name"], "v1alpha1");
    assert!(v["subresources"]["status"].is_object());
    let columns: Vec<&str> = v["additionalPrinterColumns"]
        .as_array()
        .expect("printer columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    for want in [
        "Available",
        "Degraded",
        "Scheduler",
        "Nodes",
        "Fresh-NRT",
        "Age",
    ] {
        assert!(
            columns.contains(&want),
            "missing column {want}: {columns:?}"
        );
    }
}

#[test]
fn every_cel_rule_names_its_field() {
    let s = schema();
    let spec = &s["properties"]["spec"]["properties"];
    let cases: Vec<(&Value, &str)> = vec![
        (&s, "metadata.name"),
        (&spec["namespace"], "spec.namespace"),
        (&spec["nrtCRD"], "spec.nrtCRD.deleteOnUninstall"),
        (&spec["nodeGroups"], "spec.nodeGroups[].name"),
        (
            &spec["nodeGroups"]["items"]["properties"]["name"],
            "spec.nodeGroups[].name",
        ),
        (
            &spec["updater"]["properties"]["refresh"]["properties"]["period"],
            "spec.updater.refresh.period",
        ),
        (
            &spec["updater"]["properties"]["excludePods"],
            "spec.updater.excludePods",
        ),
        (
            &spec["scheduler"]["properties"]["schedulerName"],
            "spec.scheduler.schedulerName",
        ),
        (
            &spec["scheduler"]["properties"]["cache"],
            "spec.scheduler.cache.maxStaleness",
        ),
        (
            &spec["observability"]["properties"]["otlpEndpoint"],
            "spec.observability.otlpEndpoint",
        ),
    ];
    for (at, field) in cases {
        let msgs = rules_at(at);
        assert!(!msgs.is_empty(), "no CEL rule for {field}");
        assert!(
            msgs.iter().any(|m| m.contains(field)),
            "rule messages {msgs:?} do not name {field}"
        );
    }
}

#[test]
fn conditions_are_a_list_map_keyed_by_type() {
    let s = schema();
    let conditions = &s["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
}

#[test]
fn node_group_overrides_merge_field_by_field() {
    let base = UpdaterSpec::default();
    let group: NodeGroup = serde_json::from_value(json!({
        "name": "fast",
        "nodeSelector": {"matchLabels": {"numa": "true"}},
        "updater": {"refresh": {"period": "5s"}, "podsFingerprint": "All"}
    }))
    .expect("group parses");
    let merged = group.merged_updater(&base);
    assert_eq!(merged.refresh.period, "5s");
    assert_eq!(merged.refresh.mode, base.refresh.mode, "mode inherited");
    assert_eq!(merged.refresh.debounce, base.refresh.debounce);
    assert_eq!(
        merged.refresh.heartbeat_period, "10m",
        "heartbeat inherited"
    );
    assert_eq!(merged.pods_fingerprint, PodsFingerprint::All);
    let slow: NodeGroup = serde_json::from_value(json!({
        "name": "slow",
        "updater": {"refresh": {"heartbeatPeriod": "30m"}}
    }))
    .expect("group parses");
    assert_eq!(slow.merged_updater(&base).refresh.heartbeat_period, "30m");
    assert_eq!(merged.tolerations, base.tolerations);
    assert_eq!(NodeGroup::all_nodes().merged_updater(&base), base);
}

/// A node group cannot name a host path the shared settings could not: both kubelet
/// blocks carry the allow-list's own rule, with the message naming each field.
#[test]
fn shared_and_per_group_kubelet_paths_carry_the_same_allow_list() {
    let spec = &schema()["properties"]["spec"]["properties"];
    let shared = &spec["updater"]["properties"]["kubelet"]["properties"];
    let group = &spec["nodeGroups"]["items"]["properties"]["updater"]["properties"]["kubelet"]["properties"];
    for rule in HostPathRule::ALL {
        let field = rule.field();
        for (props, path) in [
            (shared, "spec.updater.kubelet"),
            (group, "spec.nodeGroups[].updater.kubelet"),
        ] {
            let validations = &props[field]["x-kubernetes-validations"];
            assert_eq!(
                validations[0]["rule"],
                rule.cel_expression(),
                "{path}.{field}"
            );
            assert_eq!(
                validations[0]["message"],
                format!("{path}.{field} {}", rule.requirement())
            );
            assert_eq!(props[field]["maxLength"], 256, "{path}.{field}");
        }
    }
}
