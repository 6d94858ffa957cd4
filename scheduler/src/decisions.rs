//! The scheduler's recent scheduling attempts, kept in memory for
//! `GET /debug/decisions` ([`crate::debug`]) and `kubectl tas decisions` / `gather`.
//!
//! The scheduling loop appends one [`DecisionRecord`] per attempt ([`DecisionLog::record`]):
//! the pod, how the attempt ended, the reasons per node count when no node fits (what the
//! pod's `FailedScheduling` Event says), the chosen node's NUMA zones and DRA devices,
//! the phase durations, the nodes evaluated and, when a span was exported, its trace id
//! to find it in the trace backend. A bind ends in the background: its task settles the
//! attempt's outcome by id ([`DecisionLog::settle`]), binding becoming bound or failed.
//!
//! The log is a ring of [`DecisionLog::capacity`] records (the scheduler config's
//! `decisionHistory`, [`DEFAULT_CAPACITY`] unless set): the oldest record goes when a new
//! one comes. It owns its records behind one short lock; readers get copies. Records hold
//! names, numbers and the scheduler's own messages only: no pod spec, no environment.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::cycle::dra::DraOutcome;
use crate::telemetry::{AttemptOutcome, AttemptRecord};

pub use tas_api::config::scheduler::DEFAULT_DECISION_HISTORY as DEFAULT_CAPACITY;

/// The endpoint's path.
pub const DECISIONS_PATH: &str = "/debug/decisions";

/// How a scheduling attempt ended.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum DecisionOutcome {
    /// A node was chosen and the bind is in flight (or its outcome not known yet).
    Binding,
    /// Bound to the node.
    Bound,
    /// A node was chosen but the bind failed; the pod is retried.
    BindFailed,
    /// No node fits; the pod waits with back-off.
    Unschedulable,
    /// No node fits; lower-priority pods are evicted from the nominated node.
    Preempting,
    /// The pod cannot be scheduled as written, or the decision failed.
    Error,
}

impl DecisionOutcome {
    /// The word the endpoint and `kubectl tas decisions` use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Binding => "binding",
            Self::Bound => "bound",
            Self::BindFailed => "bindFailed",
            Self::Unschedulable => "unschedulable",
            Self::Preempting => "preempting",
            Self::Error => "error",
        }
    }
}

/// One reason no node fits, and how many nodes gave it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReasonCount {
    /// The reason, as the Event words it.
    pub reason: String,
    /// Nodes that gave it.
    pub nodes: usize,
    /// The first few of them by name.
    pub named: Vec<String>,
}

/// The DRA devices allocated on the chosen node for the pod's claims.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DraDecision {
    /// `driver/pool/device` per allocated device.
    pub devices: Vec<String>,
    /// Whether they sit in the NUMA zones of the pod's CPUs and memory.
    pub aligned: bool,
    /// `aligned`, `unaligned` or `unknown` (devices without a NUMA attribute).
    pub outcome: String,
}

/// How long one phase of the attempt took.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTime {
    /// `snapshot`, `prefilter`, `filter`, `score`, `preempt` or `bind`.
    pub name: String,
    /// Seconds.
    pub seconds: f64,
}

/// One scheduling attempt.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// Ascending per scheduler process.
    pub id: u64,
    /// When the attempt started (RFC 3339, UTC).
    pub time: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Pod UID.
    pub uid: String,
    /// How it ended.
    pub outcome: DecisionOutcome,
    /// The chosen node, or the node nominated for preemption.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why no node fits (the `FailedScheduling` message), why the attempt failed, or why
    /// the bind failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When no node fits: per reason, the nodes that gave it, most frequent first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<ReasonCount>,
    /// The NUMA zones of the chosen node the kubelet would give the pod (absent: no
    /// aligned resource, or a node without topology).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<u32>>,
    /// The DRA devices chosen, for a pod with resource claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<DraDecision>,
    /// The winning score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<u32>,
    /// The phases back to back.
    #[serde(default)]
    pub phases: Vec<PhaseTime>,
    /// Nodes the decision looked at.
    pub nodes_evaluated: usize,
    /// Nodes that passed every filter.
    pub feasible_nodes: usize,
    /// The OpenTelemetry trace id of the attempt's `schedule` span (32 hex digits),
    /// when spans are exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl DecisionRecord {
    /// A record of pod `namespace/pod` (uid `uid`) at `time` that ended with `outcome`,
    /// without any detail yet.
    pub fn new(
        time: String,
        (namespace, pod, uid): (String, String, String),
        outcome: DecisionOutcome,
    ) -> Self {
        Self {
            id: 0,
            time,
            namespace,
            pod,
            uid,
            outcome,
            node: None,
            message: None,
            reasons: Vec::new(),
            zones: None,
            dra: None,
            score: None,
            phases: Vec::new(),
            nodes_evaluated: 0,
            feasible_nodes: 0,
            trace_id: None,
        }
    }

    /// `namespace/pod`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.pod)
    }

    /// The phases as they are measured.
    pub fn set_phases(&mut self, phases: &[(&'static str, Duration)]) {
        self.phases = phases
            .iter()
            .map(|(name, d)| PhaseTime {
                name: (*name).to_owned(),
                seconds: d.as_secs_f64(),
            })
            .collect();
    }
}

/// The record of a measured attempt (outcome `binding` for a chosen node), with the
/// trace id of its span when `span` is one.
pub fn from_attempt(
    attempt: &AttemptRecord<'_>,
    span: Option<&opentelemetry::Context>,
) -> DecisionRecord {
    use kube::ResourceExt as _;
    use opentelemetry::trace::TraceContextExt as _;
    let pod = attempt.pod;
    let who = (
        pod.namespace().unwrap_or_default(),
        pod.name_any(),
        pod.uid().unwrap_or_default(),
    );
    let mut r = DecisionRecord::new(rfc3339(attempt.started), who, DecisionOutcome::Error);
    r.nodes_evaluated = attempt.nodes;
    r.feasible_nodes = attempt.feasible;
    r.trace_id = span
        .map(|cx| cx.span().span_context().clone())
        .filter(|c| c.is_valid())
        .map(|c| c.trace_id().to_string());
    r.set_phases(attempt.phases);
    match &attempt.outcome {
        AttemptOutcome::Scheduled {
            node,
            zones,
            score,
            dra,
        } => {
            r.outcome = DecisionOutcome::Binding;
            r.node = Some((*node).to_owned());
            r.zones = zones.clone();
            r.score = Some(*score);
            r.dra = dra.map(|choice| DraDecision {
                devices: choice.devices(),
                aligned: choice.outcome == DraOutcome::Aligned,
                outcome: choice.outcome.label().to_owned(),
            });
        }
        AttemptOutcome::Unschedulable { reason } => {
            r.outcome = DecisionOutcome::Unschedulable;
            r.message = Some((*reason).to_owned());
        }
        AttemptOutcome::Error { message } => r.message = Some((*message).to_owned()),
    }
    r
}

/// RFC 3339 of `at`, UTC (the epoch for a time before it).
pub fn rfc3339(at: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(at)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}

/// The answer of [`DECISIONS_PATH`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct DecisionsReport {
    /// The `spec.schedulerName` this scheduler serves.
    pub scheduler_name: String,
    /// Whether this replica leads (only the leader schedules, so only its log fills).
    pub leader: bool,
    /// Records the log keeps at most.
    pub capacity: usize,
    /// Attempts recorded since the process started (older ones dropped out).
    pub recorded: u64,
    /// The records the query selected, newest first.
    pub decisions: Vec<DecisionRecord>,
}

/// What `GET /debug/decisions?namespace=&pod=&limit=` selects.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct DecisionQuery {
    /// Only pods of this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Only pods of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// At most this many, the newest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// A query that cannot be answered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QueryError {
    /// `limit=0`.
    #[error("limit must be at least 1")]
    ZeroLimit,
    /// An empty `namespace=` or `pod=`.
    #[error("{0} must not be empty (leave it out to match every {0})")]
    Empty(&'static str),
}

impl DecisionQuery {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), QueryError> {
        if self.limit == Some(0) {
            return Err(QueryError::ZeroLimit);
        }
        if self.namespace.as_deref() == Some("") {
            return Err(QueryError::Empty("namespace"));
        }
        if self.pod.as_deref() == Some("") {
            return Err(QueryError::Empty("pod"));
        }
        Ok(())
    }

    /// Whether `r` is selected (the limit aside).
    pub fn matches(&self, r: &DecisionRecord) -> bool {
        self.namespace.as_deref().is_none_or(|ns| r.namespace == ns)
            && self.pod.as_deref().is_none_or(|p| r.pod == p)
    }

    /// `namespace=..&pod=..&limit=..` of the parameters set, percent-encoded: what
    /// [`crate::debug::decisions_query`] reads back as this query.
    pub fn to_query_string(&self) -> String {
        let encode = |v: &str| {
            v.bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
        let mut out = Vec::new();
        if let Some(ns) = &self.namespace {
            out.push(format!("namespace={}", encode(ns)));
        }
        if let Some(pod) = &self.pod {
            out.push(format!("pod={}", encode(pod)));
        }
        if let Some(limit) = self.limit {
            out.push(format!("limit={limit}"));
        }
        out.join("&")
    }

    /// The selected records of `newest_first`, at most `limit`.
    pub fn select<'a>(
        &self,
        newest_first: impl IntoIterator<Item = &'a DecisionRecord>,
    ) -> Vec<DecisionRecord> {
        newest_first
            .into_iter()
            .filter(|r| self.matches(r))
            .take(self.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }
}

/// The ring of recent attempts; see the module documentation.
#[derive(Debug)]
pub struct DecisionLog {
    capacity: usize,
    inner: Mutex<Ring>,
}

#[derive(Debug, Default)]
struct Ring {
    /// Oldest first; ids ascending.
    records: VecDeque<DecisionRecord>,
    /// The next id, also the number recorded so far.
    next: u64,
}

impl DecisionLog {
    /// A log keeping at most `capacity` records (0: none).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Ring {
                records: VecDeque::with_capacity(capacity.min(DEFAULT_CAPACITY as usize)),
                next: 0,
            }),
        }
    }

    /// Records kept at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether anything is kept (worth building a record for).
    pub fn is_on(&self) -> bool {
        self.capacity > 0
    }

    /// Appends `record` under a new id, which it returns, dropping the oldest record when
    /// full.
    pub fn record(&self, mut record: DecisionRecord) -> u64 {
        let mut ring = self.inner.lock();
        let id = ring.next;
        ring.next += 1;
        if self.capacity == 0 {
            return id;
        }
        record.id = id;
        while ring.records.len() >= self.capacity {
            ring.records.pop_front();
        }
        ring.records.push_back(record);
        id
    }

    /// Changes the record `id` (if still kept): the bind's outcome, its message and
    /// duration.
    pub fn settle(
        &self,
        id: u64,
        outcome: DecisionOutcome,
        message: Option<String>,
        bind: Option<Duration>,
    ) {
        let mut ring = self.inner.lock();
        let Ok(at) = ring.records.binary_search_by_key(&id, |r| r.id) else {
            return;
        };
        let r = &mut ring.records[at];
        r.outcome = outcome;
        if message.is_some() {
            r.message = message;
        }
        if let Some(d) = bind {
            r.phases.retain(|p| p.name != "bind");
            r.phases.push(PhaseTime {
                name: "bind".into(),
                seconds: d.as_secs_f64(),
            });
        }
    }

    /// Attempts recorded since the start.
    pub fn recorded(&self) -> u64 {
        self.inner.lock().next
    }

    /// The records `query` selects, newest first.
    pub fn query(&self, query: &DecisionQuery) -> Vec<DecisionRecord> {
        let ring = self.inner.lock();
        query.select(ring.records.iter().rev())
    }
}

#[cfg(test)]
mod tests;
