//! A node group's kubelet paths, Topology Manager overrides, configz and NRT take-over,
//! as rendered into its DaemonSet and the agents' RBAC.

use super::*;
use k8s_openapi::api::rbac::v1::PolicyRule;

const GROUPS: &str = r#"
apiVersion: tas.dev/v1alpha1
kind: TopologyAwareScheduling
metadata: {name: default}
spec:
  nodeGroups:
  - name: kubeadm
    nodeSelector: {matchLabels: {pool: kubeadm}}
  - name: eks
    nodeSelector: {matchLabels: {pool: eks}}
    updater:
      kubelet:
        configFile: /etc/kubernetes/kubelet/config.json
        configDir: /etc/kubernetes/kubelet/config.json.d
  - name: flags
    nodeSelector: {matchLabels: {pool: flags}}
    updater:
      kubelet:
        configDir: /etc/kubelet.conf.d
        configz: true
      topologyManager:
        policy: single-numa-node
        options: {prefer-closest-numa-nodes: "true"}
      takeOverNRT: true
"#;

fn daemon_set<'a>(d: &'a Desired, group: &str) -> &'a k8s_openapi::api::apps::v1::DaemonSet {
    let name = updater_daemonset_name(group);
    d.daemon_sets
        .iter()
        .find(|ds| ds.metadata.name.as_deref() == Some(name.as_str()))
        .unwrap()
}

/// `(volume, host path, mount path)` of the kubelet-config volumes, and the args.
fn kubelet_view(
    ds: &k8s_openapi::api::apps::v1::DaemonSet,
) -> (Vec<(String, String, String)>, Vec<String>) {
    let pod = ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let container = &pod.containers[0];
    let mounts = container.volume_mounts.as_ref().unwrap();
    let volumes = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .filter(|v| v.name.starts_with("kubelet-config"))
        .map(|v| {
            let host = v.host_path.as_ref().unwrap();
            // A file mounted alone (its directory holds pod volumes or keys), else a
            // directory.
            let kind = if host.path.ends_with(".yaml") {
                "File"
            } else {
                "Directory"
            };
            assert_eq!(host.type_.as_deref(), Some(kind), "{}", v.name);
            let mount = mounts.iter().find(|m| m.name == v.name).unwrap();
            assert_eq!(mount.read_only, Some(true));
            (v.name.clone(), host.path.clone(), mount.mount_path.clone())
        })
        .collect();
    (volumes, container.args.clone().unwrap())
}

#[test]
fn each_group_mounts_its_kubelet_directories_and_passes_its_overrides() {
    let d = desired(&cr(GROUPS), &ctx()).unwrap();

    let (volumes, args) = kubelet_view(daemon_set(&d, "kubeadm"));
    assert_eq!(
        volumes,
        [(
            "kubelet-config".into(),
            "/var/lib/kubelet/config.yaml".into(),
            "/host-kubelet/config.yaml".into()
        )]
    );
    assert!(args.contains(&"--kubelet-config=/host-kubelet/config.yaml".to_owned()));
    assert!(!args.iter().any(|a| a.starts_with("--kubelet-config-dir")));

    // The drop-in directory inside the file's directory: one mount serves both.
    let (volumes, args) = kubelet_view(daemon_set(&d, "eks"));
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0].1, "/etc/kubernetes/kubelet");
    assert!(args.contains(&"--kubelet-config=/host-kubelet/config.json".to_owned()));
    assert!(args.contains(&"--kubelet-config-dir=/host-kubelet/config.json.d".to_owned()));
    assert!(args.contains(&"--host-path=/host-kubelet=/etc/kubernetes/kubelet".to_owned()));

    let (volumes, args) = kubelet_view(daemon_set(&d, "flags"));
    assert_eq!(volumes.len(), 2);
    assert_eq!(
        volumes[1],
        (
            "kubelet-config-dir".into(),
            "/etc/kubelet.conf.d".into(),
            "/host-kubelet-config-dir".into()
        )
    );
    for flag in [
        "--kubelet-config-dir=/host-kubelet-config-dir",
        "--kubelet-configz",
        "--topology-manager-policy=single-numa-node",
        "--topology-manager-policy-options=prefer-closest-numa-nodes=true",
        "--take-over-nrt",
    ] {
        assert!(args.contains(&flag.to_owned()), "{flag}: {args:?}");
    }
}

fn updater_rules(d: &Desired) -> Vec<PolicyRule> {
    d.cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(UPDATER_CLUSTER_ROLE))
        .and_then(|r| r.rules.clone())
        .unwrap()
}

fn grants_node_proxy(rules: &[PolicyRule]) -> bool {
    rules.iter().any(|r| {
        r.resources
            .as_ref()
            .is_some_and(|res| res.iter().any(|x| x == "nodes/proxy"))
    })
}

#[test]
fn nodes_proxy_only_when_a_group_reads_configz() {
    let with = desired(&cr(GROUPS), &ctx()).unwrap();
    assert!(grants_node_proxy(&updater_rules(&with)));
    let without = desired(&cr(MINIMAL), &ctx()).unwrap();
    assert!(!grants_node_proxy(&updater_rules(&without)));
}
