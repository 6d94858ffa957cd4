//! [`NodeEntry`]: everything the cache keeps for one node, and the operations that
//! keep its decision view equal to "latest accepted NRT minus every reservation".
//!
//! The view is rebuilt from the NRT only at well-defined points ([`NodeEntry::rebuild`]:
//! first NRT, clean node, resync); in between, reservations are subtracted and added
//! back in place, copy-on-write so snapshots held by running filters stay untouched.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tas_api::fingerprint::{Fingerprint, Method};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::InformerMode;

use super::exclude::PodExclusions;
use super::pod::{ObservedPod, PodPhase};
use crate::numa::init_holdings::{self, InitHolding};
use crate::numa::{
    MemoryDoubt, NodeTopology, NumaSet, PodRequest, Resources, TopologyError, landing_zones,
    landing_zones_below,
};

/// What filters and scores read for a node: its zones with every reservation already
/// subtracted, or why its NRT object cannot be used.
pub type NodeView = Result<Arc<NodeTopology>, Arc<TopologyError>>;

/// Resources held back on the zones of a node a pod may have taken, for a pod the
/// latest accepted NRT is not known to reflect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// Subtracted, whole, from each zone of `zones` that reports each resource.
    pub(crate) amounts: Resources,
    /// The NUMA zones the kubelet can give the pod ([`crate::numa::landing_zones`]);
    /// `None`: every zone.
    pub(crate) zones: Option<NumaSet>,
    /// The pod's request, kept to widen `zones` when more may be free than the zones
    /// were computed against ([`NodeEntry::widen`]); `None` for pods not placed
    /// through the cache, which are held back on every zone.
    pub(crate) request: Option<Arc<PodRequest>>,
    /// Not placed through this cache: another scheduler's pod (or ours from before a
    /// restart), reserved when it was first seen bound.
    pub(crate) foreign: bool,
    /// What the pod's regular init containers will keep, predicted when it was placed
    /// ([`crate::numa::init_holdings`]); handed to the pod's record when it is seen
    /// bound.
    pub(crate) init_holdings: Vec<InitHolding>,
    pub(crate) reserved_at: Instant,
}

/// What [`TopologyCache::update_nrt`](super::TopologyCache::update_nrt) did with an NRT object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NrtUpdate {
    /// First NRT of the node (or the first after its deletion): view built, any
    /// reservations recorded meanwhile subtracted from it.
    Added,
    /// Clean node (or one whose view was an error): view rebuilt from the object.
    Replaced,
    /// Dirty node: the object is kept as the latest but the view stays pessimistic
    /// until a resync accepts it.
    Held,
    /// The object has no name, so it belongs to no node.
    Ignored,
    /// Dirty node, but the object's fingerprint shows which unconfirmed pods it
    /// reflects: the view was rebuilt from it, keeping the reservations of the others.
    Confirmed,
}

/// One node's cache state; see the module documentation. Cloned only for a picture
/// taken outside the lock ([`super::TopologyCache::inspect`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct NodeEntry {
    /// The latest NRT object observed, accepted into the view or not.
    latest: Option<Arc<NodeResourceTopology>>,
    /// When this process received `latest`: a pod bound after it cannot be in it.
    latest_at: Option<Instant>,
    /// `None` exactly when there is no NRT object.
    view: Option<NodeView>,
    /// By pod UID.
    reservations: HashMap<String, Reservation>,
    /// Pods believed bound to the node, by UID.
    pub(crate) pods: HashMap<String, ObservedPod>,
    /// When pods were deleted, by namespace/name: a new pod reusing one has the same
    /// fingerprint identity (see `pod_identity_reused`).
    deleted: HashMap<(String, String), Instant>,
    /// Pods deleted from the node that no accepted NRT has shown gone yet, oldest
    /// first: an NRT may still count them (see [`super::confirm`]).
    departed: Vec<Departed>,
    /// Until when the view must have been built from an NRT received later for the
    /// departed pods to bound what the node may have free: set when a departed record
    /// is dropped (the deletion plus the staleness window), cleared by fingerprint
    /// evidence. Before that, reservations are not narrowed ([`Self::landing`]).
    departed_lost_until: Option<Instant>,
    /// When the NRT the view was built from was received.
    view_received: Option<Instant>,
    /// The last write of a stopped NRT writer already reported for this node, so a
    /// resync warns once per stopped object, not every period (see `resync`).
    pub(crate) stopped_writer_reported: Option<std::time::SystemTime>,
    /// When the latest object forced clean (and already reported) was received, so a
    /// node kept dirty by pods its agent has not reported warns once per object.
    pub(crate) forced_reported: Option<Instant>,
    /// Memory manager groups a kubelet refusal put in doubt, applied to every view
    /// built from an NRT that still shows them.
    memory_doubt: MemoryDoubt,
}

/// A pod deleted from a node whose absence no accepted NRT has confirmed yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Departed {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// As [`ObservedPod::exclusive`].
    pub(crate) exclusive: bool,
    pub(crate) at: Instant,
    /// As [`ObservedPod::footprint`]: what it may have released on some zone.
    pub(crate) footprint: Option<Resources>,
}

/// Most departed pods remembered per node; older ones are assumed reported gone.
const MAX_DEPARTED: usize = 16;

impl NodeEntry {
    pub(crate) fn view(&self) -> Option<NodeView> {
        self.view.clone()
    }

    pub(crate) fn latest(&self) -> Option<&Arc<NodeResourceTopology>> {
        self.latest.as_ref()
    }

    /// When this process received the latest NRT object.
    pub(crate) fn latest_at(&self) -> Option<Instant> {
        self.latest_at
    }

    pub(crate) fn reservations(&self) -> impl Iterator<Item = (&String, &Reservation)> {
        self.reservations.iter()
    }

    pub(crate) fn reservation(&self, uid: &str) -> Option<&Reservation> {
        self.reservations.get(uid)
    }

    /// Dirty: the view carries reservations, so NRT updates are held back.
    pub(crate) fn is_dirty(&self) -> bool {
        self.view.is_some() && !self.reservations.is_empty()
    }

    /// Since when the view has diverged from an accepted NRT: the oldest reservation.
    pub(crate) fn dirty_since(&self) -> Option<Instant> {
        if !self.is_dirty() {
            return None;
        }
        self.reservations.values().map(|r| r.reserved_at).min()
    }

    /// Pods deleted from the node that an NRT may still count, oldest first.
    pub(crate) fn departed(&self) -> &[Departed] {
        &self.departed
    }

    /// Records a pod deletion an NRT may not reflect yet, forgetting records older than
    /// `window` and all but the newest [`MAX_DEPARTED`].
    pub(crate) fn note_departed(&mut self, pod: &ObservedPod, now: Instant, window: Duration) {
        let mut lost = None;
        self.departed.retain(|d| {
            let keep = now.saturating_duration_since(d.at) < window;
            if !keep {
                lost = lost.max(Some(d.at));
            }
            keep
        });
        if self.departed.len() >= MAX_DEPARTED {
            let dropped = self.departed.remove(0);
            lost = lost.max(Some(dropped.at));
        }
        if let Some(at) = lost {
            let until = at + window;
            self.departed_lost_until = self.departed_lost_until.max(Some(until));
        }
        self.departed.push(Departed {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            exclusive: pod.exclusive,
            at: now,
            footprint: pod.footprint.clone(),
        });
        self.widen();
    }

    /// Accepts the latest NRT on fingerprint evidence: it reflects the confirmed pods,
    /// the reserved pods in `reflected` and the departed pods at the indexes in
    /// `still_counted`. The view is rebuilt from it keeping every other reservation
    /// (`uncovered` decides for pods the NRT's fingerprint method does not count), and
    /// departed pods it shows gone are forgotten. Returns the dropped reservations.
    pub(crate) fn accept(
        &mut self,
        reflected: &std::collections::HashSet<String>,
        still_counted: &[usize],
        mut uncovered: impl FnMut(&str, Option<&ObservedPod>) -> Option<bool>,
    ) -> Vec<String> {
        // The fingerprint shows which departed pods the object still counts.
        self.departed_lost_until = None;
        let mut index = 0;
        self.departed.retain(|_| {
            let keep = still_counted.contains(&index);
            index += 1;
            keep
        });
        let pods = &self.pods;
        let mut dropped = Vec::new();
        self.reservations.retain(|uid, _| {
            let pod = pods.get(uid);
            let kept = match uncovered(uid, pod) {
                Some(kept) => kept,
                None => !reflected.contains(uid),
            };
            if !kept {
                dropped.push(uid.clone());
            }
            kept
        });
        self.rebuild(|_, _| true);
        dropped
    }

    /// Nothing worth keeping: no NRT, no reservation, no pod.
    pub(crate) fn is_empty(&self) -> bool {
        self.latest.is_none() && self.reservations.is_empty() && self.pods.is_empty()
    }

    /// Records `nrt` as the latest object and updates the view unless the node is
    /// dirty with a usable view.
    pub(crate) fn set_nrt(&mut self, nrt: Arc<NodeResourceTopology>, now: Instant) -> NrtUpdate {
        let had_view = self.view.is_some();
        // An object written for another Node object of this name (the node was
        // deleted and created again) is never held back behind a view built from the
        // earlier node's: that view describes a machine that is gone.
        let same_node = self
            .latest
            .as_ref()
            .is_none_or(|old| node_owner(old) == node_owner(&nrt));
        let hold = same_node && self.is_dirty() && matches!(self.view, Some(Ok(_)));
        self.latest = Some(nrt);
        self.latest_at = Some(now);
        if hold {
            return NrtUpdate::Held;
        }
        // A clean node has nothing to carry over. A node that had no usable view may
        // hold reservations nothing has confirmed yet: all of them stay.
        self.rebuild(|_, _| true);
        if had_view {
            NrtUpdate::Replaced
        } else {
            NrtUpdate::Added
        }
    }

    /// Forgets the NRT object. Reservations stay recorded, to be subtracted from the
    /// node's next NRT.
    pub(crate) fn remove_nrt(&mut self) {
        self.latest = None;
        self.latest_at = None;
        self.view = None;
    }

    /// Subtracts `reservation` from its zones, replacing an earlier reservation of
    /// the same pod.
    pub(crate) fn reserve(&mut self, uid: &str, reservation: Reservation) {
        if let Some(held) = self.holding(uid).map(<[InitHolding]>::to_vec) {
            self.shift_holdings(&held, Shift::Release);
        }
        if let Some(old) = self.reservations.remove(uid) {
            self.shift(&old.amounts, old.zones, Shift::Release);
        }
        self.shift(&reservation.amounts, reservation.zones, Shift::Hold);
        self.reservations.insert(uid.to_owned(), reservation);
    }

    /// What the node may have free at most: the NRT the view was built from (the view
    /// plus every reservation, on its zones) plus the footprint of every pod that may
    /// have released resources it still counts (departed pods, finished or terminating
    /// pods, pods that can finish on their own), on every zone. `None` when there is no
    /// usable view, a footprint is unknown, or departed records were dropped that the
    /// view's NRT may still count.
    pub(crate) fn upper_bound(&self) -> Option<NodeTopology> {
        self.bound(|_| true, ObservedPod::may_release)
    }

    /// What the node may have free at most for the pods now bound to it, the bound
    /// deciding whether a pod's zone is settled
    /// ([`super::TopologyCache::zone_bounds`]): [`Self::upper_bound`], except that
    /// the pods in flight whose reservation holds one zone stay on it (the kubelet
    /// gives each that zone), and that running pods able to finish on their own are
    /// taken to hold what they hold (one may finish any time, but waiting for all of
    /// them would keep a pod waiting for as long as a batch job runs).
    pub(crate) fn settled_upper_bound(&self) -> Option<NodeTopology> {
        self.bound(
            |zones| zones.is_none_or(|z| z.len() > 1),
            |p| p.terminating || p.phase.is_terminal(),
        )
    }

    /// The NRT the view was built from with the reservations `returned` (by their
    /// zone sets) given back on their zones, and the departed pods and the observed pods
    /// `released` says give back, on every zone.
    fn bound(
        &self,
        returned: impl Fn(Option<NumaSet>) -> bool,
        released: impl Fn(&ObservedPod) -> bool,
    ) -> Option<NodeTopology> {
        let Some(Ok(view)) = &self.view else {
            return None;
        };
        if let Some(until) = self.departed_lost_until
            && self.view_received.is_none_or(|received| received < until)
        {
            return None;
        }
        let mut upper = (**view).clone();
        for r in self.reservations.values().filter(|r| returned(r.zones)) {
            match r.zones {
                Some(zones) => upper.unreserve_on_zones(&r.amounts, zones),
                None => upper.unreserve_on_every_zone(&r.amounts),
            }
        }
        for d in &self.departed {
            upper.unreserve_on_every_zone(d.footprint.as_ref()?);
        }
        for p in self.pods.values().filter(|p| released(p)) {
            upper.unreserve_on_every_zone(p.footprint.as_ref()?);
        }
        Some(upper)
    }

    /// The zones a reservation of a pod asking for `request` must hold it back on
    /// ([`landing_zones`] against [`Self::upper_bound`], narrowed by the kubelet's
    /// tie-break against the view when `trusted_view` says every pod on the node is
    /// accounted for in it: [`landing_zones_below`]); `None`: every zone.
    pub(crate) fn landing(&self, request: &PodRequest, trusted_view: bool) -> Option<NumaSet> {
        #[cfg(test)]
        match test_rule::get() {
            test_rule::Rule::Narrow => {}
            test_rule::Rule::EveryZone => return None,
            test_rule::Rule::FromView => {
                let Some(Ok(view)) = &self.view else {
                    return None;
                };
                return landing_zones(view, request);
            }
        }
        let upper = self.upper_bound()?;
        let zones = match &self.view {
            Some(Ok(view)) => landing_zones_below(&upper, view, request, trusted_view)?,
            _ => return None,
        };
        // Every zone is written as such (and shown as "every zone").
        (zones.len() < upper.zone_count() as u32).then_some(zones)
    }

    /// More may be free than the narrowed reservations were computed against (a pod
    /// departed or may have finished): each grows to the zones the pod could now be
    /// given ([`landing_zones`], without the tie-break: the view has changed since the
    /// pod was decided), never shrinks. A pod decided after this sees the grown
    /// reservations.
    pub(crate) fn widen(&mut self) {
        #[cfg(test)]
        if test_rule::get() != test_rule::Rule::Narrow {
            return;
        }
        if !self.reservations.values().any(|r| r.zones.is_some()) {
            return;
        }
        let upper = self.upper_bound();
        let grown: Vec<(String, Option<NumaSet>)> = self
            .reservations
            .iter()
            .filter_map(|(uid, r)| {
                let old = r.zones?;
                let now = match (&upper, &r.request) {
                    (Some(upper), Some(request)) => landing_zones(upper, request)
                        .map(|z| NumaSet::from_bits(z.bits() | old.bits()))
                        .filter(|z| z.len() < upper.zone_count() as u32),
                    _ => None,
                };
                (now != Some(old)).then(|| (uid.clone(), now))
            })
            .collect();
        for (uid, zones) in grown {
            let Some(r) = self.reservations.get(&uid) else {
                continue;
            };
            let (amounts, old) = (r.amounts.clone(), r.zones);
            self.shift(&amounts, old, Shift::Release);
            self.shift(&amounts, zones, Shift::Hold);
            if let Some(r) = self.reservations.get_mut(&uid) {
                r.zones = zones;
            }
        }
    }

    /// Predicts the init holdings of pods first seen while the node had no usable
    /// view, on the latest NRT (less the reservations, plus each pod's own footprint on
    /// every zone: the object may already count it).
    fn predict_pending_holdings(&mut self) {
        if !self.pods.values().any(|p| p.pending_holdings.is_some()) {
            return;
        }
        let Some(Ok(mut base)) = self.latest.as_deref().map(NodeTopology::from_nrt) else {
            return;
        };
        for r in self.reservations.values() {
            match r.zones {
                Some(zones) => base.reserve_on_zones(&r.amounts, zones),
                None => base.reserve_on_every_zone(&r.amounts),
            }
        }
        for pod in self.pods.values_mut() {
            let Some(request) = pod.pending_holdings.take() else {
                continue;
            };
            let mut node = base.clone();
            if let Some(own) = &pod.footprint {
                node.unreserve_on_every_zone(own);
            }
            pod.init_holdings = init_holdings::predict(&node, &request);
        }
    }

    /// Records the phase of a pod bound here and whether it is terminating or can
    /// finish on its own; widens the reservations when it may now release what it
    /// holds. Returns whether the pod is known.
    pub(crate) fn observe_pod(
        &mut self,
        uid: &str,
        phase: PodPhase,
        releasing: bool,
        terminating: bool,
    ) -> bool {
        let held = self.holding(uid).map(<[InitHolding]>::to_vec);
        let Some(pod) = self.pods.get_mut(uid) else {
            return false;
        };
        let before = pod.may_release();
        pod.phase = phase;
        pod.releasing |= releasing;
        pod.terminating |= terminating;
        if !before && pod.may_release() {
            if let Some(held) = held {
                self.shift_holdings(&held, Shift::Release);
            }
            self.widen();
        }
        true
    }

    /// Records that the node's kubelet refused a pod at admission: the multi-zone
    /// memory groups the view shows are doubted from now on ([`MemoryDoubt`]).
    /// Which zones could have split is judged on what the node may have free at most
    /// ([`Self::upper_bound`]); when that is unknown, every zone of a multi-zone group
    /// is doubted.
    pub(crate) fn note_refusal(&mut self, refused: Option<&PodRequest>) {
        let upper = self.upper_bound();
        let Some(Ok(view)) = &mut self.view else {
            return;
        };
        let added = match &upper {
            Some(upper) => self.memory_doubt.note_refusal(upper, refused),
            None => self.memory_doubt.note_refusal(view, None),
        };
        if added {
            tracing::info!(
                node = view.name(),
                zones = ?self.memory_doubt.zones(),
                "the kubelet refused a pod part-way: zones of memory manager groups it may have split are judged as holding their group and as holding single-zone memory, until their group leaves"
            );
            self.memory_doubt.apply(Arc::make_mut(view));
        }
    }

    /// Records a pod bound here (replacing an earlier record) and holds back what its
    /// init containers keep when that applies ([`Self::holding`]).
    pub(crate) fn insert_pod(&mut self, uid: &str, pod: ObservedPod) {
        self.remove_pod(uid);
        self.pods.insert(uid.to_owned(), pod);
        if let Some(held) = self.holding(uid).map(<[InitHolding]>::to_vec) {
            self.shift_holdings(&held, Shift::Hold);
        }
    }

    /// Forgets a pod bound here, adding back what its init containers' holding took.
    pub(crate) fn remove_pod(&mut self, uid: &str) -> Option<ObservedPod> {
        if let Some(held) = self.holding(uid).map(<[InitHolding]>::to_vec) {
            self.shift_holdings(&held, Shift::Release);
        }
        self.pods.remove(uid)
    }

    /// What the view holds back for pod `uid`'s init containers: their holding, while
    /// the pod is bound here, has no reservation (which covers the whole pod until an
    /// NRT reflects it) and cannot have released it.
    pub(crate) fn holding(&self, uid: &str) -> Option<&[InitHolding]> {
        let pod = self.pods.get(uid)?;
        (!pod.init_holdings.is_empty()
            && !pod.may_release()
            && !self.reservations.contains_key(uid))
        .then_some(pod.init_holdings.as_slice())
    }

    /// Whether the node has a usable view (an accepted, valid NRT).
    pub(crate) fn has_view(&self) -> bool {
        matches!(self.view, Some(Ok(_)))
    }

    /// What the regular init containers of a pod asking for `request` would keep if
    /// the kubelet admitted it now: predicted on the view (plus `own`, the pod's own
    /// footprint on every zone, when the view may already count it); held on every
    /// zone when the view does not let the pod fit.
    pub(crate) fn predict_init_holdings(
        &self,
        request: &PodRequest,
        own: Option<&Resources>,
    ) -> Vec<InitHolding> {
        let Some(Ok(view)) = &self.view else {
            return Vec::new();
        };
        // Most pods keep nothing: no copy of the view for them (every bind comes here).
        if !init_holdings::keeps_anything(view, request) {
            return Vec::new();
        }
        let mut node = (**view).clone();
        if let Some(own) = own {
            node.unreserve_on_every_zone(own);
        }
        init_holdings::predict(&node, request)
    }

    /// Adds a reservation back. Releasing the last one makes the node clean, so the
    /// view is rebuilt from the latest NRT: exact, and a held NRT is accepted.
    pub(crate) fn unreserve(&mut self, uid: &str) -> Option<Reservation> {
        let reservation = self.reservations.remove(uid)?;
        if self.reservations.is_empty() {
            self.rebuild(|_, _| true);
        } else {
            self.shift(&reservation.amounts, reservation.zones, Shift::Release);
            if let Some(held) = self.holding(uid).map(<[InitHolding]>::to_vec) {
                self.shift_holdings(&held, Shift::Hold);
            }
        }
        Some(reservation)
    }

    /// Rebuilds the view from the latest NRT, keeping only the reservations `keep`
    /// accepts (given the reservation and the pod if it is bound here) and subtracting
    /// them again. Returns the UIDs of the dropped reservations.
    pub(crate) fn rebuild(
        &mut self,
        mut keep: impl FnMut(&Reservation, Option<&ObservedPod>) -> bool,
    ) -> Vec<String> {
        let pods = &self.pods;
        let mut dropped = Vec::new();
        self.reservations.retain(|uid, r| {
            let kept = keep(r, pods.get(uid));
            if !kept {
                dropped.push(uid.clone());
            }
            kept
        });
        self.view_received = self.latest_at;
        self.predict_pending_holdings();
        self.view = self.latest.as_deref().map(|nrt| {
            let mut view = NodeTopology::from_nrt(nrt).map(Arc::new).map_err(Arc::new);
            if let Ok(topology) = &mut view {
                let topology = Arc::make_mut(topology);
                for r in self.reservations.values() {
                    match r.zones {
                        Some(zones) => topology.reserve_on_zones(&r.amounts, zones),
                        None => topology.reserve_on_every_zone(&r.amounts),
                    }
                }
                for uid in self.pods.keys() {
                    if let Some(held) = self.holding(uid) {
                        init_holdings::hold(topology, held);
                    }
                }
            }
            view
        });
        if let Some(Ok(view)) = &mut self.view {
            let view = Arc::make_mut(view);
            self.memory_doubt.prune(view);
            self.memory_doubt.apply(view);
        }
        dropped
    }

    /// Records a pod deletion for the identity-reuse check, forgetting deletions older
    /// than `window`.
    pub(crate) fn note_deleted(
        &mut self,
        namespace: &str,
        name: &str,
        now: Instant,
        window: Duration,
    ) {
        self.deleted
            .retain(|_, at| now.saturating_duration_since(*at) < window);
        self.deleted
            .insert((namespace.to_owned(), name.to_owned()), now);
    }

    /// Whether a pod with this namespace/name left the node less than `window` ago: an
    /// NRT object may still describe the old pod, and the fingerprint cannot tell the
    /// two apart.
    pub(crate) fn pod_identity_reused(
        &self,
        namespace: &str,
        name: &str,
        now: Instant,
        window: Duration,
    ) -> bool {
        !self.deleted.is_empty()
            && self
                .deleted
                .get(&(namespace.to_owned(), name.to_owned()))
                .is_some_and(|at| now.saturating_duration_since(*at) < window)
    }

    /// The fingerprint of the pods believed on the node that `method` and `mode` count,
    /// leaving out the pods the latest NRT says its writer excluded.
    pub(crate) fn fingerprint(&self, method: Method, mode: InformerMode) -> Fingerprint {
        let excluded = self
            .latest
            .as_deref()
            .map(PodExclusions::of)
            .unwrap_or_default();
        let mut fp = Fingerprint::with_capacity(self.pods.len());
        for pod in self.pods.values() {
            if excluded.excludes(&pod.namespace, &pod.name) {
                continue;
            }
            let covered = match method {
                Method::All => true,
                Method::WithExclusiveResources => pod.exclusive,
            };
            if covered && pod.phase.counts_in_fingerprint(mode) {
                fp.add(&pod.namespace, &pod.name);
            }
        }
        fp
    }

    fn shift_holdings(&mut self, held: &[InitHolding], shift: Shift) {
        if let Some(Ok(topology)) = &mut self.view {
            let topology = Arc::make_mut(topology);
            match shift {
                Shift::Hold => init_holdings::hold(topology, held),
                Shift::Release => init_holdings::release(topology, held),
            }
        }
    }

    fn shift(&mut self, amounts: &Resources, zones: Option<NumaSet>, shift: Shift) {
        if let Some(Ok(topology)) = &mut self.view {
            let topology = Arc::make_mut(topology);
            match (shift, zones) {
                (Shift::Hold, Some(zones)) => topology.reserve_on_zones(amounts, zones),
                (Shift::Hold, None) => topology.reserve_on_every_zone(amounts),
                (Shift::Release, Some(zones)) => topology.unreserve_on_zones(amounts, zones),
                (Shift::Release, None) => topology.unreserve_on_every_zone(amounts),
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Shift {
    Hold,
    Release,
}

/// The uid of the Node object that owns `nrt` (its updater sets the owner reference),
/// if it names one.
pub(crate) fn node_owner(nrt: &NodeResourceTopology) -> Option<&str> {
    nrt.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Node" && o.api_version == "v1")
        .map(|o| o.uid.as_str())
}

/// Tests only: which rule [`NodeEntry::landing`] follows on this thread, to show what
/// the upper bound is for.
#[cfg(test)]
pub(crate) mod test_rule {
    use std::cell::Cell;

    /// A rule for the zones of a reservation.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Rule {
        /// The production rule: against the upper bound of what is free.
        Narrow,
        /// Every zone, as before zones were narrowed.
        EveryZone,
        /// Unsafe: against the view (latest NRT minus reservations).
        FromView,
    }

    thread_local! {
        static RULE: Cell<Rule> = const { Cell::new(Rule::Narrow) };
    }

    pub(crate) fn get() -> Rule {
        RULE.with(Cell::get)
    }

    pub(crate) fn set(rule: Rule) {
        RULE.with(|r| r.set(rule));
    }
}
