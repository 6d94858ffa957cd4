//! The resync of one dirty node: decide whether its latest NRT object can replace the
//! pessimistic view, and which reservations survive the replacement.
//!
//! Decision, in order:
//!
//! 1. The NRT carries a fingerprint of a known method and version, and it equals the
//!    fingerprint of the confirmed pods plus some of the unconfirmed ones (see
//!    [`super::confirm`]) → **match**: the reservations of the pods it reflects are
//!    dropped, the others (assumed but not bound, bound but not in it) carried over.
//! 2. A valid fingerprint that differs → **mismatch**: the node stays dirty.
//! 3. No fingerprint, or one that cannot be compared (malformed, other version, unknown
//!    method) → the NRT is trusted once the node has been dirty for one resync period
//!    (**no_fingerprint**); until then nothing happens (**deferred**).
//! 4. Whatever the fingerprint says, a node still dirty after `max_staleness` is
//!    **forced** clean from its latest NRT — except for the reservations of bound,
//!    unfinished pods that a matching fingerprint proves the object does not count
//!    yet: those pods are bound to the node and not admitted yet (the kubelet, or the
//!    agent reporting it, lags), so the kubelet will still take their room, or fail
//!    them (they finish) or they are deleted. Dropping them gave their room to the next
//!    pod, which the kubelet then rejected once it admitted them: a lagging node agent
//!    (a write lost under load, published again only on the node's next change) turned
//!    into `TopologyAffinityError`s. Such a node stays dirty, pessimistic only by pods
//!    really bound to it, until an object counts them or they end.
//! 5. Except when the latest NRT's writer stopped: its `tas.dev/heartbeat` attribute
//!    ([`tas_api::nrt::heartbeat`]) is older than `missed_heartbeats` of the periods it
//!    promises. Where 2, 3 or 4 would keep it dirty or trust it, the view is rebuilt
//!    from it keeping every reservation of a pod bound after its last write, or less
//!    than `max_staleness` before it (**writer_stopped**): the node is
//!    never forced clean on an object that cannot have seen those pods, and they keep
//!    counting against the zones until a fresh object arrives (or they are deleted).
//!    Objects without the attribute (other writers) follow 3 and 4.
//!
//! Trusting an NRT without a match (3 and 4) keeps the reservations of pods the node
//! agent cannot have reported yet: assumed pods not bound (unless the reservation
//! itself is older than `max_staleness`: binding never takes that long, so it was
//! leaked), pods bound less than one resync period ago, and pods holding exclusive
//! resources bound after this process received the NRT (the agent publishes a new
//! object whenever such a pod is admitted, so none has come since: the agent is slow,
//! frozen or gone, and the object cannot count them). Finished pods and other pods
//! bound longer ago are assumed to be in the NRT. Every carried reservation keeps its
//! age; only the last kind can keep a node dirty past `max_staleness`, until the agent
//! publishes again or the pods end.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use tas_api::nrt::heartbeat::Heartbeat;

use super::config::CacheConfig;
use super::confirm::{self, Verdict};
use super::node::{NodeEntry, Reservation};
use super::pod::ObservedPod;

/// What a resync did with one dirty node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResyncOutcome {
    /// The fingerprints matched: the NRT replaced the view.
    Match,
    /// The fingerprints differ: the node stays dirty.
    Mismatch,
    /// No usable fingerprint, dirty for a resync period: the NRT replaced the view.
    NoFingerprint,
    /// No usable fingerprint yet and dirty for less than a resync period.
    Deferred,
    /// Dirty for `max_staleness`: the NRT replaced the view without a match.
    Forced,
    /// The NRT would have been trusted without a match, but its writer stopped: the view
    /// was rebuilt from it keeping every pod bound after its last write.
    WriterStopped,
}

impl ResyncOutcome {
    /// Every outcome.
    pub const ALL: [Self; 6] = [
        Self::Match,
        Self::Mismatch,
        Self::NoFingerprint,
        Self::Deferred,
        Self::Forced,
        Self::WriterStopped,
    ];

    /// The metric label value.
    pub fn as_label(self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::Mismatch => "mismatch",
            Self::NoFingerprint => "no_fingerprint",
            Self::Deferred => "deferred",
            Self::Forced => "forced",
            Self::WriterStopped => "writer_stopped",
        }
    }
}

/// The resync of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeResync {
    /// Node name.
    pub node: String,
    /// What happened.
    pub outcome: ResyncOutcome,
    /// How long the node had been dirty.
    pub dirty_for: Duration,
    /// Reservations re-applied on the fresh view; the node is still dirty if non-zero.
    pub carried_over: usize,
}

/// Every dirty node's resync, in no particular order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResyncReport {
    /// One entry per node that was dirty.
    pub nodes: Vec<NodeResync>,
}

impl ResyncReport {
    /// The outcome for `node`, if it was dirty.
    pub fn outcome(&self, node: &str) -> Option<ResyncOutcome> {
        self.nodes
            .iter()
            .find(|n| n.node == node)
            .map(|n| n.outcome)
    }

    /// How many nodes had `outcome`.
    pub fn count(&self, outcome: ResyncOutcome) -> usize {
        self.nodes.iter().filter(|n| n.outcome == outcome).count()
    }
}

/// When the writer of a node's latest NRT last wrote it, as an instant of this
/// process, if that writer has stopped (see the module documentation); `None` while it
/// is alive or makes no promise. `now` and `wall` are the same moment on both clocks.
pub(super) fn stopped_writer_since(
    entry: &NodeEntry,
    now: Instant,
    wall: SystemTime,
    config: &CacheConfig,
) -> Option<StoppedWriter> {
    let heartbeat = Heartbeat::of(entry.latest()?)?;
    if !heartbeat.stopped(wall, config.missed_heartbeats) {
        return None;
    }
    let age = heartbeat.age(wall);
    Some(StoppedWriter {
        at: heartbeat.at,
        age,
        // Before the process started: every pod it saw bound came later.
        last_write: now.checked_sub(age),
    })
}

/// A stopped writer's last write.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StoppedWriter {
    /// When, as the object states it.
    pub(crate) at: SystemTime,
    /// How long ago.
    pub(crate) age: Duration,
    /// When, on this process's clock; `None` when before any instant it can name.
    pub(crate) last_write: Option<Instant>,
}

/// Resyncs `entry` if it is dirty; returns what happened and the UIDs of the dropped
/// reservations. `wall` is `now` on the wall clock, for the NRT's heartbeat.
pub(crate) fn resync_node(
    node: &str,
    entry: &mut NodeEntry,
    now: Instant,
    wall: SystemTime,
    config: &CacheConfig,
) -> Option<(NodeResync, Vec<String>)> {
    let dirty_for = now.saturating_duration_since(entry.dirty_since()?);
    let stale = |entry: &NodeEntry| {
        entry
            .dirty_since()
            .is_some_and(|since| now.saturating_duration_since(since) >= config.max_staleness)
    };
    let stopped = stopped_writer_since(entry, now, wall, config);
    let received = entry.latest_at();
    // Trusting the NRT without a match: for a stopped writer, only what it saw.
    let trusting = |r: &Reservation, pod: Option<&ObservedPod>| match stopped {
        Some(writer) => kept_when_stopped(r, pod, now, writer.last_write, config),
        None => kept_when_trusting(r, pod, now, received, config),
    };
    let trusted = if stopped.is_some() {
        ResyncOutcome::WriterStopped
    } else {
        ResyncOutcome::Forced
    };
    // Pods the matched object proves it does not count yet.
    let mut unreflected = HashSet::new();
    let (outcome, mut dropped) = match confirm::judge(node, entry, config) {
        Verdict::Match(evidence) => {
            unreflected = evidence.unreflected(entry);
            (ResyncOutcome::Match, evidence.apply(entry))
        }
        Verdict::Mismatch if stale(entry) || stopped.is_some() => {
            (trusted, entry.rebuild(trusting))
        }
        Verdict::Mismatch => (ResyncOutcome::Mismatch, Vec::new()),
        Verdict::Unusable if stopped.is_some() => (trusted, entry.rebuild(trusting)),
        Verdict::Unusable if dirty_for >= config.resync_period => {
            (ResyncOutcome::NoFingerprint, entry.rebuild(trusting))
        }
        Verdict::Unusable => (ResyncOutcome::Deferred, Vec::new()),
    };
    // A match can carry over reservations that are themselves past the bound: leaked
    // ones (never seen bound) go, but not those of bound pods the object proves it does
    // not count yet (see the module documentation).
    let outcome = if outcome == ResyncOutcome::Match && stale(entry) {
        let before = dropped.len();
        dropped.extend(entry.rebuild(|r, pod| {
            let proven = pod.is_some_and(|p| {
                !p.phase.is_terminal()
                    && unreflected.contains(&(r.namespace.clone(), r.name.clone()))
            });
            proven || trusting(r, pod)
        }));
        if dropped.len() > before {
            trusted
        } else {
            ResyncOutcome::Match
        }
    } else {
        outcome
    };
    let carried_over = if entry.is_dirty() {
        entry.reservations().count()
    } else {
        0
    };
    let first_report = stopped.is_some_and(|w| entry.stopped_writer_reported != Some(w.at));
    if let (ResyncOutcome::WriterStopped, Some(writer), true) = (outcome, stopped, first_report) {
        entry.stopped_writer_reported = Some(writer.at);
        tracing::warn!(
            node,
            heartbeat_age_seconds = writer.age.as_secs(),
            carried_over,
            "node topology writer stopped: its NodeResourceTopology is kept with every pod bound since its last write reserved, until a fresh one arrives",
        );
    } else if outcome == ResyncOutcome::Forced && entry.forced_reported != received {
        // Once per object: a node kept dirty by pods its agent has not reported is
        // forced again every period until a new object arrives.
        entry.forced_reported = received;
        tracing::warn!(
            node,
            dirty_for_seconds = dirty_for.as_secs_f64(),
            carried_over,
            "node topology forced clean: dirty for longer than the maximum staleness",
        );
    } else {
        tracing::debug!(
            node,
            outcome = outcome.as_label(),
            carried_over,
            "node topology resync"
        );
    }
    let resync = NodeResync {
        node: node.to_owned(),
        outcome,
        dirty_for,
        carried_over,
    };
    Some((resync, dropped))
}

/// See the module documentation.
fn kept_when_trusting(
    reservation: &Reservation,
    pod: Option<&ObservedPod>,
    now: Instant,
    received: Option<Instant>,
    config: &CacheConfig,
) -> bool {
    match pod {
        None => now.saturating_duration_since(reservation.reserved_at) < config.max_staleness,
        Some(p) if p.phase.is_terminal() => false,
        Some(p) => {
            now.saturating_duration_since(p.bound_at) < config.resync_period
                || (p.exclusive && received.is_some_and(|at| p.bound_at > at))
        }
    }
}

/// See the module documentation: an object whose writer stopped at `last_write` reflects
/// no pod bound after it, nor surely one bound shortly before it (the kubelet admits a
/// pod some time after its binding, clocks differ between the node and the scheduler,
/// the pod watch lags). Pods bound within `max_staleness` before the last write, the
/// longest the cache waits for any object to show a pod, are kept too: on a node whose
/// agent is gone, counting a pod twice only leaves other pods Pending.
fn kept_when_stopped(
    reservation: &Reservation,
    pod: Option<&ObservedPod>,
    now: Instant,
    last_write: Option<Instant>,
    config: &CacheConfig,
) -> bool {
    match pod {
        None => now.saturating_duration_since(reservation.reserved_at) < config.max_staleness,
        Some(p) if p.phase.is_terminal() => false,
        Some(p) => last_write
            .and_then(|at| at.checked_sub(config.max_staleness))
            .is_none_or(|since| p.bound_at >= since),
    }
}
