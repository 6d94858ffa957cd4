//! The scheduler Deployment (`tas-scheduler`).
//!
//! Runs `tas-scheduler --config=<mounted ConfigMap>`. The pod template carries the hash
//! of the rendered configuration, so a change of the file (which Kubernetes would
//! otherwise only sync into the running pods, unnoticed by the process) rolls the pods.
//! Placement (node selector, tolerations, affinity, spread), priority, image pulls and
//! extra pod labels and annotations are the CR's pod settings (`spec.scheduler`,
//! `spec.imagePull*`); unset, they are what this module always rendered.

use super::meta::{Component, Stack};
use super::names::{
    CONFIG_HASH_ANNOTATION, NAME_LABEL, SCHEDULER_CONFIG_DIR, SCHEDULER_CONFIG_MAP,
    SCHEDULER_CONTAINER, SCHEDULER_DEPLOYMENT, SCHEDULER_METRICS_SERVICE,
    SCHEDULER_SERVICE_ACCOUNT,
};
use super::pod::{
    field_env, http_port, image_pull_policy, image_pull_secrets, linux_node_selector,
    liveness_probe, locked_down_container, otlp_env, priority_class, readiness_probe,
    runtime_default_seccomp, with_extra,
};
use super::serving_cert;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, Container, PodSecurityContext, PodSpec, PodTemplateSpec,
    SecurityContext, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use std::collections::BTreeMap;
use tas_api::config::scheduler::{FILE_NAME, HTTP_PORT};
use tas_api::tas::TopologyAwareSchedulingSpec;

/// `app.kubernetes.io/name` of the scheduler pods.
pub(crate) const SCHEDULER_APP_NAME: &str = "tas-scheduler";
/// The non-root user of the scheduler (the conventional "nonroot" uid of distroless
/// images); the scheduler needs nothing but its token and the API server.
pub const SCHEDULER_UID: i64 = 65532;

/// Labels selecting the scheduler pods (the Deployment's and the Service's selector).
pub(crate) fn scheduler_pod_selector() -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_LABEL.to_owned(), SCHEDULER_APP_NAME.to_owned())])
}

/// The scheduler Deployment running `image`; `config_hash` is the hash of the rendered
/// config file.
pub(crate) fn scheduler_deployment(
    stack: &Stack,
    spec: &TopologyAwareSchedulingSpec,
    config_hash: String,
    image: &str,
) -> Deployment {
    let s = &spec.scheduler;

    let mut env = vec![
        // Leader-election identity and the namespace of its Lease.
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
    ];
    env.extend(otlp_env(&spec.observability));
    let serving_cert = serving_cert::mount(
        spec.observability.serving_certificate,
        SCHEDULER_METRICS_SERVICE,
    );
    let mut args = vec![
        format!("--config={SCHEDULER_CONFIG_DIR}/{FILE_NAME}"),
        format!("--log-level={}", spec.observability.log_level.as_str()),
    ];
    let mut volume_mounts = vec![VolumeMount {
        name: "config".to_owned(),
        mount_path: SCHEDULER_CONFIG_DIR.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    }];
    let mut volumes = vec![Volume {
        name: "config".to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: SCHEDULER_CONFIG_MAP.to_owned(),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }];
    if let Some(cert) = serving_cert {
        args.extend(cert.args);
        volume_mounts.push(cert.mount);
        volumes.push(cert.volume);
    }

    let container = Container {
        name: SCHEDULER_CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        args: Some(args),
        env: Some(env),
        ports: Some(vec![http_port(HTTP_PORT)]),
        liveness_probe: Some(liveness_probe()),
        readiness_probe: Some(readiness_probe()),
        resources: Some(s.resources.clone()),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(SCHEDULER_UID),
            run_as_group: Some(SCHEDULER_UID),
            ..locked_down_container()
        }),
        volume_mounts: Some(volume_mounts),
        image_pull_policy: image_pull_policy(spec.image_pull_policy),
        ..Container::default()
    };

    let mut pod_labels = stack.labels(Component::Scheduler);
    pod_labels.extend(scheduler_pod_selector());
    let mut meta = stack.namespaced_meta(SCHEDULER_DEPLOYMENT, Component::Scheduler);
    meta.labels = Some(pod_labels.clone());

    Deployment {
        metadata: meta,
        spec: Some(DeploymentSpec {
            replicas: Some(s.replicas),
            selector: LabelSelector {
                match_labels: Some(scheduler_pod_selector()),
                ..LabelSelector::default()
            },
            strategy: Some(rolling_update()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(with_extra(pod_labels, &s.pod_labels)),
                    annotations: Some(with_extra(
                        BTreeMap::from([(CONFIG_HASH_ANNOTATION.to_owned(), config_hash)]),
                        &s.pod_annotations,
                    )),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(SCHEDULER_SERVICE_ACCOUNT.to_owned()),
                    automount_service_account_token: Some(true),
                    priority_class_name: priority_class(&s.priority_class_name),
                    node_selector: Some(with_extra(linux_node_selector(), &s.node_selector)),
                    tolerations: (!s.tolerations.is_empty()).then(|| s.tolerations.clone()),
                    affinity: s.affinity.clone(),
                    topology_spread_constraints: topology_spread(
                        s.topology_spread_constraints.as_deref(),
                    ),
                    image_pull_secrets: image_pull_secrets(&spec.image_pull_secrets),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(SCHEDULER_UID),
                        run_as_group: Some(SCHEDULER_UID),
                        seccomp_profile: Some(runtime_default_seccomp()),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// A rolling update, for any number of replicas: the scheduler always elects a leader
/// (`configmap::leader_election_enabled`), so the old and the new pods may run side by
/// side (the Lease lets one bind) and a new pod takes over without a gap.
fn rolling_update() -> DeploymentStrategy {
    DeploymentStrategy {
        type_: Some("RollingUpdate".to_owned()),
        ..DeploymentStrategy::default()
    }
}

/// The CR's spread constraints; unset, the operator's [`spread_over_nodes`]; `[]`, none.
fn topology_spread(
    configured: Option<&[TopologySpreadConstraint]>,
) -> Option<Vec<TopologySpreadConstraint>> {
    match configured {
        None => Some(vec![spread_over_nodes()]),
        Some([]) => None,
        Some(c) => Some(c.to_vec()),
    }
}

/// Replicas on different nodes when possible, so a node failure does not take every
/// replica with it; a preference only, so a one-node cluster still runs them all.
fn spread_over_nodes() -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname".to_owned(),
        when_unsatisfiable: "ScheduleAnyway".to_owned(),
        label_selector: Some(LabelSelector {
            match_labels: Some(scheduler_pod_selector()),
            ..LabelSelector::default()
        }),
        // Count only the pods of the same ReplicaSet, so a rollout's old pods do not
        // skew the new ones.
        match_label_keys: Some(vec!["pod-template-hash".to_owned()]),
        ..TopologySpreadConstraint::default()
    }
}
