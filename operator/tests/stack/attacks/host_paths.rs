//! The host-path allow-list of the policy tas-operator-workloads is the CRD's
//! (`KubeletPaths`' CEL rules, generated from api/src/tas/updater.rs), judged by the real
//! API server: every kubelet layout the CRD accepts renders a node agent the policy
//! admits for the operator's token, and every hostile path the CRD refuses is refused by
//! the policy too, should it reach a DaemonSet some other way.

use super::{HOST_PATHS, apply_as, expect_refused, render, set_host_path, stack_cr, try_create};
use crate::harness::*;
use crate::least_privilege::AGENTS_NS;
use kube::Client;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// Kubelet layouts of the distributions the user guide lists (podResourcesDir,
/// configFile, configDir).
const LAYOUTS: [(&str, &str, Option<&str>); 9] = [
    (
        "/var/lib/kubelet/pod-resources",
        "/var/lib/kubelet/config.yaml",
        None,
    ),
    (
        "/var/lib/k0s/kubelet/pod-resources",
        "/var/lib/k0s/kubelet-config.yaml",
        None,
    ),
    (
        "/var/snap/microk8s/common/var/lib/kubelet/pod-resources/",
        "/var/lib/kubelet/kubelet.conf",
        None,
    ),
    (
        "/var/lib/kubelet/pod-resources",
        "/etc/kubernetes/kubelet/config.json",
        Some("/etc/kubernetes/kubelet/config.json.d"),
    ),
    (
        "/var/lib/kubelet/pod-resources",
        "/etc/kubernetes/kubelet/kubelet-config.json",
        Some("/etc/kubernetes/kubelet.d"),
    ),
    (
        "/var/lib/kubelet/pod-resources",
        "/home/kubernetes/kubelet-config.yaml",
        Some("/home/kubernetes/kubelet-config.d/"),
    ),
    (
        "/var/lib/kubelet/pod-resources",
        "/etc/kubernetes/kubelet.conf",
        Some("/etc/kubelet.d"),
    ),
    (
        "/var/lib/kubelet/pod-resources",
        "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/10-tas.conf",
        Some("/var/lib/rancher/rke2/agent/etc/kubelet.conf.d"),
    ),
    (
        "/var/lib/kubelet/pod-resources",
        "/etc/kubernetes/kubelet-config.yaml",
        Some("/var/lib/kubelet/kubelet-config.d"),
    ),
];

/// Host paths that must never reach a node agent.
const HOSTILE: [&str; 12] = [
    "/",
    "/etc",
    "/etc/kubernetes/pki",
    "/var/lib/kubelet",
    "/var/lib/kubelet/pods",
    "/var/lib/kubelet/pki",
    "/run/containerd",
    "/var/run/containerd/containerd.sock",
    "/var/lib/etcd",
    "/proc",
    "/sys",
    "/root",
];

pub async fn scenario(admin: &Client, op: &Client) {
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let mut wrong = Vec::new();
    for (pod_resources, config_file, config_dir) in LAYOUTS {
        let kubelet = json!({
            "podResourcesDir": pod_resources,
            "configFile": config_file,
            "configDir": config_dir,
        });
        // The CRD's rules accept the layout...
        let accepted = stacks(admin)
            .patch(
                STACK,
                &dry_run,
                &Patch::Merge(json!({"spec": {"updater": {"kubelet": kubelet}}})),
            )
            .await;
        if let Err(e) = accepted {
            wrong.push(format!("the CRD refuses {kubelet}: {e}"));
            continue;
        }
        // ...and the policy admits what the operator renders for it.
        let objects = render(&stack_cr(Some(kubelet.clone())));
        for ds in objects.iter().filter(|o| o.resource.kind == "DaemonSet") {
            if let Err(e) = apply_as(op, ds, true).await {
                wrong.push(format!(
                    "the policy refuses the node agent for {kubelet}: {e}"
                ));
            }
        }
    }
    let ds = render(&stack_cr(None))
        .into_iter()
        .find(|o| o.resource.kind == "DaemonSet")
        .unwrap()
        .value;
    for path in HOSTILE {
        let refused = stacks(admin)
            .patch(
                STACK,
                &dry_run,
                &Patch::Merge(json!({"spec": {"updater": {"kubelet": {"podResourcesDir": path}}}})),
            )
            .await;
        if !matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 422) {
            wrong.push(format!(
                "the CRD does not refuse podResourcesDir {path}: {refused:?}"
            ));
        }
        let mut hostile = ds.clone();
        set_host_path(&mut hostile, path);
        let result = try_create(op, ("apps", "v1", "DaemonSet"), Some(AGENTS_NS), hostile).await;
        expect_refused(
            &mut wrong,
            &format!("a node agent mounting {path}"),
            result,
            HOST_PATHS,
        );
    }
    assert!(
        wrong.is_empty(),
        "the policy's allow-list and the CRD's differ:\n{}",
        wrong.join("\n")
    );
}
