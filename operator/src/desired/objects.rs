//! The desired objects as the API server sees them: JSON with `apiVersion` and `kind`,
//! in the order the operator applies them.

use super::{BuildError, Desired};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::ApiResource;
use kube::core::discovery::Scope;
use serde::Serialize;

/// One desired object, ready for a dynamic server-side apply.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiObject {
    /// Group, version, kind and plural of the object's resource.
    pub resource: ApiResource,
    /// Whether the resource is namespaced.
    pub scope: Scope,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, for namespaced objects.
    pub namespace: Option<String>,
    /// The object, with `apiVersion` and `kind` set.
    pub value: serde_json::Value,
}

impl Desired {
    /// Every object in apply order: what others depend on comes first. The namespace
    /// before what lives in it; the NRT CRD before operands that watch NRT objects;
    /// ServiceAccounts and RBAC before the pods that run with them (a pod started before
    /// its permissions exist crash-loops on 403s); the scheduler's ConfigMap before the
    /// Deployment that mounts it; the NetworkPolicies before the pods they confine;
    /// workloads last.
    pub fn into_api_objects(self) -> Result<Vec<ApiObject>, BuildError> {
        // No `..`: a new field must be placed in the order here, or this does not compile.
        let Desired {
            namespace,
            nrt_crd,
            service_accounts,
            cluster_roles,
            cluster_role_bindings,
            roles,
            role_bindings,
            config_maps,
            daemon_sets,
            deployment,
            services,
            network_policies,
        } = self;
        let mut out = Vec::new();
        push(&mut out, namespace)?;
        push_all(&mut out, nrt_crd)?;
        push_all(&mut out, service_accounts)?;
        push_all(&mut out, cluster_roles)?;
        push_all(&mut out, cluster_role_bindings)?;
        push_all(&mut out, roles)?;
        push_all(&mut out, role_bindings)?;
        push_all(&mut out, config_maps)?;
        push_all(&mut out, services)?;
        push_all(&mut out, network_policies)?;
        push_all(&mut out, daemon_sets)?;
        push(&mut out, deployment)?;
        Ok(out)
    }

    /// Every object as JSON, in apply order (see [`Desired::into_api_objects`]).
    pub fn into_objects(self) -> Result<Vec<serde_json::Value>, BuildError> {
        Ok(self
            .into_api_objects()?
            .into_iter()
            .map(|o| o.value)
            .collect())
    }
}

/// Every resource the operator may create for a stack, in apply order: what it lists
/// (with [`managed_selector`](super::managed_selector)) to find objects to prune.
pub fn managed_resources() -> Vec<(ApiResource, Scope)> {
    vec![
        resource::<Namespace>(),
        resource::<CustomResourceDefinition>(),
        resource::<ServiceAccount>(),
        resource::<ClusterRole>(),
        resource::<ClusterRoleBinding>(),
        resource::<Role>(),
        resource::<RoleBinding>(),
        resource::<ConfigMap>(),
        resource::<Service>(),
        resource::<NetworkPolicy>(),
        resource::<DaemonSet>(),
        resource::<Deployment>(),
    ]
}

/// The scope of a k8s-openapi resource type, as kube's discovery names it.
trait ScopeOf {
    const SCOPE: Scope;
}

impl ScopeOf for k8s_openapi::ClusterResourceScope {
    const SCOPE: Scope = Scope::Cluster;
}

impl ScopeOf for k8s_openapi::NamespaceResourceScope {
    const SCOPE: Scope = Scope::Namespaced;
}

fn resource<K>() -> (ApiResource, Scope)
where
    K: kube::Resource<DynamicType = ()>,
    K::Scope: ScopeOf,
{
    (ApiResource::erase::<K>(&()), K::Scope::SCOPE)
}

fn push_all<K>(
    out: &mut Vec<ApiObject>,
    objects: impl IntoIterator<Item = K>,
) -> Result<(), BuildError>
where
    K: kube::Resource<DynamicType = ()> + Serialize,
    K::Scope: ScopeOf,
{
    objects.into_iter().try_for_each(|o| push(out, o))
}

fn push<K>(out: &mut Vec<ApiObject>, object: K) -> Result<(), BuildError>
where
    K: kube::Resource<DynamicType = ()> + Serialize,
    K::Scope: ScopeOf,
{
    let (resource, scope) = resource::<K>();
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    let namespace = meta.namespace.clone();
    // k8s-openapi's serialisation writes apiVersion and kind itself.
    let value = serde_json::to_value(&object).map_err(|source| BuildError::Serialize {
        kind: resource.kind.clone(),
        name: name.clone(),
        source,
    })?;
    out.push(ApiObject {
        resource,
        scope,
        name,
        namespace,
        value,
    });
    Ok(())
}
