//! Deleting managed objects that are no longer desired (prune), or all of them
//! (uninstall).
//!
//! The operator finds its objects by label ([`managed_selector`]) in every kind it may
//! create ([`managed_resources`]), so an object left behind by an older spec (a removed
//! node group's DaemonSet, the leader-election Role after scaling to one replica, the
//! operands in the previous `spec.namespace`) is found even though nothing references
//! it any more. Two kinds are special:
//!
//! - a Namespace is deleted only if the operator created it: marked
//!   ([`CREATED_BY_ANNOTATION`](super::apply::CREATED_BY_ANNOTATION)) and recorded by
//!   uid in the object's status (`super::created`); any other only loses the operator's
//!   labels (its field-manager entry is emptied by applying a bare object);
//! - the NRT CRD is never pruned (deleting it deletes every NRT object, which other
//!   tools may use); uninstall deletes it only with `deleteOnUninstall`.

use super::FIELD_MANAGER;
use super::apply::created_by_operator;
use super::created;
use crate::desired::{ApiObject, managed_resources, managed_selector};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams,
};
use kube::core::discovery::Scope;
use kube::{Api, Client};
use std::collections::BTreeSet;
use std::fmt;

/// Identity of a managed object across kinds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// API group (empty for core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace of namespaced objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl Key {
    /// The key of a desired object.
    pub fn of(obj: &ApiObject) -> Self {
        Self {
            group: obj.resource.group.clone(),
            kind: obj.resource.kind.clone(),
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A failure to list or delete managed objects. Always transient: listing and deleting
/// are retried on the next attempt.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    /// Listing one kind failed.
    #[error("listing managed {kind} objects: {source}")]
    List {
        /// The kind.
        kind: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Reading the records of created objects failed.
    #[error("reading which objects the operator created: {0}")]
    Records(#[source] kube::Error),
    /// Deleting (or releasing) one object failed.
    #[error("removing {key}: {source}")]
    Remove {
        /// The object.
        key: Box<Key>,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
}

/// What uninstall keeps besides pre-existing namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrdPolicy {
    /// Leave the NRT CRD (and every NRT object) in place.
    Keep,
    /// Delete it (`spec.nrtCRD.deleteOnUninstall`).
    Delete,
}

/// Removes every object of the stack `stack` that is not in `keep`; returns what it
/// removed.
pub async fn prune(
    client: &Client,
    stack: &str,
    keep: &BTreeSet<Key>,
) -> Result<Vec<Key>, PruneError> {
    remove_where(client, stack, |key| {
        key.kind != "CustomResourceDefinition" && !keep.contains(key)
    })
    .await
}

/// Removes every object of the stack `stack` (uninstall).
pub async fn remove_all(
    client: &Client,
    stack: &str,
    crd: CrdPolicy,
) -> Result<Vec<Key>, PruneError> {
    remove_where(client, stack, |key| {
        key.kind != "CustomResourceDefinition" || crd == CrdPolicy::Delete
    })
    .await
}

/// Removes the managed objects `select` picks, dependents first (workloads before
/// their RBAC, everything before the namespace).
async fn remove_where(
    client: &Client,
    stack: &str,
    select: impl Fn(&Key) -> bool,
) -> Result<Vec<Key>, PruneError> {
    let selector = managed_selector(stack);
    let mut removed = Vec::new();
    // Read when a namespace is found: a record written by this reconcile counts.
    let mut records = None;
    for (resource, scope) in managed_resources().into_iter().rev() {
        let listed = Api::<DynamicObject>::all_with(client.clone(), &resource)
            .list_metadata(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| PruneError::List {
                kind: resource.kind.clone(),
                source,
            })?;
        for meta in listed.items {
            let key = Key {
                group: resource.group.clone(),
                kind: resource.kind.clone(),
                namespace: meta.metadata.namespace.clone(),
                name: meta.metadata.name.clone().unwrap_or_default(),
            };
            if meta.metadata.deletion_timestamp.is_some() || !select(&key) {
                continue;
            }
            let created = if key.kind == created::NAMESPACE {
                if records.is_none() {
                    records = Some(
                        created::load(client, stack)
                            .await
                            .map_err(PruneError::Records)?,
                    );
                }
                records.as_deref().unwrap_or_default()
            } else {
                &[]
            };
            remove(client, &resource, &scope, &meta, &key, created)
                .await
                .map_err(|source| PruneError::Remove {
                    key: Box::new(key.clone()),
                    source,
                })?;
            removed.push(key);
        }
    }
    Ok(removed)
}

async fn remove(
    client: &Client,
    resource: &ApiResource,
    scope: &Scope,
    meta: &PartialObjectMeta<DynamicObject>,
    key: &Key,
    records: &[tas_api::tas::CreatedObject],
) -> Result<(), kube::Error> {
    let api = match (scope, &key.namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, resource),
        _ => Api::all_with(client.clone(), resource),
    };
    if key.kind == created::NAMESPACE && !created_by_operator(&meta.metadata, records) {
        // Earlier releases labelled a namespace they did not create, and trusted the
        // mark alone; this operator never writes one it cannot prove it created. It may
        // lack the right to undo that (it patches only namespaces it created): then the
        // labels stay, and it says so.
        tracing::info!(namespace = %key.name, "leaving the pre-existing namespace, removing the operator's labels");
        return match release(&api, &key.name, resource).await {
            Err(kube::Error::Api(s)) if s.code == 403 => {
                tracing::warn!(namespace = %key.name, "not allowed to remove an earlier release's labels from the pre-existing namespace; remove them by hand");
                Ok(())
            }
            other => other,
        };
    }
    tracing::info!(object = %key, "deleting");
    match api.delete(&key.name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Gives up every field the operator owns on an object it must not delete: applying a
/// bare object with the operator's field manager removes the labels only it set.
async fn release(
    api: &Api<DynamicObject>,
    name: &str,
    resource: &ApiResource,
) -> Result<(), kube::Error> {
    let bare = serde_json::json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": { "name": name },
    });
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&bare),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_display_with_namespace() {
        let k = Key {
            group: "apps".into(),
            kind: "DaemonSet".into(),
            namespace: Some("tas".into()),
            name: "tas-updater-a".into(),
        };
        assert_eq!(k.to_string(), "DaemonSet tas/tas-updater-a");
    }
}
