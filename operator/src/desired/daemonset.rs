//! The node agent DaemonSet of a node group (`tas-updater-<group>`).
//!
//! One DaemonSet per group, placed by node affinity translated from the group's label
//! selector, running `tas-updater` with the group's merged settings as flags
//! ([`UpdaterArgs`]). The agent reads three host paths, all mounted read-only:
//! `/sys/devices/system/node` (NUMA topology: the only part of sysfs it reads, see
//! `updater/src/sysfs`), the directory of the kubelet's config file (and its drop-in
//! directory when it lies elsewhere: see [`KubeletMounts`]) and the kubelet's
//! pod-resources directory (the gRPC socket). Which host paths the kubelet settings may
//! name is bounded by one allow-list (`tas_api::tas::host_paths`): the CRD's rules at
//! apply, and the validate step again before anything is built (`crate::validate::policy`).

use super::BuildError;
use super::hash::config_hash;
use super::meta::{Component, Stack};
use super::names::{
    CONFIG_HASH_ANNOTATION, NAME_LABEL, NODE_GROUP_LABEL, UPDATER_CONTAINER,
    UPDATER_METRICS_SERVICE, UPDATER_SERVICE_ACCOUNT, updater_daemonset_name,
};
use super::node_affinity::node_affinity;
use super::pod::{
    field_env, http_port, image_pull_policy, image_pull_secrets, linux_node_selector,
    liveness_probe, locked_down_container, otlp_env, priority_class, readiness_probe,
    runtime_default_seccomp, with_extra,
};
use super::serving_cert;
use crate::validate::ValidGroup;
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, PodSecurityContext, PodSpec, PodTemplateSpec, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use std::collections::BTreeMap;
use tas_api::config::kubelet_mounts::KubeletMounts;
use tas_api::config::updater::{HTTP_PORT, POD_RESOURCES_MOUNT, SYSFS_MOUNT, UpdaterArgs};
use tas_api::tas::TopologyAwareSchedulingSpec;

/// The part of the host's sysfs the agent reads: the NUMA nodes.
pub(crate) const SYSFS_NODE_HOST_PATH: &str = "/sys/devices/system/node";
/// [`SYSFS_NODE_HOST_PATH`] relative to the sysfs root (`--sysfs-root`).
const SYSFS_NODE_DIR: &str = "devices/system/node";

/// `app.kubernetes.io/name` of the node agent pods.
pub(crate) const UPDATER_APP_NAME: &str = "tas-updater";

/// Labels selecting every node agent pod of every group (the metrics Service's selector).
pub(crate) fn updater_pod_selector() -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), UPDATER_APP_NAME.to_owned())])
}

/// Labels selecting the pods of one group: the DaemonSet's selector, which is immutable,
/// so it holds only labels that never change for a given DaemonSet name.
fn group_pod_selector(group: &str) -> BTreeMap<String, String> {
    let mut labels = updater_pod_selector();
    labels.insert(NODE_GROUP_LABEL.to_owned(), group.to_owned());
    labels
}

/// The DaemonSet of a validated node group.
pub(crate) fn updater_daemon_set(
    stack: &Stack,
    spec: &TopologyAwareSchedulingSpec,
    valid: &ValidGroup,
) -> Result<DaemonSet, BuildError> {
    let ValidGroup {
        group,
        updater: settings,
        image,
        selector,
    } = valid;
    let image = image.clone();
    let affinity = node_affinity(selector);
    let mut args =
        UpdaterArgs::for_daemonset(settings, spec.observability.log_level.as_str()).to_args();
    let serving_cert = serving_cert::mount(
        spec.observability.serving_certificate,
        UPDATER_METRICS_SERVICE,
    );
    if let Some(cert) = &serving_cert {
        args.extend(cert.args.iter().cloned());
    }
    let mut env = vec![field_env("NODE_NAME", "spec.nodeName")];
    env.extend(otlp_env(&spec.observability));

    // Everything that reaches the container: a change of any of it rolls the pods. The
    // template changes anyway, the annotation makes the cause visible and comparable.
    let hash = config_hash(&(
        &image,
        &args,
        &env,
        &settings.resources,
        &settings.tolerations,
    ))
    .map_err(|source| BuildError::Serialize {
        kind: "DaemonSet".to_owned(),
        name: updater_daemonset_name(&group.name),
        source,
    })?;

    let (mut volumes, mut volume_mounts) = host_volumes(
        &settings.kubelet.pod_resources_dir,
        &KubeletMounts::for_paths(&settings.kubelet),
    );
    if let Some(cert) = serving_cert {
        volumes.push(cert.volume);
        volume_mounts.push(cert.mount);
    }
    let container = Container {
        name: UPDATER_CONTAINER.to_owned(),
        image: Some(image),
        args: Some(args),
        env: Some(env),
        ports: Some(vec![http_port(HTTP_PORT)]),
        liveness_probe: Some(liveness_probe()),
        readiness_probe: Some(readiness_probe()),
        resources: Some(settings.resources.clone()),
        security_context: Some(updater_security_context()),
        volume_mounts: Some(volume_mounts),
        image_pull_policy: image_pull_policy(spec.image_pull_policy),
        ..Container::default()
    };

    let mut meta = stack.namespaced_meta(&updater_daemonset_name(&group.name), Component::Updater);
    let mut pod_labels = stack.labels(Component::Updater);
    pod_labels.extend(group_pod_selector(&group.name));
    meta.labels = Some(pod_labels.clone());

    Ok(DaemonSet {
        metadata: meta,
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(group_pod_selector(&group.name)),
                ..LabelSelector::default()
            },
            // Replace agents a few nodes at a time: while a node's agent restarts its NRT
            // object only ages, the scheduler keeps using it.
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(settings.max_unavailable.clone()),
                    ..RollingUpdateDaemonSet::default()
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(with_extra(pod_labels, &settings.pod_labels)),
                    annotations: Some(with_extra(
                        BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_owned(), hash)]),
                        &settings.pod_annotations,
                    )),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(UPDATER_SERVICE_ACCOUNT.to_owned()),
                    // The agent talks to the API server with its ServiceAccount token.
                    automount_service_account_token: Some(true),
                    // A node without its agent publishes no topology and the scheduler
                    // cannot place NUMA-sensitive pods there: keep it from being evicted
                    // (by default; `priorityClassName` in the CR).
                    priority_class_name: priority_class(&settings.priority_class_name),
                    tolerations: Some(settings.tolerations.clone()),
                    affinity,
                    node_selector: Some(linux_node_selector()),
                    security_context: Some(PodSecurityContext {
                        seccomp_profile: Some(runtime_default_seccomp()),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    volumes: Some(volumes),
                    image_pull_secrets: image_pull_secrets(&spec.image_pull_secrets),
                    ..PodSpec::default()
                }),
            },
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    })
}

/// The host paths and where they are mounted, all read-only.
///
/// The pod-resources *directory* is mounted, not the socket file: the kubelet recreates
/// the socket when it restarts, and a bind mount of the file would keep pointing at the
/// old, dead inode until the pod restarts. Read-only is enough to use the socket:
/// `connect()` on a unix socket checks write permission on the socket inode, not whether
/// the mount is writable (Linux refuses writes on read-only mounts only for regular
/// files, directories and symlinks), so the agent can talk to the kubelet while being
/// unable to create, replace or delete anything in the directory.
fn host_volumes(
    pod_resources_dir: &str,
    kubelet: &KubeletMounts,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    // The NUMA nodes only, at the same place under the agent's sysfs root: not the rest
    // of /sys (cgroups, firmware, debugfs, device attributes).
    let sysfs_nodes = format!("{SYSFS_MOUNT}/{SYSFS_NODE_DIR}");
    // The kubelet config's directory, not the file: a config replaced by rename stays
    // visible (a bind mount of the file would keep the old inode).
    let entries: Vec<(&str, &str, &str, &str)> = std::iter::once((
        "sysfs-numa-nodes",
        SYSFS_NODE_HOST_PATH,
        "Directory",
        sysfs_nodes.as_str(),
    ))
    .chain(
        kubelet
            .mounts
            .iter()
            .map(|m| (m.name, m.host.as_str(), m.kind, m.container.as_str())),
    )
    .chain(std::iter::once((
        "pod-resources",
        pod_resources_dir,
        "Directory",
        POD_RESOURCES_MOUNT,
    )))
    .collect();
    let volumes = entries
        .iter()
        .map(|(name, host_path, type_, _)| Volume {
            name: (*name).to_owned(),
            host_path: Some(HostPathVolumeSource {
                path: (*host_path).to_owned(),
                // A typed hostPath fails the pod at start instead of letting the kubelet
                // create an empty directory where the file or directory is missing.
                type_: Some((*type_).to_owned()),
            }),
            ..Volume::default()
        })
        .collect();
    let mounts = entries
        .iter()
        .map(|(name, _, _, mount_path)| VolumeMount {
            name: (*name).to_owned(),
            mount_path: (*mount_path).to_owned(),
            read_only: Some(true),
            // Submounts too, should a host path carry any: a plain read-only bind mount
            // would leave them writable to a uid-0 process.
            recursive_read_only: Some("IfPossible".to_owned()),
            ..VolumeMount::default()
        })
        .collect();
    (volumes, mounts)
}

/// The tightest context that can still use the kubelet's socket.
///
/// The kubelet creates the pod-resources socket owned by root, writable by root only, and
/// `connect()` needs write permission on it; so the agent runs as uid 0. Being the owner
/// is enough, no capability is needed (not even CAP_DAC_OVERRIDE), so every capability is
/// dropped: uid 0 here can read and connect to root-owned files it can reach, and the only
/// host paths it can reach are the read-only mounts above.
fn updater_security_context() -> SecurityContext {
    SecurityContext {
        run_as_user: Some(0),
        run_as_group: Some(0),
        run_as_non_root: Some(false),
        ..locked_down_container()
    }
}
