//! Carrying out a preemption plan: evict the victims through the Eviction API (which
//! enforces PodDisruptionBudgets), nominate the preemptor to the node, and say so in
//! Events.
//!
//! Plans are tried best first. Within a plan, victims a budget protects are evicted
//! first, so a refusal (HTTP 429) most likely comes before anything was evicted; the
//! next plan is then tried. A victim already gone (404) or replaced by a namesake (409
//! on the UID precondition) counts as evicted. The preemptor keeps a
//! [`super::Nomination`] from the moment its victims are chosen; it is
//! dropped when no plan could be carried out, so a later cycle may try again.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::{Nomination, Plan};
use crate::events::EventSender;
use crate::filter::PodUsage;
use crate::pod_meta::PodMeta;
use crate::scheduler::LeaderCheck;
use crate::shared::Shared;

/// Why a plan could not be carried out.
#[derive(Debug, thiserror::Error)]
enum PlanError {
    /// A PodDisruptionBudget refused an eviction.
    #[error("eviction of {0} refused by a PodDisruptionBudget")]
    Refused(String),
    /// Any other API error.
    #[error("evicting {0}: {1}")]
    Api(String, #[source] kube::Error),
    /// Leadership was lost.
    #[error("no longer the leader")]
    NotLeader,
}

/// Records the nomination for `plan` (before its evictions start, so the next
/// decisions already hold the room).
pub fn nominate_locally(shared: &Shared, usage: &PodUsage, plan: &Plan) {
    let nomination = Nomination {
        node: plan.node.clone(),
        usage: usage.clone(),
        victims: plan.victims.iter().map(|v| v.uid.clone()).collect(),
        since: Instant::now(),
        victims_gone_at: None,
    };
    shared
        .nominations
        .lock()
        .insert(&usage.meta.uid, nomination);
}

/// Carries out the first plan that works; see the module documentation.
pub async fn run(
    client: Client,
    shared: Arc<Shared>,
    events: EventSender,
    preemptor: Arc<Pod>,
    usage: PodUsage,
    plans: Vec<Plan>,
    is_leader: LeaderCheck,
) {
    let uid = usage.meta.uid.clone();
    let key = usage.meta.key();
    for (i, plan) in plans.iter().enumerate() {
        if i > 0 {
            nominate_locally(&shared, &usage, plan);
        }
        match evict_all(&client, &shared, &events, &key, plan, &is_leader).await {
            Ok(()) => {
                set_nominated_node(&client, &preemptor, &plan.node).await;
                let victims: Vec<String> = plan.victims.iter().map(|v| v.key()).collect();
                tracing::info!(pod = %key, node = %plan.node, victims = ?victims, "preempted");
                events.preempting(&preemptor, &plan.node, &victims);
                shared.metrics.attempt("preempted");
                return;
            }
            Err(PlanError::NotLeader) => break,
            Err(e) => {
                tracing::info!(pod = %key, node = %plan.node, error = %e, "preemption plan abandoned");
            }
        }
    }
    shared.nominations.lock().remove(&uid);
    shared.wake.notify_one();
}

async fn evict_all(
    client: &Client,
    shared: &Shared,
    events: &EventSender,
    preemptor: &str,
    plan: &Plan,
    is_leader: &LeaderCheck,
) -> Result<(), PlanError> {
    let mut order: Vec<&Arc<PodMeta>> = plan.victims.iter().collect();
    let protected = |v: &PodMeta| shared.budgets.read().covers(v);
    order.sort_by_key(|v| !protected(v));
    for victim in order {
        if !is_leader() {
            return Err(PlanError::NotLeader);
        }
        let api: Api<Pod> = Api::namespaced(client.clone(), &victim.namespace);
        let params = EvictParams {
            delete_options: Some(DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(victim.uid.clone()),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            }),
            ..EvictParams::default()
        };
        // Fenced like a bind: sent while leading for longer than this timeout.
        let timeout = shared.settings.leader_election.write_timeout();
        let evicted = tokio::time::timeout(timeout, api.evict(&victim.name, &params))
            .await
            .unwrap_or_else(|_elapsed| {
                Err(kube::Error::Service(
                    format!("eviction timed out after {timeout:?}").into(),
                ))
            });
        match evicted {
            Ok(_) => events.preempted(victim, preemptor, &plan.node),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(kube::Error::Api(s)) if s.code == 429 => {
                return Err(PlanError::Refused(victim.key()));
            }
            Err(e) => return Err(PlanError::Api(victim.key(), e)),
        }
    }
    Ok(())
}

/// `status.nominatedNodeName`, as kube-scheduler sets it: tells users (and other
/// schedulers) where the pod is headed.
async fn set_nominated_node(client: &Client, pod: &Pod, node: &str) {
    let ns = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let patch = json!({"status": {"nominatedNodeName": node}});
    if let Err(e) = api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::debug!(pod = %pod.name_any(), error = %e, "setting nominatedNodeName");
    }
}
