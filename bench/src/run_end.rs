//! When a run may end, and why it did.
//!
//! A run used to end only when every pod was bound, or when nothing had been bound for
//! the idle timeout after the last creation (60 s; 30 s in the saturation scenario). A
//! run whose scheduler leaves pods Pending therefore spent that whole timeout waiting.
//! [`Progress`] follows what the run's watch shows of every pod and ends such a run
//! as soon as one of these holds, checked in this order:
//!
//! 1. [`RunEnd::AllBound`]: every pod is bound.
//! 2. [`RunEnd::Unplaceable`]: every created pod is seen, and every unbound one fits no
//!    node even at node level (CPU, memory, hugepages, devices, pod count) beside the
//!    pods bound so far. This is a proof that no scheduler that checks node resources
//!    (all three real ones do) can still bind it: pods are only ever added to nodes
//!    during a run, and the scheduler's own view holds at least the binds the watch has
//!    seen (its binds in flight on top), so its free capacity is at most the one
//!    computed here. A bound pod seen deleted or terminal gives its resources back.
//! 3. [`RunEnd::Settled`]: every created pod is seen, every unbound one carries
//!    `PodScheduled=False` with reason `Unschedulable` from its scheduler (so each was
//!    tried and failed), and nothing was bound and no pod newly marked for
//!    [`SETTLE`]. After the last bind the cluster stands still but for what the
//!    schedulers do themselves: the node agent publishes the last NRT within its
//!    debounce (200 ms); both reserve caches (TAS, the NUMA plugin) resync every 5 s;
//!    TAS and kube-scheduler retry a failed pod at the latest when its backoff ends
//!    (capped at 10 s by both). A pod either scheduler could still place is therefore
//!    tried on a settled view within 5 + 10 s + its decision of the last bind; [`SETTLE`]
//!    is that plus 5 s. (kube-scheduler's 5-minute flush of unschedulable pods was
//!    never inside the old timeouts either.)
//! 4. [`RunEnd::Idle`]: the old rule, kept as the fallback (the bind-only binder, a
//!    scheduler that does not mark pods, pods that were never created): creation has
//!    finished and nothing was bound for the idle timeout.
//!
//! Rules 2 and 3 are off for the bind-only binder (it binds without looking) and when
//! the run is asked to end only by the old rule; then [`Progress::early`] still says
//! when the run could have ended, so the binds after that instant can be counted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use tas_nodesim::request::PodRequest;
pub use tas_testcluster::is_marked_unschedulable;
use tokio::time::Instant;

/// Resource name → amount (`cpu` in millicores, memory and hugepages in bytes, `pods`
/// and devices counted).
pub type Amounts = BTreeMap<String, u64>;

/// The pod-count resource of a node's allocatable.
pub const PODS: &str = "pods";

/// How long nothing may be bound, once every unbound pod is marked Unschedulable,
/// before a run is settled: reserve-cache resync (5 s) + the longest retry backoff
/// (10 s) + 5 s for the decision and bind of the last chance.
pub const SETTLE: Duration = Duration::from_secs(20);

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunEnd {
    /// Every pod was bound.
    #[default]
    AllBound,
    /// Every unbound pod fits no node at node level.
    Unplaceable,
    /// Every unbound pod was reported Unschedulable and nothing changed for [`SETTLE`].
    Settled,
    /// Nothing was bound for the idle timeout after the last creation.
    Idle,
}

impl RunEnd {
    /// Short name for logs.
    pub fn id(self) -> &'static str {
        match self {
            Self::AllBound => "all bound",
            Self::Unplaceable => "unplaceable",
            Self::Settled => "settled",
            Self::Idle => "idle timeout",
        }
    }
}

/// When a run may end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndRule {
    /// Whether rules 2 and 3 end the run (off: they are only noted).
    pub early: bool,
    /// Quiet time of rule 3.
    pub settle: Duration,
    /// Quiet time of rule 4.
    pub idle_timeout: Duration,
}

#[derive(Debug, Clone)]
struct PodState {
    requests: Amounts,
    node: Option<String>,
    unschedulable: bool,
    /// Bound and then deleted or terminal: its resources are free again.
    released: bool,
}

/// What the run's watch has shown so far, and the verdict it allows.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Per node: allocatable, and what the bound pods take of it.
    nodes: HashMap<String, (Amounts, Amounts)>,
    pods: Vec<Option<PodState>>,
    seen: usize,
    bound: usize,
    /// The last bind, or the end of creation.
    last_bind: Instant,
    /// The last bind, newly marked pod, or the end of creation.
    last_change: Instant,
    /// Pods the creator made, once it has finished.
    created: Option<usize>,
    /// The first instant rule 2 or 3 held, with which.
    early: Option<(Instant, RunEnd)>,
}

/// What [`Progress::observe`] learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The pod's first bind, to this node.
    Bound(String),
    /// Nothing new about its placement.
    Other,
}

impl Progress {
    /// A run of `pods` pods on `nodes` (name and allocatable), starting at `now`.
    pub fn new(
        nodes: impl IntoIterator<Item = (String, Amounts)>,
        pods: usize,
        now: Instant,
    ) -> Self {
        Self {
            nodes: nodes
                .into_iter()
                .map(|(name, allocatable)| (name, (allocatable, Amounts::new())))
                .collect(),
            pods: vec![None; pods],
            seen: 0,
            bound: 0,
            last_bind: now,
            last_change: now,
            created: None,
            early: None,
        }
    }

    /// Pods seen bound.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The first instant the run could have ended early, and by which rule.
    pub fn early(&self) -> Option<(Instant, RunEnd)> {
        self.early
    }

    /// Creation has finished at `now` with `created` pods made.
    pub fn creation_done(&mut self, created: usize, now: Instant) {
        self.created = Some(created);
        self.last_bind = self.last_bind.max(now);
        self.last_change = self.last_change.max(now);
    }

    /// Records pod `i` as the watch shows it at `now`.
    pub fn observe(&mut self, i: usize, pod: &Pod, now: Instant) -> Observed {
        let Some(slot) = self.pods.get_mut(i) else {
            return Observed::Other;
        };
        let state = match slot {
            Some(state) => state,
            None => {
                self.seen += 1;
                slot.insert(PodState {
                    requests: node_requests(pod),
                    node: None,
                    unschedulable: false,
                    released: false,
                })
            }
        };
        if state.node.is_none() && !state.unschedulable && is_marked_unschedulable(pod) {
            state.unschedulable = true;
            self.last_change = now;
        }
        let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let mut observed = Observed::Other;
        if let (None, Some(node)) = (&state.node, node) {
            state.node = Some(node.to_owned());
            self.bound += 1;
            self.last_bind = now;
            self.last_change = now;
            if let Some((_, used)) = self.nodes.get_mut(node) {
                add(used, &state.requests);
            }
            observed = Observed::Bound(node.to_owned());
        }
        let terminal = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        if terminal {
            self.release(i);
        }
        observed
    }

    /// Pod `i` was deleted.
    pub fn deleted(&mut self, i: usize) {
        self.release(i);
    }

    fn release(&mut self, i: usize) {
        let Some(Some(state)) = self.pods.get_mut(i) else {
            return;
        };
        if state.released {
            return;
        }
        if let Some((_, used)) = state.node.as_ref().and_then(|n| self.nodes.get_mut(n)) {
            state.released = true;
            subtract(used, &state.requests);
        }
    }

    /// Whether the run ends at `now` under `rule`, and why.
    pub fn verdict(&mut self, rule: &EndRule, now: Instant) -> Option<RunEnd> {
        if self.bound == self.pods.len() {
            return Some(RunEnd::AllBound);
        }
        let created = self.created?;
        if self.seen >= created {
            let early = if self.all_unbound_unplaceable() {
                Some(RunEnd::Unplaceable)
            } else if self.all_unbound_marked()
                && now.saturating_duration_since(self.last_change) >= rule.settle
            {
                Some(RunEnd::Settled)
            } else {
                None
            };
            if let Some(end) = early {
                self.early.get_or_insert((now, end));
                if rule.early {
                    return Some(end);
                }
            }
        }
        (now.saturating_duration_since(self.last_bind) >= rule.idle_timeout).then_some(RunEnd::Idle)
    }

    fn unbound(&self) -> impl Iterator<Item = &PodState> {
        self.pods.iter().flatten().filter(|p| p.node.is_none())
    }

    fn all_unbound_marked(&self) -> bool {
        self.unbound().all(|p| p.unschedulable)
    }

    fn all_unbound_unplaceable(&self) -> bool {
        // Many pods share a shape: judge each distinct request once.
        let shapes: BTreeSet<&Amounts> = self.unbound().map(|p| &p.requests).collect();
        shapes.into_iter().all(|requests| {
            !self
                .nodes
                .values()
                .any(|(allocatable, used)| fits(allocatable, used, requests))
        })
    }
}

/// What `pod` takes of a node's allocatable: its effective requests and one pod.
pub fn node_requests(pod: &Pod) -> Amounts {
    let mut amounts = PodRequest::from_pod(pod)
        .map(|r| r.effective_amounts())
        .unwrap_or_default();
    amounts.retain(|_, a| *a > 0);
    amounts.insert(PODS.to_string(), 1);
    amounts
}

/// Whether `requests` fit beside `used` in `allocatable` (a resource the node lacks
/// counts as 0), as NodeResourcesFit judges.
pub fn fits(allocatable: &Amounts, used: &Amounts, requests: &Amounts) -> bool {
    let get = |m: &Amounts, name: &str| m.get(name).copied().unwrap_or(0);
    requests
        .iter()
        .all(|(name, &a)| get(used, name).saturating_add(a) <= get(allocatable, name))
}

fn add(used: &mut Amounts, requests: &Amounts) {
    for (name, &a) in requests {
        *used.entry(name.clone()).or_insert(0) += a;
    }
}

fn subtract(used: &mut Amounts, requests: &Amounts) {
    for (name, &a) in requests {
        let left = used.entry(name.clone()).or_insert(0);
        *left = left.saturating_sub(a);
    }
}

#[cfg(test)]
mod tests;
