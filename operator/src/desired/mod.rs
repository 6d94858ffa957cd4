//! Desired state: the Kubernetes objects one TopologyAwareScheduling object stands for,
//! built by pure functions.
//!
//! ```text
//! ValidatedSpec (the CR, checked and with images resolved: see `crate::validate`)
//!   └─ build() ─► Desired (typed objects, one field per kind)
//!                   └─ into_api_objects() ─► JSON in apply order ─► server-side apply
//! ```
//!
//! One module per kind: the namespace (`namespace.rs`), the NRT CRD (`crd.rs`), RBAC
//! (`rbac.rs`), the scheduler's ConfigMap (`configmap.rs`), the node agent DaemonSets
//! (`daemonset.rs`), the scheduler Deployment (`deployment.rs`) and the metrics Services
//! (`service.rs`), and the operands' NetworkPolicies (`network_policy.rs`). Nothing here talks to the API server, so every rule about what gets
//! deployed is testable from a YAML fixture of the CR.
//!
//! Every object carries the labels of [`names`] (`app.kubernetes.io/managed-by`,
//! `part-of`, `component`, `tas.dev/stack`), which the operator prunes by, and, when the
//! CR has a uid, a controller owner reference to it, so deleting the CR deletes the stack
//! (except the namespace and, unless `deleteOnUninstall`, the NRT CRD: see their modules).

mod configmap;
mod crd;
mod daemonset;
mod deployment;
mod error;
pub mod hash;
mod meta;
pub mod names;
mod namespace;
mod network_policy;
mod node_affinity;
mod objects;
mod pod;
mod rbac;
mod service;
pub mod serving_cert;

pub use configmap::{leader_election_enabled, scheduler_config};
pub(crate) use daemonset::UPDATER_APP_NAME;
pub use deployment::SCHEDULER_UID;
pub use error::BuildError;
pub use meta::{Component, managed_selector};
pub use names::*;
pub use objects::{ApiObject, managed_resources};
pub use pod::OTLP_ENDPOINT_ENV;

use crate::validate::ValidatedSpec;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// What validation needs beyond the CR to resolve what the builders use: facts about
/// the operator itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildContext {
    /// Node agent image when the CR names none (the operator's `--updater-image`).
    pub updater_image_default: Option<String>,
    /// Scheduler image when the CR names none (the operator's `--scheduler-image`).
    pub scheduler_image_default: Option<String>,
    /// Images the CR may name besides the two defaults (`--allowed-images`).
    pub allowed_images: Vec<String>,
    /// Taint keys the CR's tolerations may name (`--allowed-toleration-keys`); `*`: any
    /// toleration, also one without a key.
    pub allowed_toleration_keys: Vec<String>,
    /// The node agents' own namespace (`--updater-namespace`), created by the installer
    /// with the Pod Security level they need, so that `spec.namespace` (the scheduler's)
    /// can be `restricted`. `None`: they run in `spec.namespace`.
    pub updater_namespace: Option<String>,
}

/// The objects of one stack, one field per kind.
///
/// Code that handles every object (apply, prune, status) destructures this without `..`,
/// so adding a kind here fails to compile until each of them handles it.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// The operands' namespace.
    pub namespace: Namespace,
    /// The NodeResourceTopology CRD; `None` when `spec.nrtCRD.manage` is false.
    pub nrt_crd: Option<CustomResourceDefinition>,
    /// `tas-updater` and `tas-scheduler`.
    pub service_accounts: Vec<ServiceAccount>,
    /// Cluster-wide permissions of each operand.
    pub cluster_roles: Vec<ClusterRole>,
    /// Bindings of the ClusterRoles to the ServiceAccounts.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    /// The scheduler's leader-election Role (always: the scheduler always elects).
    pub roles: Vec<Role>,
    /// Bindings of the Roles.
    pub role_bindings: Vec<RoleBinding>,
    /// The scheduler's configuration file.
    pub config_maps: Vec<ConfigMap>,
    /// One node agent DaemonSet per node group.
    pub daemon_sets: Vec<DaemonSet>,
    /// The scheduler.
    pub deployment: Deployment,
    /// Metrics Services of the scheduler and the node agents.
    pub services: Vec<Service>,
    /// The operands' NetworkPolicies; empty when `spec.networkPolicy.enabled` is false.
    pub network_policies: Vec<NetworkPolicy>,
}

/// The desired state of the stack described by a validated object.
pub fn build(valid: &ValidatedSpec<'_>) -> Result<Desired, BuildError> {
    let stack = meta::Stack::new(valid);
    let spec = &valid.cr.spec;

    let config = scheduler_config(spec);
    let rendered = configmap::render(&config)?;

    let daemon_sets = valid
        .groups
        .iter()
        .map(|group| daemonset::updater_daemon_set(&stack, spec, group))
        .collect::<Result<Vec<_>, _>>()?;
    let deployment = deployment::scheduler_deployment(
        &stack,
        spec,
        tas_api::hash::fnv1a64_hex(rendered.as_bytes()),
        &valid.scheduler_image,
    );

    let rbac::Rbac {
        service_accounts,
        mut cluster_roles,
        cluster_role_bindings,
        roles,
        role_bindings,
    } = rbac::rbac(&stack, &config.leader_election);
    if valid.groups.iter().any(|g| g.updater.kubelet.configz) {
        rbac::allow_configz(&mut cluster_roles);
    }

    Ok(Desired {
        namespace: namespace::namespace(&stack),
        nrt_crd: crd::nrt_crd(&stack, &spec.nrt_crd),
        service_accounts,
        cluster_roles,
        cluster_role_bindings,
        roles,
        role_bindings,
        config_maps: vec![configmap::scheduler_config_map(&stack, &rendered)],
        daemon_sets,
        deployment,
        services: service::services(&stack, spec.observability.serving_certificate),
        network_policies: network_policy::network_policies(
            &stack,
            spec.network_policy.enabled,
            valid.otlp_port,
        ),
    })
}

#[cfg(test)]
mod tests;
