//! Kubernetes Events on the TopologyAwareScheduling object: one per condition change
//! (Normal, or Warning when it turns bad) and one Warning per failed reconcile.
//!
//! Publishing is best effort: a failure to record an Event is logged, never fails the
//! reconcile. The recorder folds repeats of one event into a series, so a permanent
//! error reported on every node-label change does not flood the namespace.

use super::conditions::Change;
use crate::context::Context;
use kube::Resource;
use kube::runtime::events::{Event, EventType};
use tas_api::tas::status::condition_type::{AVAILABLE, DEGRADED};
use tas_api::tas::{TopologyAwareScheduling, TopologyAwareSchedulingStatus};

/// Events API limit on `note`.
const MAX_NOTE: usize = 1024;

/// One event per changed condition.
pub async fn condition_changes(
    ctx: &Context,
    cr: &TopologyAwareScheduling,
    changes: &[Change<'_>],
) {
    for change in changes {
        let after = change.after;
        let bad = (after.type_ == DEGRADED && after.status == "True")
            || (after.type_ == AVAILABLE && after.status == "False");
        let from = change
            .before
            .map_or_else(|| "unset".to_owned(), |b| b.status.clone());
        let note = format!(
            "{} {} → {}: {}",
            after.type_, from, after.status, after.message
        );
        publish(
            ctx,
            cr,
            if bad {
                EventType::Warning
            } else {
                EventType::Normal
            },
            &after.reason,
            "UpdateStatus",
            note,
        )
        .await;
    }
}

/// A Warning for a failed reconcile step.
pub async fn error(ctx: &Context, cr: &TopologyAwareScheduling, reason: &str, message: String) {
    publish(ctx, cr, EventType::Warning, reason, "Reconcile", message).await;
}

/// A Normal event.
pub async fn normal(
    ctx: &Context,
    cr: &TopologyAwareScheduling,
    reason: &str,
    action: &str,
    message: String,
) {
    publish(ctx, cr, EventType::Normal, reason, action, message).await;
}

async fn publish(
    ctx: &Context,
    cr: &TopologyAwareScheduling,
    type_: EventType,
    reason: &str,
    action: &str,
    mut note: String,
) {
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &cr.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "could not record an Event");
    }
}

/// A Warning per node whose kubelet configuration issue is new in `after` (or changed
/// reason or path): the node, the reason, the path tried and what is wrong.
pub async fn new_kubelet_config_issues(
    ctx: &Context,
    cr: &TopologyAwareScheduling,
    before: &TopologyAwareSchedulingStatus,
    after: &TopologyAwareSchedulingStatus,
) {
    let known: std::collections::BTreeSet<(&str, &str, &str)> = before
        .node_groups
        .iter()
        .flat_map(|g| &g.kubelet_config_issues)
        .map(|i| (i.node.as_str(), i.reason.as_str(), i.path.as_str()))
        .collect();
    for group in &after.node_groups {
        for issue in &group.kubelet_config_issues {
            if known.contains(&(
                issue.node.as_str(),
                issue.reason.as_str(),
                issue.path.as_str(),
            )) {
                continue;
            }
            let note = format!(
                "node {} (node group {}): {} [{}]",
                issue.node, group.name, issue.message, issue.path
            );
            let reason = format!("Kubelet{}", issue.reason);
            publish(
                ctx,
                cr,
                EventType::Warning,
                &reason,
                "ReadKubeletConfig",
                note,
            )
            .await;
        }
    }
}
