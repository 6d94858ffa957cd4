//! The bind phase: a pod reserved on its node ([`crate::reserve`]) is bound through
//! the `pods/binding` subresource by the [`crate::writer`], whose outcome a background
//! task handles. A failed bind undoes the reservation and requeues the pod. A pod is
//! never bound twice: it is marked in flight before its bind is queued and only leaves
//! that state when the bound pod is observed or the bind failed. A bind the writer
//! refuses because this process no longer leads for long enough is undone and retried
//! at once, by whichever replica leads next.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::events::EventSender;
use crate::reserve::unreserve;
use crate::shared::Shared;
use crate::telemetry::BindRecord;
use crate::writer::{Request, WriteError, Writer};

/// Where a bind goes, and the attempt span it belongs to.
pub(crate) struct BindTarget {
    /// The node.
    pub(crate) node: String,
    /// The scheduling attempt's span.
    pub(crate) attempt: Option<opentelemetry::Context>,
}

/// Queues the bind of an assumed pod on the writer (waiting while its queue is full)
/// and handles the outcome in a background task.
pub(crate) async fn start(
    shared: &Arc<Shared>,
    events: &EventSender,
    writer: &Writer,
    pod: Arc<Pod>,
    uid: String,
    target: BindTarget,
) {
    let (sent, sent_at) = (Instant::now(), SystemTime::now());
    let reply = writer
        .submit(Request::Bind {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            uid: uid.clone(),
            node: target.node.clone(),
        })
        .await;
    let (shared, events) = (shared.clone(), events.clone());
    tokio::spawn(async move {
        let outcome = reply.outcome().await;
        let record = BindRecord {
            pod: &pod,
            node: &target.node,
            started: sent_at,
            duration: sent.elapsed(),
            pod_scheduling_seconds: None,
            error: None,
        };
        finish(&shared, &events, &uid, &target, record, outcome);
    });
}

fn finish(
    shared: &Shared,
    events: &EventSender,
    uid: &str,
    target: &BindTarget,
    mut record: BindRecord<'_>,
    outcome: Result<(), WriteError>,
) {
    let (pod, node) = (record.pod, target.node.as_str());
    let key = || format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    match outcome {
        Ok(()) => {
            shared.metrics.attempt("scheduled");
            if let Some(created) = &pod.metadata.creation_timestamp {
                let age = k8s_openapi::jiff::Timestamp::now().duration_since(created.0);
                let seconds = age.as_secs_f64().max(0.0);
                shared.metrics.e2e_latency.observe(seconds);
                record.pod_scheduling_seconds = Some(seconds);
            }
            shared.telemetry.bind(target.attempt.as_ref(), &record);
            tracing::debug!(pod = %key(), node, "bound");
            events.scheduled(pod, node);
        }
        Err(WriteError::NotLeader) => {
            // Nothing was sent.
            unreserve(shared, uid, node);
            shared.queue.lock().retry_now(uid);
        }
        Err(e) => {
            shared.metrics.bind_errors.inc();
            shared.metrics.attempt("error");
            record.error = Some((e.code(), e.to_string()));
            shared.telemetry.bind(target.attempt.as_ref(), &record);
            unreserve(shared, uid, node);
            let gone = matches!(e.code(), Some(404 | 409));
            tracing::warn!(pod = %key(), node, error = %e, "bind failed");
            {
                let mut q = shared.queue.lock();
                if gone {
                    // Deleted, or already bound (by us earlier or someone else): the
                    // watches settle what is true; never bind again.
                    q.remove(uid);
                } else {
                    q.unschedulable(uid, Instant::now());
                }
            }
            shared.wake.notify_one();
        }
    }
}
