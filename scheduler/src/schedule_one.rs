//! One scheduling attempt for one pod, kube-scheduler's `scheduleOne`: parse the pod,
//! resolve its volumes and resource claims, decide over a snapshot ([`crate::cycle`]:
//! filter, then score), then reserve and bind the pod on the chosen node
//! ([`crate::bind`]), its claims' devices held in flight until written; a pod that fits
//! nowhere is reported, requeued with back-off and may preempt (the victim search runs
//! here, the evictions in the background through the [`crate::writer`]).

use crate::bind::{self, BindTarget, ClaimWrites};
use crate::cache;
use crate::cycle::dra::{DraChoice, DraInput, DraOutcome, settled};
use crate::cycle::{CycleSettings, Decision, PodInput};
use crate::decision_trace::decide_traced;
use crate::decisions::{self, DecisionOutcome, DecisionRecord};
use crate::dra_state::pod_claims;
use crate::events::EventSender;
use crate::explain;
use crate::filter::{PodFilterInput, VolumeProblem, volumes};
use crate::numa::PodRequest;
use crate::preempt::{self, Outcome};
use crate::queue::QueuedPod;
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::telemetry::{AttemptOutcome, AttemptRecord};
use crate::writer::{Admission, Writer, claims};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tas_api::tas::DraAlignment;

/// How long a pod that keeps failing for the same reasons waits for its next
/// `FailedScheduling` Event (which then extends the open series).
const REPEAT_EVENT_AFTER: Duration = Duration::from_secs(5 * 60);

/// The last `FailedScheduling` sent per pod: the message's signature and when.
type LastFailures = std::collections::HashMap<String, (String, Instant)>;

/// What every attempt of the scheduling loop shares.
pub(crate) struct Attempts {
    shared: Arc<Shared>,
    events: EventSender,
    writer: Writer,
    settings: CycleSettings,
    last_message: LastFailures,
    /// The cluster as decisions see it, brought up to date before each one.
    snapshot: Snapshot,
}

impl Attempts {
    pub(crate) fn new(shared: Arc<Shared>, events: EventSender, writer: Writer) -> Self {
        let settings = CycleSettings {
            score: shared.settings.score.clone(),
            nodes_without_topology: shared.settings.nodes_without_topology,
            parallelism: shared.settings.parallelism,
            sampling: crate::cycle::Sampling::new(shared.settings.percentage_of_nodes_to_score),
        };
        Self {
            shared,
            events,
            writer,
            settings,
            last_message: LastFailures::default(),
            snapshot: Snapshot::new(),
        }
    }

    /// Whether fenced writes may go now: the loop decides only then.
    pub(crate) fn leads(&self) -> bool {
        self.writer.leads()
    }

    /// Schedules `pod` once; see the module documentation.
    pub(crate) async fn schedule_one(&mut self, queued: &QueuedPod, pod: Arc<Pod>) {
        let Self {
            shared,
            events,
            writer,
            settings,
            last_message,
            snapshot,
        } = self;
        let mut input = match parse(&pod) {
            Ok(i) => i,
            Err(message) => {
                shared.metrics.attempt("error");
                let outcome = AttemptOutcome::Error { message: &message };
                attempted(shared, &undecided(&pod, 0, outcome), |_| {});
                unschedulable(shared, events, &pod, message, None, last_message);
                return;
            }
        };
        let problem = resolve_volumes(shared, &pod, &mut input.filter)
            .map_err(|p| p.to_string())
            .and_then(|()| resolve_claims(shared, &pod, &mut input));
        if let Err(problem) = problem {
            shared.metrics.attempt("unschedulable");
            let total = shared.state.read().node_count();
            let message = format!("0/{total} nodes are available: {problem}.");
            let outcome = AttemptOutcome::Unschedulable { reason: &message };
            attempted(shared, &undecided(&pod, total, outcome), |_| {});
            unschedulable(shared, events, &pod, message, None, last_message);
            return;
        }
        let started = Instant::now();
        let started_at = SystemTime::now();
        // CPU-bound: keep the runtime's other tasks (watches, binds) moving meanwhile.
        let multi_thread = tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread;
        let (decision, trace) = if multi_thread {
            tokio::task::block_in_place(|| decide_traced(shared, snapshot, &input, settings))
        } else {
            decide_traced(shared, snapshot, &input, settings)
        };
        let decided = started.elapsed();
        shared
            .metrics
            .decision_latency
            .observe(decided.as_secs_f64());
        let mut phases = trace.phases();
        let record = |phases, outcome| AttemptRecord {
            pod: &pod,
            started: started_at,
            phases,
            decision: Some(decided),
            nodes: trace.nodes,
            feasible: trace.cycle.feasible,
            outcome,
        };
        match decision {
            Decision::Schedule(c) => {
                let choice = match trace.dra.clone().transpose() {
                    Ok(choice) => choice,
                    Err(message) => {
                        // The decision's own node refused the claims on a second look:
                        // only a bug does that; try again from a fresh snapshot.
                        shared.metrics.attempt("error");
                        shared.metrics.dra_allocation("failed");
                        let message =
                            format!("allocating resource claims on {}: {message}", c.node);
                        attempted(
                            shared,
                            &record(&phases, AttemptOutcome::Error { message: &message }),
                            |r| r.node = Some(c.node.clone()),
                        );
                        unschedulable(shared, events, &pod, message, None, last_message);
                        return;
                    }
                };
                if let Some(reason) = choice
                    .as_ref()
                    .and_then(|dra| unsettled_zones(shared, &c.node, &input, dra))
                {
                    shared.metrics.attempt("unschedulable");
                    let message = format!("DRA: {reason}.");
                    attempted(
                        shared,
                        &record(&phases, AttemptOutcome::Unschedulable { reason: &message }),
                        |r| r.node = Some(c.node.clone()),
                    );
                    unschedulable(shared, events, &pod, message, None, last_message);
                    return;
                }
                let (attempt, decision) = attempted(
                    shared,
                    &record(
                        &phases,
                        AttemptOutcome::Scheduled {
                            node: &c.node,
                            zones: trace.zones.clone(),
                            score: c.score,
                            dra: choice.as_ref(),
                        },
                    ),
                    |_| {},
                );
                last_message.remove(&queued.uid);
                shared.nominations.lock().remove(&queued.uid);
                crate::reserve::reserve(shared, &pod, &input, &c.node);
                let claims = choice.map(|choice| {
                    crate::reserve::hold_devices(shared, &input.uid, &choice);
                    claim_writes(&pod, &input, choice)
                });
                // Claim writes go in the bind's turn: kept in order.
                let admission = if claims.is_none()
                    && shared
                        .cache
                        .admission_commutes(&c.node, &input.uid, &input.request)
                {
                    Admission::Commutes
                } else {
                    Admission::InTurn
                };
                let target = BindTarget {
                    node: c.node,
                    attempt,
                    decision,
                    claims,
                    admission,
                };
                bind::start(shared, events, writer, pod, input.uid, target).await;
            }
            Decision::Unschedulable(reasons) => {
                shared.metrics.attempt("unschedulable");
                let total = shared.state.read().node_count();
                let searching = Instant::now();
                let outcome = if multi_thread {
                    tokio::task::block_in_place(|| {
                        preempt::attempt_with(shared, snapshot, &input, settings)
                    })
                } else {
                    preempt::attempt_with(shared, snapshot, &input, settings)
                };
                let mut message = explain::with_unsupported_note(
                    reasons.message(total),
                    &explain::unsupported_features(&pod),
                );
                if let Some(note) = outcome.note() {
                    message = format!("{message} {note}");
                }
                let stopped = shared
                    .cache
                    .stopped_writers(Instant::now(), SystemTime::now());
                if let Some(note) = cache::stopped_writers_note(&stopped, explain::NODES_NAMED) {
                    message = format!("{message} {note}");
                }
                phases.push(("preempt", searching.elapsed()));
                let nominated = match &outcome {
                    Outcome::Plans(plans) => plans.first().map(|p| p.node.clone()),
                    _ => None,
                };
                attempted(
                    shared,
                    &record(&phases, AttemptOutcome::Unschedulable { reason: &message }),
                    |r| {
                        r.reasons = reasons.counts();
                        if let Some(node) = nominated {
                            r.outcome = DecisionOutcome::Preempting;
                            r.node = Some(node);
                        }
                    },
                );
                let parsed = Some(Arc::new(input.filter.clone()));
                unschedulable(shared, events, &pod, message, parsed, last_message);
                if let Outcome::Plans(plans) = outcome {
                    start_preemption(shared, events, writer, &pod, input, plans);
                }
            }
        }
    }
}

/// An attempt that ended before any decision, out of `nodes`.
fn undecided<'a>(pod: &'a Pod, nodes: usize, outcome: AttemptOutcome<'a>) -> AttemptRecord<'a> {
    AttemptRecord {
        pod,
        started: SystemTime::now(),
        phases: &[],
        decision: None,
        nodes,
        feasible: 0,
        outcome,
    }
}

/// Records an attempt: its span, when spans are exported, and its entry in the decision
/// log, which `complete` finishes. The span's context (for the bind's span) and the
/// entry's id (for the bind's outcome).
fn attempted(
    shared: &Shared,
    record: &AttemptRecord<'_>,
    complete: impl FnOnce(&mut DecisionRecord),
) -> (Option<opentelemetry::Context>, u64) {
    let span = shared.telemetry.attempt(record);
    if !shared.decisions.is_on() {
        return (span, 0);
    }
    let mut entry = decisions::from_attempt(record, span.as_ref());
    complete(&mut entry);
    let id = shared.decisions.record(entry);
    (span, id)
}

/// Under `draAlignment: Required`, why the kubelet may not give the pod's CPUs the
/// zones of the devices `choice` lines up with them on `node` (pods in flight there
/// make its free room uncertain, [`crate::cycle::dra::settled`]).
fn unsettled_zones(
    shared: &Shared,
    node: &str,
    input: &PodInput,
    choice: &DraChoice,
) -> Option<String> {
    if shared.settings.dra_alignment != DraAlignment::Required
        || choice.outcome != DraOutcome::Aligned
    {
        return None;
    }
    let devices = choice.zones.as_ref()?;
    let (view, upper) = shared.cache.zone_bounds(node)?;
    let state = shared.state.read();
    let info = state.node(node)?;
    settled::unsettled(&view, &upper, &input.request, info, devices)
}

/// The claim writes of a pod whose claims `choice` allocates.
fn claim_writes(pod: &Pod, input: &PodInput, choice: DraChoice) -> ClaimWrites {
    let claims = input.dra.as_ref().map_or(&[][..], |d| &d.claims[..]);
    let (writes, releases) =
        claims::reservations(claims, &choice.allocation, &pod.name_any(), &input.uid);
    ClaimWrites {
        choice,
        writes,
        releases,
    }
}

/// Holds the room on the best plan's node at once, then evicts in the background.
fn start_preemption(
    shared: &Arc<Shared>,
    events: &EventSender,
    writer: &Writer,
    pod: &Arc<Pod>,
    input: PodInput,
    plans: Vec<preempt::Plan>,
) {
    let usage = input.filter.usage().clone();
    if let Some(best) = plans.first() {
        preempt::execute::nominate_locally(shared, &usage, best);
    }
    tokio::spawn(preempt::execute::run(
        writer.clone(),
        shared.clone(),
        events.clone(),
        pod.clone(),
        usage,
        plans,
    ));
}

fn parse(pod: &Pod) -> Result<PodInput, String> {
    let err = |e: &dyn std::fmt::Display| format!("pod cannot be scheduled: {e}");
    Ok(PodInput {
        uid: pod.uid().unwrap_or_default(),
        filter: PodFilterInput::new(pod).map_err(|e| err(&e))?,
        request: PodRequest::from_pod(pod).map_err(|e| err(&e))?,
        dra: None,
    })
}

/// Resolves the pod's claims into the volume filters' input, or says why no node can
/// take the pod yet (see [`crate::filter::volumes`]). `ReadWriteOncePod` claims are
/// checked against every pod on a node, assumed ones included.
fn resolve_volumes(
    shared: &Shared,
    pod: &Pod,
    filter: &mut PodFilterInput,
) -> Result<(), VolumeProblem> {
    if !volumes::has_claims(pod) {
        return Ok(());
    }
    let catalog = shared.volumes.read();
    let state = shared.state.read();
    filter.set_volumes(volumes::prepare(&catalog, pod, state.nodes())?);
    Ok(())
}

/// Resolves the pod's resource claims from the DRA store into `input.dra`, or says
/// why no node can take the pod: a claim not created yet, being deleted or full, or a
/// problem of the claims themselves (a missing class, a selector that does not
/// compile, a feature TAS does not support), which would hold on every node.
fn resolve_claims(shared: &Shared, pod: &Pod, input: &mut PodInput) -> Result<(), String> {
    if !pod_claims::has_claims(pod) {
        return Ok(());
    }
    let (claims, cluster) = {
        let store = shared.dra.read();
        let claims = pod_claims::resolve(&store, pod).map_err(|e| e.to_string())?;
        (claims, store.snapshot())
    };
    let dra = DraInput {
        claims,
        cluster,
        alignment: shared.settings.dra_alignment,
        selectors: shared.selectors.clone(),
    };
    if let Err(e) = dra.check() {
        shared.metrics.dra_allocation("failed");
        return Err(format!("DRA: {e}"));
    }
    input.dra = Some(Arc::new(dra));
    Ok(())
}

/// Requeues the pod with back-off and reports the failure: a `FailedScheduling` Event
/// (and the `PodScheduled=False` condition) only when the reasons changed (numbers
/// aside, see [`crate::event_series::signature`]), or again after
/// [`REPEAT_EVENT_AFTER`] of identical failures.
fn unschedulable(
    shared: &Shared,
    events: &EventSender,
    pod: &Pod,
    message: String,
    parsed: Option<Arc<PodFilterInput>>,
    last: &mut LastFailures,
) {
    let uid = pod.uid().unwrap_or_default();
    let now = Instant::now();
    shared.queue.lock().unschedulable_with(&uid, now, parsed);
    let signature = crate::event_series::signature(&message);
    let (changed, due) = match last.get(&uid) {
        Some((sent, at)) => (
            *sent != signature,
            now.saturating_duration_since(*at) >= REPEAT_EVENT_AFTER,
        ),
        None => (true, true),
    };
    if changed || due {
        tracing::info!(pod = %format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()), %message, "unschedulable");
        events.failed(pod, message, changed);
        last.insert(uid, (signature, now));
    }
    if last.len() > 100_000 {
        last.clear();
    }
}
