//! A node group cannot name a host path the shared settings could not: the per-group
//! kubelet paths are refused at apply by the same allow-list, naming the field.

use super::cel_rules::{
    REFUSED_CONFIG_DIRS, REFUSED_CONFIG_FILES, REFUSED_POD_RESOURCES_DIRS, api,
    assert_each_refused, dry_run_create, object,
};
use serde_json::{Value, json};
use tas_api::tas::HostPathRule;

fn group_kubelet(field: &str, path: &str) -> Value {
    json!({"nodeGroups": [
        {"name": "ok", "nodeSelector": {"matchLabels": {"a": "1"}}},
        {"name": "evil", "nodeSelector": {"matchLabels": {"b": "1"}},
         "updater": {"kubelet": {field: path}}},
    ]})
}

#[tokio::test]
async fn hostile_per_group_kubelet_paths_are_refused_naming_the_field() {
    let api = api().await;
    let mut cases: Vec<(String, Value, String)> = Vec::new();
    for (rule, paths) in [
        (
            HostPathRule::PodResourcesDir,
            &REFUSED_POD_RESOURCES_DIRS[..],
        ),
        (HostPathRule::ConfigFile, &REFUSED_CONFIG_FILES[..]),
        (
            HostPathRule::ConfigFile,
            &["/x.yaml", "/etc/x.yaml", "/var/lib/kubelet/config.yaml/"][..],
        ),
        (HostPathRule::ConfigDir, &REFUSED_CONFIG_DIRS[..]),
    ] {
        for path in paths {
            cases.push((
                format!("{} {path}", rule.field()),
                group_kubelet(rule.field(), path),
                format!(
                    "spec.nodeGroups[].updater.kubelet.{} {}",
                    rule.field(),
                    rule.requirement()
                ),
            ));
        }
    }
    let cases: Vec<(&str, &str, Value, &str)> = cases
        .iter()
        .map(|(case, spec, want)| (case.as_str(), "default", spec.clone(), want.as_str()))
        .collect();
    assert_each_refused(&api, &cases).await;
}

#[tokio::test]
async fn every_documented_layout_is_accepted_per_group_too() {
    let api = api().await;
    let mut refused = Vec::new();
    for (field, path) in [
        ("podResourcesDir", "/var/lib/k0s/kubelet/pod-resources"),
        (
            "podResourcesDir",
            "/var/snap/microk8s/common/var/lib/kubelet/pod-resources",
        ),
        ("configFile", "/etc/kubernetes/kubelet/config.json"),
        (
            "configFile",
            "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf",
        ),
        ("configDir", "/etc/kubernetes/kubelet/config.json.d"),
    ] {
        if let Err(msg) = dry_run_create(&api, &object("default", group_kubelet(field, path))).await
        {
            refused.push(format!("{field} {path}: {msg}"));
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}
