//! The status conditions, decided from observed facts by pure functions, and the
//! Kubernetes rule for `lastTransitionTime`.
//!
//! ```text
//! Facts (operand rollout counts, paused, the reconcile's problem, stale nodes)
//!   ├─ available()   Available   True when every agent pod and ≥ 1 scheduler replica is ready
//!   │                            and the node groups select ≥ 1 node
//!   ├─ progressing() Progressing True while a rollout is under way; False/Paused when paused
//!   ├─ degraded()    Degraded    True when something needs a human (the problem's reason)
//!   └─ ready()       Ready       the three above in one, for GitOps tools: True when
//!                                Available, not rolling out and not Degraded
//!        └─ merge(existing conditions, now) ─► conditions with lastTransitionTime kept
//!                                              unless the status flipped
//! ```
//!
//! A stale NodeResourceTopology (not written for more than `missedHeartbeats` heartbeat
//! periods, see [`super::freshness`]) makes the stack `Degraded=True` with reason
//! `StaleTopology`, naming the nodes: their agents stopped writing, and the scheduler
//! keeps counting every pod bound there since the last write against those nodes. A
//! node *without* an object is only mentioned in the message: it is almost always a
//! node whose agent is starting, which `Available` (`UpdaterNotReady`) already reports.
//! `status.nodeGroups[].staleNodes` lists both kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tas_api::tas::Condition;
use tas_api::tas::status::condition_type::{AVAILABLE, DEGRADED, PROGRESSING, READY};

/// Reason of a condition in its expected state.
pub const AS_EXPECTED: &str = "AsExpected";
/// `Progressing=False` while `spec.paused` is true.
pub const PAUSED: &str = "Paused";
/// `Progressing=True` while an operand rolls out.
pub const ROLLING: &str = "Rolling";
/// `Available=False`: node agents missing or not ready.
pub const UPDATER_NOT_READY: &str = "UpdaterNotReady";
/// `Available=False`: the node groups select no node at all.
pub const NO_NODES_SELECTED: &str = "NoNodesSelected";
/// `Available=False`: no scheduler replica ready.
pub const SCHEDULER_NOT_READY: &str = "SchedulerNotReady";
/// `Degraded=True`: NodeResourceTopology objects not written for too long.
pub const STALE_TOPOLOGY: &str = "StaleTopology";

/// Rollout counts of one workload (a DaemonSet or the Deployment), as observed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workload {
    /// Object name.
    pub name: String,
    /// Whether the object exists.
    pub exists: bool,
    /// Pods it should run (DaemonSet: desiredNumberScheduled; Deployment: spec.replicas).
    pub desired: i32,
    /// Ready pods.
    pub ready: i32,
    /// Pods running the current template.
    pub updated: i32,
    /// Available pods.
    pub available: i32,
    /// Pods of any template (Deployment: status.replicas; DaemonSet: currentNumberScheduled).
    pub current: i32,
    /// The controller has seen the latest spec (status.observedGeneration ≥ generation).
    pub observed: bool,
}

impl Workload {
    /// Whether the last change is fully rolled out.
    pub fn rolled_out(&self) -> bool {
        self.exists
            && self.observed
            && self.updated >= self.desired
            && self.available >= self.desired
            && self.current <= self.desired
    }
}

/// Why the stack needs attention: the `Degraded` reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// CamelCase reason.
    pub reason: String,
    /// What happened and what to do, for a human.
    pub message: String,
}

/// Everything the conditions are decided from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// `spec.paused`.
    pub paused: bool,
    /// The node agent DaemonSets, one per node group.
    pub daemon_sets: Vec<Workload>,
    /// The scheduler Deployment.
    pub scheduler: Workload,
    /// What went wrong in this reconcile, if anything.
    pub problem: Option<Problem>,
    /// Nodes without a fresh NodeResourceTopology (sorted; all of them, not capped).
    pub stale_nodes: Vec<String>,
    /// Nodes selected by the node groups.
    pub desired_nodes: usize,
    /// Nodes whose object exists but was not written for too long (sorted, with the
    /// time since the last write).
    pub stale_topology: Vec<(String, std::time::Duration)>,
    /// Heartbeat periods allowed without a write (for the message).
    pub missed_heartbeats: u32,
    /// Node → why its agent pod is not ready (sorted; at most
    /// [`super::agent_problems::MAX_AGENT_PROBLEMS`]), named in `UpdaterNotReady`.
    pub agent_problems: Vec<(String, String)>,
    /// `namespace/name` of the Secret the scheduler pods mount their serving
    /// certificate from (`spec.observability.servingCertificate: Secret`), if any.
    pub scheduler_serving_secret: Option<(String, String)>,
}

/// A condition as decided, before timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// Condition type.
    pub type_: &'static str,
    /// True or False.
    pub status: bool,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl Decided {
    fn new(type_: &'static str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_,
            status,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// `"; on node n1: ...; on node n2: ..."` (without the first `"; "` when no DaemonSet
/// is short of ready pods), or nothing.
fn agent_problems_text(problems: &[(String, String)], first: bool) -> String {
    let text: String = problems
        .iter()
        .map(|(node, why)| format!("; on node {node}: {why}"))
        .collect();
    match first {
        true => text.trim_start_matches("; ").to_owned(),
        false => text,
    }
}

/// All the conditions, in a stable order.
pub fn decide(facts: &Facts) -> Vec<Decided> {
    let (a, p, d) = (available(facts), progressing(facts), degraded(facts));
    let r = ready(&a, &p, &d);
    vec![a, p, d, r]
}

/// `Ready`, the one condition kstatus (Flux) and Argo CD read: True when the stack is
/// `Available`, no rollout is under way (`Progressing` not True; paused counts as
/// settled) and nothing is `Degraded`; else False with the reason and message of the
/// first of those that fails, so a GitOps tool shows what to fix. Written with the
/// generation reconciled, like every condition, so a tool comparing `observedGeneration`
/// with `metadata.generation` never reads a stale True.
pub fn ready(available: &Decided, progressing: &Decided, degraded: &Decided) -> Decided {
    let blocking = if !available.status {
        Some(available)
    } else if progressing.status {
        Some(progressing)
    } else if degraded.status {
        Some(degraded)
    } else {
        None
    };
    match blocking {
        Some(c) => Decided::new(
            READY,
            false,
            &c.reason,
            format!(
                "{}={}: {}",
                c.type_,
                if c.status { "True" } else { "False" },
                c.message
            ),
        ),
        None => Decided::new(READY, true, AS_EXPECTED, available.message.clone()),
    }
}

/// `Available`: every node agent DaemonSet has all its pods ready, the scheduler has
/// at least one ready replica, and the node groups select at least one node.
pub fn available(f: &Facts) -> Decided {
    let not_ready: Vec<String> = f
        .daemon_sets
        .iter()
        .filter(|d| !d.exists || d.ready < d.desired)
        .map(|d| {
            if d.exists {
                format!("{} {}/{} ready", d.name, d.ready, d.desired)
            } else {
                format!("{} not created", d.name)
            }
        })
        .collect();
    if !not_ready.is_empty() || !f.agent_problems.is_empty() {
        return Decided::new(
            AVAILABLE,
            false,
            UPDATER_NOT_READY,
            format!(
                "node agents not ready: {}{}",
                not_ready.join(", "),
                agent_problems_text(&f.agent_problems, not_ready.is_empty())
            ),
        );
    }
    let s = &f.scheduler;
    if !s.exists || s.ready < 1 {
        let what = match (&f.scheduler_serving_secret, s.exists) {
            (Some((ns, secret)), true) => format!(
                "0/{} replicas ready; {}",
                s.desired,
                crate::desired::serving_cert::missing_secret_hint(ns, secret)
            ),
            (None, true) => format!("0/{} replicas ready", s.desired),
            (_, false) => "not created".to_owned(),
        };
        return Decided::new(
            AVAILABLE,
            false,
            SCHEDULER_NOT_READY,
            format!("scheduler Deployment {} {what}", s.name),
        );
    }
    if f.desired_nodes == 0 {
        return Decided::new(
            AVAILABLE,
            false,
            NO_NODES_SELECTED,
            format!(
                "the {} node group(s) select no node: no node agent runs and no node publishes a NodeResourceTopology; label nodes to match spec.nodeGroups[].nodeSelector",
                f.daemon_sets.len()
            ),
        );
    }
    let agents: i32 = f.daemon_sets.iter().map(|d| d.ready).sum();
    Decided::new(
        AVAILABLE,
        true,
        AS_EXPECTED,
        format!(
            "{agents} node agent(s) ready in {} node group(s); scheduler {}/{} replicas ready",
            f.daemon_sets.len(),
            s.ready,
            s.desired
        ),
    )
}

/// `Progressing`: a rollout is under way (or `Paused`).
pub fn progressing(f: &Facts) -> Decided {
    if f.paused {
        return Decided::new(
            PROGRESSING,
            false,
            PAUSED,
            "spec.paused is true: the operator applies, prunes and restores nothing until it is set back to false",
        );
    }
    let rolling: Vec<String> = f
        .daemon_sets
        .iter()
        .chain(std::iter::once(&f.scheduler))
        .filter(|w| !w.rolled_out())
        .map(|w| {
            if w.exists {
                format!(
                    "{} {}/{} updated",
                    w.name,
                    w.updated.min(w.desired),
                    w.desired
                )
            } else {
                format!("{} being created", w.name)
            }
        })
        .collect();
    if rolling.is_empty() {
        Decided::new(
            PROGRESSING,
            false,
            AS_EXPECTED,
            "every operand is rolled out",
        )
    } else {
        Decided::new(
            PROGRESSING,
            true,
            ROLLING,
            format!("rolling out: {}", rolling.join(", ")),
        )
    }
}

/// `Degraded`: the reconcile's problem if there is one, else stale topology; nodes
/// without an object only in the message.
pub fn degraded(f: &Facts) -> Decided {
    if let Some(p) = &f.problem {
        return Decided::new(DEGRADED, true, &p.reason, p.message.clone());
    }
    if !f.stale_topology.is_empty() {
        let named: Vec<String> = f
            .stale_topology
            .iter()
            .map(|(node, age)| format!("{node} ({} ago)", super::freshness::human_age(*age)))
            .collect();
        return Decided::new(
            DEGRADED,
            true,
            STALE_TOPOLOGY,
            format!(
                "{} node(s) have a NodeResourceTopology not written for more than {} heartbeat periods: {}; their node agents stopped (check the tas-updater pods on those nodes); the scheduler keeps counting the pods bound there since the last write, see status.nodeGroups[].staleNodes",
                named.len(),
                f.missed_heartbeats,
                name_some(&named, 5)
            ),
        );
    }
    let message = if f.stale_nodes.is_empty() {
        "no problems found".to_owned()
    } else {
        format!(
            "{} of {} node(s) have no fresh NodeResourceTopology yet ({}); their node agents are starting or not ready, see status.nodeGroups[].staleNodes",
            f.stale_nodes.len(),
            f.desired_nodes,
            name_some(&f.stale_nodes, 5)
        )
    };
    Decided::new(DEGRADED, false, AS_EXPECTED, message)
}

/// "a, b, c and 4 more".
pub fn name_some(names: &[String], max: usize) -> String {
    let mut out = names
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        out.push_str(&format!(" and {} more", names.len() - max));
    }
    out
}

/// The conditions to write: `decided` with `lastTransitionTime` carried over from
/// `existing` when the status did not flip, else `now`.
pub fn merge(
    existing: &[Condition],
    decided: Vec<Decided>,
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    decided
        .into_iter()
        .map(|d| {
            let status = if d.status { "True" } else { "False" };
            let last_transition_time = existing
                .iter()
                .find(|c| c.type_ == d.type_ && c.status == status)
                .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
            Condition {
                type_: d.type_.to_owned(),
                status: status.to_owned(),
                reason: d.reason,
                message: d.message,
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// A condition whose status or reason changed: worth a Kubernetes Event.
#[derive(Debug, Clone, PartialEq)]
pub struct Change<'a> {
    /// The condition before (None when new).
    pub before: Option<&'a Condition>,
    /// The condition after.
    pub after: &'a Condition,
}

/// The conditions in `after` whose status or reason differ from `before`; `Ready` only
/// sums the others up, whose own changes already say what happened.
pub fn changes<'a>(before: &'a [Condition], after: &'a [Condition]) -> Vec<Change<'a>> {
    after
        .iter()
        .filter(|a| a.type_ != READY)
        .filter_map(|a| {
            let b = before.iter().find(|b| b.type_ == a.type_);
            let changed = b.is_none_or(|b| b.status != a.status || b.reason != a.reason);
            changed.then_some(Change {
                before: b,
                after: a,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
