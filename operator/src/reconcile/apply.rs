//! Server-side apply of the desired objects, in the builder's order.
//!
//! Each object is applied with field manager [`FIELD_MANAGER`] and `force`: the operator
//! owns every field it sets, so an edit by someone else is overwritten on the next
//! reconcile (drift repair), while fields it does not set (defaults, other controllers'
//! annotations) are left alone. After the NRT CRD the apply waits until the API server
//! serves it (Established), since the operands that follow watch NRT objects.
//!
//! The namespace is handled apart (`super::namespace`): created, marked with
//! [`CREATED_BY_ANNOTATION`] and recorded by uid (`super::created`) when it does not
//! exist, applied when the operator created it, and never written when it existed
//! before, so a pre-existing namespace keeps its labels exactly; uninstall and prune
//! know from the mark and the record which namespace they may delete.

use super::FIELD_MANAGER;
use crate::context::OperatorIdentity;
use crate::desired::ApiObject;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::discovery::Scope;
use kube::{Api, Client};
use std::time::Duration;
use tas_api::tas::CreatedObject;
use tokio::time::Instant;

/// On a namespace the operator created (value `"true"`): it may delete it on uninstall.
pub const CREATED_BY_ANNOTATION: &str = "tas.dev/created-by-operator";

/// How often the CRD's Established condition is checked while waiting for it.
const ESTABLISHED_POLL: Duration = Duration::from_millis(200);

/// A failure to apply the desired objects.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The API server refused or failed a server-side apply.
    #[error("applying {kind} {name}: {source}")]
    Patch {
        /// Kind of the object.
        kind: String,
        /// `namespace/name` or `name`.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Reading the namespace before applying it failed.
    #[error("reading namespace {name}: {source}")]
    ReadNamespace {
        /// The namespace.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Reading or writing the records of created objects (`super::created`) failed.
    #[error("recording that the operator created namespace {name}: {source}")]
    Record {
        /// The namespace.
        name: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The namespace is being deleted; nothing can be created in it until it is gone.
    #[error("namespace {name} is being deleted; the operands are applied again once it is gone")]
    NamespaceTerminating {
        /// The namespace.
        name: String,
    },
    /// RoleBindings the operator created for itself in a namespace it created were not
    /// in effect in time.
    #[error(
        "the operator's RoleBindings in namespace {namespace} were created but not in effect after {after:?}"
    )]
    NotAuthorised {
        /// The namespace.
        namespace: String,
        /// How long the operator waited.
        after: Duration,
    },
    /// The NRT CRD did not become Established in time.
    #[error("CRD {name} was applied but is not Established after {after:?}")]
    NotEstablished {
        /// The CRD's name.
        name: String,
        /// How long the operator waited.
        after: Duration,
    },
}

/// What the API server says when a ValidatingAdmissionPolicy matching the request could
/// not be set up (`failed to configure policy: failed to find resource referenced by
/// paramKind ...`): a state of the API server, not of the object.
const POLICY_NOT_CONFIGURED: &str = "failed to configure policy";

impl ApplyError {
    /// The API server refuses the object itself (400 Bad Request, 422 Invalid): the
    /// same bytes fail the same way until the CR changes. Everything else (conflicts,
    /// throttling, unavailability, a terminating namespace, a slow CRD) may pass later;
    /// so does a 422 from an admission policy the API server could not configure yet
    /// (its parameter's kind not yet discovered, e.g. just after the API server
    /// restarted), which says nothing about the object.
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Patch {
                source: kube::Error::Api(s),
                ..
            } => (s.code == 400 || s.code == 422) && !s.message.contains(POLICY_NOT_CONFIGURED),
            Self::Patch { .. }
            | Self::ReadNamespace { .. }
            | Self::Record { .. }
            | Self::NamespaceTerminating { .. }
            | Self::NotAuthorised { .. }
            | Self::NotEstablished { .. } => false,
        }
    }
}

/// The typed client for one object's resource and scope.
pub fn api_for(client: &Client, obj: &ApiObject) -> Api<DynamicObject> {
    match (&obj.scope, &obj.namespace) {
        (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &obj.resource),
        _ => Api::all_with(client.clone(), &obj.resource),
    }
}

/// Applies the objects of the stack `stack` in order; stops at the first failure.
/// `identity` is the operator's ServiceAccount, bound its rights in a namespace it
/// creates.
pub async fn apply_all(
    client: &Client,
    stack: &str,
    objects: &[ApiObject],
    established_timeout: Duration,
    identity: Option<&OperatorIdentity>,
) -> Result<(), ApplyError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for obj in objects {
        if obj.resource.kind == "Namespace" {
            super::namespace::ensure(client, stack, obj, identity).await?;
            continue;
        }
        let value = obj.value.clone();
        let display = match &obj.namespace {
            Some(ns) => format!("{ns}/{}", obj.name),
            None => obj.name.clone(),
        };
        let patch_error = |source| ApplyError::Patch {
            kind: obj.resource.kind.clone(),
            name: display.clone(),
            source,
        };
        if obj.resource.kind == "CustomResourceDefinition" {
            // Created apart, marked: uninstall deletes only a CRD the operator created.
            super::nrt_crd::create_if_missing(client, &obj.name, &value)
                .await
                .map_err(patch_error)?;
        }
        api_for(client, obj)
            .patch(&obj.name, &params, &Patch::Apply(&value))
            .await
            .map_err(patch_error)?;
        if obj.resource.kind == "CustomResourceDefinition" {
            wait_established(client, &obj.name, established_timeout).await?;
        }
    }
    Ok(())
}

/// Whether the operator created the namespace with this metadata: it carries the
/// creation mark and its uid is in `records` (`super::created`). The mark alone proves
/// nothing: whoever may annotate namespaces can set it.
pub fn created_by_operator(meta: &kube::core::ObjectMeta, records: &[CreatedObject]) -> bool {
    marked(meta) && super::created::proves(records, super::created::NAMESPACE, meta)
}

/// Whether the object carries the creation mark.
pub fn marked(meta: &kube::core::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(CREATED_BY_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// Polls the CRD until it is Established, up to `timeout`.
async fn wait_established(
    client: &Client,
    name: &str,
    timeout: Duration,
) -> Result<(), ApplyError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        // A failed read is as good as "not yet": the deadline bounds the wait.
        if let Ok(crd) = api.get(name).await
            && super::observed::crd_established(&crd)
        {
            return Ok(());
        }
        if Instant::now() + ESTABLISHED_POLL > deadline {
            return Err(ApplyError::NotEstablished {
                name: name.to_owned(),
                after: timeout,
            });
        }
        tokio::time::sleep(ESTABLISHED_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("m", "r").with_code(code).boxed())
    }

    #[test]
    fn only_a_refused_object_is_permanent() {
        let patch = |code| ApplyError::Patch {
            kind: "DaemonSet".into(),
            name: "ns/x".into(),
            source: api_error(code),
        };
        assert!(patch(422).is_permanent());
        assert!(patch(400).is_permanent());
        // Seen right after an API server restart, before the policy's parameter kind
        // (the TopologyAwareScheduling CRD) is discovered again: it passes later.
        let unconfigured = ApplyError::Patch {
            kind: "ClusterRoleBinding".into(),
            name: "tas-updater".into(),
            source: kube::Error::Api(
                Status::failure(
                    "clusterrolebindings.rbac.authorization.k8s.io \"tas-updater\" is forbidden: \
                     ValidatingAdmissionPolicy 'tas-operator-namespaces' denied request: failed \
                     to configure policy: failed to find resource referenced by paramKind: \
                     'tas.dev/v1alpha1, Kind=TopologyAwareScheduling'",
                    "Invalid",
                )
                .with_code(422)
                .boxed(),
            ),
        };
        assert!(!unconfigured.is_permanent());
        for code in [403, 404, 409, 429, 500, 503] {
            assert!(!patch(code).is_permanent(), "{code}");
        }
        assert!(
            !ApplyError::NotEstablished {
                name: "c".into(),
                after: Duration::from_secs(1)
            }
            .is_permanent()
        );
    }
}
