//! Carrying out a preemption plan: evict the victims through the Eviction API (which
//! enforces PodDisruptionBudgets), nominate the preemptor to the node, and say so in
//! Events — every write through the [`crate::writer`], which fences each eviction.
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
use kube::ResourceExt;

use super::{Nomination, Plan};
use crate::events::EventSender;
use crate::filter::PodUsage;
use crate::pod_meta::PodMeta;
use crate::shared::Shared;
use crate::writer::{Request, WriteError, Writer};

/// Why a plan could not be carried out.
#[derive(Debug, thiserror::Error)]
enum PlanError {
    /// A PodDisruptionBudget refused an eviction.
    #[error("eviction of {0} refused by a PodDisruptionBudget")]
    Refused(String),
    /// Any other API error, or no answer in time.
    #[error("evicting {0}: {1}")]
    Api(String, #[source] WriteError),
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
    writer: Writer,
    shared: Arc<Shared>,
    events: EventSender,
    preemptor: Arc<Pod>,
    usage: PodUsage,
    plans: Vec<Plan>,
) {
    let uid = usage.meta.uid.clone();
    let key = usage.meta.key();
    for (i, plan) in plans.iter().enumerate() {
        if i > 0 {
            nominate_locally(&shared, &usage, plan);
        }
        match evict_all(&writer, &shared, &events, &key, plan).await {
            Ok(()) => {
                set_nominated_node(&writer, &preemptor, &plan.node).await;
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
    writer: &Writer,
    shared: &Shared,
    events: &EventSender,
    preemptor: &str,
    plan: &Plan,
) -> Result<(), PlanError> {
    let mut order: Vec<&Arc<PodMeta>> = plan.victims.iter().collect();
    let protected = |v: &PodMeta| shared.budgets.read().covers(v);
    order.sort_by_key(|v| !protected(v));
    for victim in order {
        let evicted = writer
            .write(Request::Evict {
                namespace: victim.namespace.clone(),
                name: victim.name.clone(),
                uid: victim.uid.clone(),
            })
            .await;
        match evicted {
            Ok(()) => events.preempted(victim, preemptor, &plan.node),
            Err(WriteError::NotLeader) => return Err(PlanError::NotLeader),
            Err(e) if matches!(e.code(), Some(404 | 409)) => {}
            Err(e) if e.code() == Some(429) => {
                return Err(PlanError::Refused(victim.key()));
            }
            Err(e) => return Err(PlanError::Api(victim.key(), e)),
        }
    }
    Ok(())
}

/// `status.nominatedNodeName`, as kube-scheduler sets it: tells users (and other
/// schedulers) where the pod is headed.
async fn set_nominated_node(writer: &Writer, pod: &Pod, node: &str) {
    let request = Request::NominateNode {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        node: node.to_owned(),
    };
    if let Err(e) = writer.write(request).await {
        tracing::debug!(pod = %pod.name_any(), error = %e, "setting nominatedNodeName");
    }
}
