//! The writes the writer sends, and how each one is sent.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::oneshot;

pub use super::bind_order::Admission;
use super::claims::{self, ClaimRelease, ClaimReservation};
use super::{Fence, WriteError};
use crate::events::Message;

/// A fenced write: sent only while leading (see [`super::Fence`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Bind the pod to `node` through the `pods/binding` subresource, after writing
    /// its ResourceClaims (`claims`, in order; the first that fails stops the bind).
    Bind {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Pod uid (the binding applies only to this pod, not a namesake).
        uid: String,
        /// Target node.
        node: String,
        /// The pod's claims to allocate and reserve first (see [`super::claims`]).
        claims: Vec<ClaimReservation>,
        /// Whether the bind waits for the earlier binds to its node (see
        /// [`super::bind_order`]).
        admission: Admission,
    },
    /// Undo a claim's reservation for a pod that was not bound (see
    /// [`super::claims`]).
    ReleaseClaim(ClaimRelease),
    /// Evict the pod through the Eviction API (which enforces PodDisruptionBudgets).
    Evict {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Pod uid (precondition: a namesake is not evicted).
        uid: String,
    },
    /// Set `status.nominatedNodeName`, as kube-scheduler does after preempting.
    NominateNode {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Nominated node.
        node: String,
    },
}

/// A queued fenced write and where its outcome goes.
pub(super) struct Envelope {
    pub(super) request: Request,
    pub(super) reply: oneshot::Sender<Result<(), WriteError>>,
}

/// A write of the ordered lane: Events (unfenced) and the `PodScheduled=False`
/// condition (fenced).
pub(crate) enum LaneWrite {
    /// `PodScheduled=False`, reason `Unschedulable`, with `message`.
    Unschedulable {
        /// The pod.
        pod: ObjectReference,
        /// Why (truncated to an Event note's length).
        message: String,
    },
    /// An Event.
    Event(Message),
}

impl Request {
    /// Sends the request, each of its writes fenced by `fence`: a bind's claim writes
    /// one by one, then the bind itself.
    pub(super) async fn send_fenced(
        &self,
        fence: &Fence,
        client: &Client,
    ) -> Result<(), WriteError> {
        if let Self::Bind { claims, .. } = self {
            for claim in claims {
                fence
                    .send(true, claims::reserve(client, claim))
                    .await
                    .map_err(|e| WriteError::Claim {
                        claim: claim.claim(),
                        source: Box::new(e),
                    })?;
            }
        }
        fence.send(true, self.send(client)).await
    }

    /// Sends the request (a bind without its claims).
    async fn send(&self, client: &Client) -> Result<(), kube::Error> {
        match self {
            Self::Bind {
                namespace,
                name,
                uid,
                node,
                claims: _,
                admission: _,
            } => {
                let binding = Binding {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(namespace.clone()),
                        uid: Some(uid.clone()),
                        ..Default::default()
                    },
                    target: ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Node".into()),
                        name: Some(node.clone()),
                        ..ObjectReference::default()
                    },
                };
                let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
                let _: serde_json::Value = api
                    .create_subresource("binding", name, &PostParams::default(), &binding)
                    .await?;
                Ok(())
            }
            Self::ReleaseClaim(release) => claims::release(client, release).await,
            Self::Evict {
                namespace,
                name,
                uid,
            } => {
                let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
                let params = EvictParams {
                    delete_options: Some(DeleteParams {
                        preconditions: Some(Preconditions {
                            uid: Some(uid.clone()),
                            resource_version: None,
                        }),
                        ..DeleteParams::default()
                    }),
                    ..EvictParams::default()
                };
                api.evict(name, &params).await.map(|_| ())
            }
            Self::NominateNode {
                namespace,
                name,
                node,
            } => {
                let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
                let patch = json!({"status": {"nominatedNodeName": node}});
                api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
        }
    }
}

/// Writes `PodScheduled=False` (reason `Unschedulable`) on `pod` as field manager
/// `manager`.
pub(super) async fn set_unschedulable(
    client: &Client,
    pod: &ObjectReference,
    message: &str,
    manager: &str,
) -> Result<(), kube::Error> {
    let (Some(ns), Some(name)) = (&pod.namespace, &pod.name) else {
        return Ok(());
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let patch = json!({
        "apiVersion": "v1", "kind": "Pod",
        "status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
        }]}
    });
    let pp = PatchParams::apply(manager).force();
    api.patch_status(name, &pp, &Patch::Apply(&patch))
        .await
        .map(|_| ())
}
