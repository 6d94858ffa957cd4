//! The operands' namespace: created by the operator when it does not exist, never
//! touched when it does and the operator did not create it.
//!
//! ```text
//! spec.namespace missing            ─► create it (marked tas.dev/created-by-operator,
//!                                       Pod Security `privileged`), record its uid in
//!                                       the status (`super::created`), bind the operator
//!                                       its rights there, wait until they take effect
//! exists, created by the operator  ─► re-bind if a binding was removed, apply it
//! exists, not created by it        ─► leave it exactly as it is: no label, no mark
//! ```
//!
//! "Created by the operator" means marked *and* recorded by uid: the mark alone can be
//! set by whoever may annotate namespaces.
//!
//! The operator's ClusterRole lets it write operands only where a RoleBinding grants the
//! ClusterRole `tas-operator-operands`: its own namespace (config/rbac) and a namespace it
//! created, where it binds that role and `tas-operator-namespace` (patch and delete that
//! one namespace) to itself. The admission policy `tas-operator-scope` refuses such a
//! binding anywhere else. See docs/rbac.md.

use super::FIELD_MANAGER;
use super::apply::{ApplyError, CREATED_BY_ANNOTATION, api_for, created_by_operator};
use super::created;
use crate::context::OperatorIdentity;
use crate::desired::{ApiObject, MANAGED_BY, MANAGED_BY_LABEL, PART_OF, PART_OF_LABEL};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::time::Duration;
use tas_api::tas::CreatedObject;
use tokio::time::Instant;

/// ClusterRole with the operator's rights inside a namespace holding operands.
pub const OPERANDS_CLUSTER_ROLE: &str = "tas-operator-operands";
/// ClusterRole letting the operator patch and delete the namespace it is bound in.
pub const NAMESPACE_CLUSTER_ROLE: &str = "tas-operator-namespace";

/// How long new RoleBindings may take to reach the API server's authorizer.
const RBAC_PROPAGATION: Duration = Duration::from_secs(10);
const RBAC_POLL: Duration = Duration::from_millis(100);

/// What the apply step does with the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceAction {
    /// It does not exist: create it.
    Create,
    /// The operator created it: apply it.
    Apply,
    /// It existed before and is not the operator's: leave it as it is.
    Leave,
}

/// The decision for a namespace as it is now (`None`: it does not exist), given the
/// records of what the operator created.
pub fn action(existing: Option<&Namespace>, records: &[CreatedObject]) -> NamespaceAction {
    match existing {
        None => NamespaceAction::Create,
        Some(ns) if created_by_operator(&ns.metadata, records) => NamespaceAction::Apply,
        Some(_) => NamespaceAction::Leave,
    }
}

/// The RoleBindings that give `identity` its rights in `namespace`, a namespace the
/// operator created. None in the operator's own namespace (config/rbac binds it there,
/// and it must not be able to delete that namespace).
pub fn self_bindings(namespace: &str, identity: &OperatorIdentity) -> Vec<RoleBinding> {
    if namespace == identity.namespace {
        return Vec::new();
    }
    [OPERANDS_CLUSTER_ROLE, NAMESPACE_CLUSTER_ROLE]
        .into_iter()
        .map(|role| RoleBinding {
            metadata: ObjectMeta {
                name: Some(role.to_owned()),
                namespace: Some(namespace.to_owned()),
                // No stack label and no owner: prune must not delete them before the
                // operands they allow deleting; they go with the namespace.
                labels: Some(BTreeMap::from([
                    (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                    (PART_OF_LABEL.to_owned(), PART_OF.to_owned()),
                ])),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "ClusterRole".to_owned(),
                name: role.to_owned(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: identity.service_account.clone(),
                namespace: Some(identity.namespace.clone()),
                ..Subject::default()
            }]),
        })
        .collect()
}

/// Creates, applies or leaves the namespace `obj` of the stack `stack` (see the module
/// docs).
pub async fn ensure(
    client: &Client,
    stack: &str,
    obj: &ApiObject,
    identity: Option<&OperatorIdentity>,
) -> Result<(), ApplyError> {
    let name = obj.name.as_str();
    let read_error = |source| ApplyError::ReadNamespace {
        name: name.to_owned(),
        source,
    };
    let existing = Api::<Namespace>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(read_error)?;
    if existing
        .as_ref()
        .is_some_and(|ns| ns.metadata.deletion_timestamp.is_some())
    {
        return Err(ApplyError::NamespaceTerminating {
            name: name.to_owned(),
        });
    }
    let mut value = obj.value.clone();
    value["metadata"]["annotations"][CREATED_BY_ANNOTATION] = "true".into();
    let patch_error = |source| ApplyError::Patch {
        kind: "Namespace".to_owned(),
        name: name.to_owned(),
        source,
    };
    let record_error = |source| ApplyError::Record {
        name: name.to_owned(),
        source,
    };
    let records = if existing.is_some() {
        created::load(client, stack).await.map_err(record_error)?
    } else {
        Vec::new()
    };
    match action(existing.as_ref(), &records) {
        NamespaceAction::Leave => {
            tracing::debug!(
                namespace = name,
                "namespace not created by the operator (no record of its uid): left as it is"
            );
            Ok(())
        }
        NamespaceAction::Create => {
            // A plain create: an apply would be authorised as a patch of the namespace,
            // which the operator may do only once its bindings there exist.
            let object: DynamicObject = serde_json::from_value(value)
                .map_err(|e| patch_error(kube::Error::SerdeError(e)))?;
            let created = match api_for(client, obj).create(&post_params(), &object).await {
                Ok(created) => created,
                // Someone else created it in between: not the operator's.
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::info!(
                        namespace = name,
                        "namespace created by someone else meanwhile: left as it is"
                    );
                    return Ok(());
                }
                Err(e) => return Err(patch_error(e)),
            };
            tracing::info!(namespace = name, "created the operands' namespace");
            // The record before the bindings: it is what lets the operator bind itself
            // there (admission policy tas-operator-namespaces) and ever delete it. If
            // writing it fails, the namespace stays, unrecorded, and is left alone.
            let uid = created.metadata.uid.unwrap_or_default();
            created::record(client, stack, created::NAMESPACE, name, &uid)
                .await
                .map_err(record_error)?;
            bind_self(client, name, identity).await
        }
        NamespaceAction::Apply => {
            bind_self(client, name, identity).await?;
            api_for(client, obj)
                .patch(
                    name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&value),
                )
                .await
                .map(|_| ())
                .map_err(patch_error)
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// Creates the operator's RoleBindings in `namespace` where missing, and waits until
/// the API server authorises it there.
async fn bind_self(
    client: &Client,
    namespace: &str,
    identity: Option<&OperatorIdentity>,
) -> Result<(), ApplyError> {
    let Some(identity) = identity else {
        return Ok(());
    };
    let bindings = self_bindings(namespace, identity);
    if bindings.is_empty() {
        return Ok(());
    }
    let api = Api::<RoleBinding>::namespaced(client.clone(), namespace);
    let mut created = false;
    for binding in &bindings {
        let name = binding.metadata.name.clone().unwrap_or_default();
        match api.create(&post_params(), binding).await {
            Ok(_) => created = true,
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(source) => {
                return Err(ApplyError::Patch {
                    kind: "RoleBinding".to_owned(),
                    name: format!("{namespace}/{name}"),
                    source,
                });
            }
        }
    }
    if created {
        wait_authorised(client, namespace).await?;
    }
    Ok(())
}

/// Polls a SelfSubjectAccessReview until the operator may create ServiceAccounts in
/// `namespace` (new RoleBindings reach the authorizer through a watch).
async fn wait_authorised(client: &Client, namespace: &str) -> Result<(), ApplyError> {
    let api = Api::<SelfSubjectAccessReview>::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("create".to_owned()),
                resource: Some("serviceaccounts".to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let deadline = Instant::now() + RBAC_PROPAGATION;
    loop {
        if let Ok(r) = api.create(&PostParams::default(), &review).await
            && r.status.is_some_and(|s| s.allowed)
        {
            return Ok(());
        }
        if Instant::now() + RBAC_POLL > deadline {
            return Err(ApplyError::NotAuthorised {
                namespace: namespace.to_owned(),
                after: RBAC_PROPAGATION,
            });
        }
        tokio::time::sleep(RBAC_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> OperatorIdentity {
        OperatorIdentity {
            namespace: "tas-system".into(),
            service_account: "tas-operator".into(),
        }
    }

    #[test]
    fn only_a_missing_or_own_namespace_is_written() {
        let records = [CreatedObject {
            kind: created::NAMESPACE.into(),
            name: "numa".into(),
            uid: "u1".into(),
        }];
        assert_eq!(action(None, &records), NamespaceAction::Create);
        let mut ns = Namespace::default();
        ns.metadata.name = Some("numa".into());
        ns.metadata.uid = Some("u1".into());
        assert_eq!(action(Some(&ns), &records), NamespaceAction::Leave);
        ns.metadata.annotations = Some(BTreeMap::from([(
            CREATED_BY_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]));
        assert_eq!(action(Some(&ns), &records), NamespaceAction::Apply);
        // The mark without the record (anyone who may annotate namespaces can set it).
        assert_eq!(action(Some(&ns), &[]), NamespaceAction::Leave);
        // The record of an earlier namespace of the same name.
        ns.metadata.uid = Some("u2".into());
        assert_eq!(action(Some(&ns), &records), NamespaceAction::Leave);
    }

    #[test]
    fn the_operator_binds_itself_only_outside_its_own_namespace() {
        assert!(self_bindings("tas-system", &identity()).is_empty());
        let bindings = self_bindings("numa", &identity());
        let roles: Vec<_> = bindings.iter().map(|b| b.role_ref.name.as_str()).collect();
        assert_eq!(roles, [OPERANDS_CLUSTER_ROLE, NAMESPACE_CLUSTER_ROLE]);
        for b in &bindings {
            assert_eq!(b.metadata.namespace.as_deref(), Some("numa"));
            assert_eq!(b.role_ref.kind, "ClusterRole");
            let subject = &b.subjects.as_ref().unwrap()[0];
            assert_eq!(
                (
                    subject.kind.as_str(),
                    subject.name.as_str(),
                    subject.namespace.as_deref()
                ),
                ("ServiceAccount", "tas-operator", Some("tas-system"))
            );
            // Not found by prune (which selects the stack label) nor owned by the CR.
            let labels = b.metadata.labels.as_ref().unwrap();
            assert!(!labels.contains_key(crate::desired::STACK_LABEL));
            assert!(b.metadata.owner_references.is_none());
        }
    }
}
