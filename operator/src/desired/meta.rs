//! Metadata every built object shares: the common labels the operator prunes by, the
//! namespace, and the owner reference to the TopologyAwareScheduling object.

use super::names::{
    COMPONENT_LABEL, MANAGED_BY, MANAGED_BY_LABEL, PART_OF, PART_OF_LABEL, STACK_LABEL,
};
use crate::validate::ValidatedSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use std::collections::BTreeMap;

/// The part of the stack an object belongs to (`app.kubernetes.io/component`). RBAC
/// objects carry the component they grant permissions to, so that
/// `-l app.kubernetes.io/component=updater` shows everything the node agent runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// The operands' namespace.
    Namespace,
    /// The NodeResourceTopology CRD.
    NrtCrd,
    /// Node agents: DaemonSets, their RBAC and metrics Service.
    Updater,
    /// The scheduler: Deployment, config, RBAC and metrics Service.
    Scheduler,
}

impl Component {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Namespace => "namespace",
            Self::NrtCrd => "nrt-crd",
            Self::Updater => "updater",
            Self::Scheduler => "scheduler",
        }
    }
}

/// Label selector (in `kubectl -l` / list-parameter syntax) matching every object the
/// operator manages for the stack named `stack`: what it lists to prune.
pub fn managed_selector(stack: &str) -> String {
    format!("{MANAGED_BY_LABEL}={MANAGED_BY},{STACK_LABEL}={stack}")
}

/// What every builder needs to know about the stack it builds for.
#[derive(Debug, Clone)]
pub(crate) struct Stack<'a> {
    /// `metadata.name` of the TopologyAwareScheduling object.
    pub name: &'a str,
    /// `spec.namespace`: where the scheduler's namespaced objects go.
    pub namespace: &'a str,
    /// Where the node agents' namespaced objects go: the installer's
    /// `--updater-namespace`, else `spec.namespace`.
    pub updater_namespace: &'a str,
    /// Controller reference to the TopologyAwareScheduling object; `None` when it has no
    /// uid yet (offline rendering), since an owner reference without a uid is refused.
    owner: Option<OwnerReference>,
}

impl<'a> Stack<'a> {
    /// The stack of a validated object.
    pub fn new(spec: &'a ValidatedSpec<'a>) -> Self {
        let cr = spec.cr;
        // blockOwnerDeletion: a foreground deletion of the CR waits for its operands, so
        // "CR gone" means "stack gone".
        let owner = cr.controller_owner_ref(&()).map(|o| OwnerReference {
            block_owner_deletion: Some(true),
            ..o
        });
        Self {
            name: spec.name,
            namespace: &cr.spec.namespace,
            updater_namespace: &spec.updater_namespace,
            owner,
        }
    }

    /// The common labels of an object of `component`.
    pub fn labels(&self, component: Component) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
            (PART_OF_LABEL.to_owned(), PART_OF.to_owned()),
            (COMPONENT_LABEL.to_owned(), component.as_str().to_owned()),
            (STACK_LABEL.to_owned(), self.name.to_owned()),
        ])
    }

    /// The owner references every owned object carries (empty without a uid).
    pub fn owner_references(&self) -> Option<Vec<OwnerReference>> {
        self.owner.clone().map(|o| vec![o])
    }

    /// Metadata of a cluster-scoped object owned by the stack.
    pub fn cluster_meta(&self, name: &str, component: Component) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(self.labels(component)),
            owner_references: self.owner_references(),
            ..ObjectMeta::default()
        }
    }

    /// The namespace of `component`'s namespaced objects: the node agents' own
    /// namespace for [`Component::Updater`], `spec.namespace` for the rest.
    pub fn namespace_of(&self, component: Component) -> &'a str {
        match component {
            Component::Updater => self.updater_namespace,
            _ => self.namespace,
        }
    }

    /// Whether the node agents run in `spec.namespace` (no namespace of their own).
    pub fn agents_share_namespace(&self) -> bool {
        self.updater_namespace == self.namespace
    }

    /// Metadata of an object in `component`'s namespace (see [`Self::namespace_of`]),
    /// owned by the stack.
    pub fn namespaced_meta(&self, name: &str, component: Component) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(self.namespace_of(component).to_owned()),
            ..self.cluster_meta(name, component)
        }
    }
}
