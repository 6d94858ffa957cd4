//! The search: one pass over all requests of a pod's unallocated claims, picking
//! devices in a fixed order and backtracking, as Kubernetes' structured allocator
//! does, until every request has its devices or every combination was tried.
//!
//! Requests are taken claim by claim, in their order; a request's alternatives
//! (`firstAvailable`) in theirs. An `ExactCount` request picks its devices in pool and
//! slice order, each one after the previous (the constraints do not depend on order,
//! so combinations suffice); its scan failing when it reaches an invalid pool. An
//! `All` request takes every matching device or fails (with an error when the
//! claim's constraints refuse one of them). A device is usable when it is free (not
//! in the caller's in-use set, not picked for another request of the pod), not
//! tainted `NoSchedule`/`NoExecute`, admitted by the zone rule and by the claim's
//! constraints.
//!
//! Selectors are evaluated when and where kube-scheduler evaluates them, so that a
//! selector failing at run time (a missing attribute) fails the node exactly when it
//! fails it there, for kube-scheduler's pool order that is TAS's:
//! - `ExactCount`: lazily, on a device the search reaches once it is free and
//!   admitted by the zone rule, at most once per device and alternative; an error on
//!   a device the search never reaches (a solution came first) does not matter.
//! - `All`: before the search, on every device of the node (also those in use), for
//!   every `All` alternative of the pod's claims, reached or not; an incomplete or
//!   invalid pool on the node fails such an alternative there too.
//!
//! Each device tried counts a step; past the bound the search gives up with
//! [`AllocateError::SearchBound`].

use std::collections::HashSet;
use std::rc::Rc;

use k8s_openapi::api::resource::v1::ResourceClaim;

mod diagnose;

use super::DeviceId;
use super::cel::SelectorCache;
use super::constraint::Constraint;
use super::error::AllocateError;
use super::pools::{NodeDevices, PoolState};
use super::request::{self, Alternative, DeviceClasses, MAX_DEVICES_PER_CLAIM, Mode, PlannedClaim};
use super::result::{self, Allocation, Pick};
use super::topology::ZoneRule;

/// The default bound on search steps (devices tried).
pub const DEFAULT_MAX_STEPS: u64 = 100_000;

/// What to allocate, besides the node's devices.
pub struct AllocationInput<'a> {
    /// The pod's claims, in the pod's order. Claims with `status.allocation` are kept
    /// as they are.
    pub claims: &'a [ResourceClaim],
    /// The device classes the requests name.
    pub classes: &'a dyn DeviceClasses,
    /// Devices held by anyone else: allocated claims and in-flight allocations.
    pub in_use: &'a HashSet<DeviceId>,
    /// Which NUMA zones the new devices may sit in.
    pub zone_rule: &'a ZoneRule,
    /// Bound on devices tried; [`DEFAULT_MAX_STEPS`] unless testing.
    pub max_steps: u64,
}

/// Allocates devices of `node` for every claim of `input` that has none yet.
pub fn allocate(
    node: &NodeDevices,
    input: &AllocationInput<'_>,
    cache: &SelectorCache,
) -> Result<Allocation, AllocateError> {
    let mut busy: Vec<bool> = node
        .devices
        .iter()
        .map(|d| input.in_use.contains(&d.id))
        .collect();
    let mut plans = Vec::new();
    let mut next_id = 0;
    for (index, claim) in input.claims.iter().enumerate() {
        match claim.status.as_ref().and_then(|s| s.allocation.as_ref()) {
            Some(allocation) => {
                if let Some(selector) = &allocation.node_selector
                    && !node.selected_by(selector)
                {
                    return Err(AllocateError::AllocatedElsewhere {
                        claim: request::claim_name(claim),
                        node: node.node_name().to_owned(),
                    });
                }
                for held in result::held_devices(allocation) {
                    if let Some(i) = node.position(&held.id) {
                        busy[i] = true;
                    }
                }
            }
            None => plans.push(request::plan_claim(
                index,
                claim,
                input.classes,
                cache,
                &mut next_id,
            )?),
        }
    }
    let mut search = Search::new(node, &plans, input, busy, next_id);
    search.gather_all()?;
    if search.place(0)? {
        return Ok(result::build(node, input, &plans, &search.picks));
    }
    Err(search.diagnose())
}

/// What [`Search::take`] did with a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Take {
    Taken,
    /// In use, tainted, outside the zones or of an unsupported kind.
    Unusable,
    /// The claim's constraints refuse it next to the devices taken so far.
    Constraint,
}

/// One request of one planned claim, in search order.
#[derive(Debug, Clone, Copy)]
struct Slot {
    claim: usize,
    request: usize,
}

struct Search<'s, 'a> {
    node: &'s NodeDevices,
    plans: &'s [PlannedClaim<'a>],
    rule: &'s ZoneRule,
    slots: Vec<Slot>,
    /// Held by someone else.
    external: Vec<bool>,
    /// Held by someone else or picked by this search.
    busy: Vec<bool>,
    /// By alternative id, then device: whether the selectors hold, once evaluated.
    matches: Vec<Vec<Option<bool>>>,
    /// By alternative id, for `All` alternatives: every matching device of the node.
    all: Vec<Rc<[usize]>>,
    /// Per planned claim.
    constraints: Vec<Vec<Constraint>>,
    per_claim: Vec<usize>,
    picks: Vec<Pick>,
    steps: u64,
    max_steps: u64,
}

impl<'s, 'a> Search<'s, 'a> {
    fn new(
        node: &'s NodeDevices,
        plans: &'s [PlannedClaim<'a>],
        input: &'s AllocationInput<'_>,
        busy: Vec<bool>,
        alternatives: usize,
    ) -> Self {
        let slots = plans
            .iter()
            .enumerate()
            .flat_map(|(claim, plan)| {
                (0..plan.requests.len()).map(move |request| Slot { claim, request })
            })
            .collect();
        Self {
            node,
            plans,
            rule: input.zone_rule,
            slots,
            external: busy.clone(),
            busy,
            matches: vec![vec![None; node.devices.len()]; alternatives],
            all: vec![Rc::from([]); alternatives],
            constraints: plans.iter().map(|p| p.constraints.clone()).collect(),
            per_claim: vec![0; plans.len()],
            picks: Vec::new(),
            steps: 0,
            max_steps: input.max_steps,
        }
    }

    fn alternative(&self, slot: usize, alternative: usize) -> &'s Alternative<'a> {
        let Slot { claim, request } = self.slots[slot];
        &self.plans[claim].requests[request].alternatives[alternative]
    }

    /// The devices of every `All` alternative, evaluated up front as kube-scheduler
    /// does when it checks the claims.
    fn gather_all(&mut self) -> Result<(), AllocateError> {
        let plans = self.plans;
        let alternatives = plans.iter().flat_map(|plan| {
            plan.requests
                .iter()
                .flat_map(|r| &r.alternatives)
                .map(move |alt| (plan, alt))
        });
        for (plan, alt) in alternatives.filter(|(_, alt)| alt.mode == Mode::All) {
            if let Some(problem) = self.node.pools.iter().find_map(|p| p.problem()) {
                return Err(AllocateError::AllDevicesUnavailable {
                    claim: plan.name.clone(),
                    request: alt.result_name.clone(),
                    problem,
                });
            }
            let mut every = Vec::new();
            for device in 0..self.node.devices.len() {
                if self.selected(alt, device)? {
                    every.push(device);
                }
            }
            self.all[alt.id] = every.into();
        }
        Ok(())
    }

    /// Satisfies the requests from `slot` on; `true` when all are.
    fn place(&mut self, slot: usize) -> Result<bool, AllocateError> {
        let Some(&Slot { claim, request }) = self.slots.get(slot) else {
            return Ok(true);
        };
        for alternative in 0..self.plans[claim].requests[request].alternatives.len() {
            let placed = match self.alternative(slot, alternative).mode {
                Mode::Exact(n) => self.pick(slot, alternative, n, 0)?,
                Mode::All => self.pick_all(slot, alternative)?,
            };
            if placed {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Picks `need` more devices from device `from` on, then the next requests.
    ///
    /// Like kube-scheduler's, the scan goes on to the last device even when too few
    /// are left to fit (which devices it reaches decides which selectors run), and
    /// fails when it reaches an invalid pool.
    fn pick(
        &mut self,
        slot: usize,
        alternative: usize,
        need: usize,
        from: usize,
    ) -> Result<bool, AllocateError> {
        if need == 0 {
            return self.place(slot + 1);
        }
        if self.per_claim[self.slots[slot].claim] + need > MAX_DEVICES_PER_CLAIM {
            return Ok(false);
        }
        let alt = self.alternative(slot, alternative);
        for device in from..self.node.devices.len() {
            let pool = &self.node.pools[self.node.devices[device].pool];
            if let PoolState::Invalid { .. } = pool.state {
                return Err(AllocateError::InvalidPool {
                    problem: pool.problem().unwrap_or_default(),
                });
            }
            if !self.reachable(device) || !self.selected(alt, device)? {
                continue;
            }
            self.step()?;
            if self.take(slot, alternative, device) != Take::Taken {
                continue;
            }
            if self.pick(slot, alternative, need - 1, device + 1)? {
                return Ok(true);
            }
            self.release();
        }
        Ok(false)
    }

    /// Takes every device of an `All` alternative, then the next requests. A device
    /// the claim's constraints refuse is an error, as in kube-scheduler: the claim
    /// asks for devices that cannot go together.
    fn pick_all(&mut self, slot: usize, alternative: usize) -> Result<bool, AllocateError> {
        let claim = self.slots[slot].claim;
        let alt = self.alternative(slot, alternative);
        let candidates = Rc::clone(&self.all[alt.id]);
        if candidates.is_empty() || self.per_claim[claim] + candidates.len() > MAX_DEVICES_PER_CLAIM
        {
            return Ok(false);
        }
        let mut taken = 0;
        let mut refused = None;
        for &device in candidates.iter() {
            self.step()?;
            match self.take(slot, alternative, device) {
                Take::Taken => taken += 1,
                Take::Unusable => break,
                Take::Constraint => {
                    refused = Some(device);
                    break;
                }
            }
        }
        if taken == candidates.len() && self.place(slot + 1)? {
            return Ok(true);
        }
        for _ in 0..taken {
            self.release();
        }
        match refused {
            Some(device) => Err(AllocateError::AllDevicesUnavailable {
                claim: self.plans[claim].name.clone(),
                request: alt.result_name.clone(),
                problem: format!(
                    "device {} breaks a constraint of the claim",
                    self.node.devices[device].id
                ),
            }),
            None => Ok(false),
        }
    }

    fn step(&mut self) -> Result<(), AllocateError> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(AllocateError::SearchBound {
                steps: self.max_steps,
            });
        }
        Ok(())
    }

    /// Whether the search looks at a device at all: free and admitted by the zone
    /// rule. Selectors are evaluated only on such devices.
    fn reachable(&self, device: usize) -> bool {
        !self.busy[device] && self.rule.admits(self.node.devices[device].zones.as_ref())
    }

    /// Whether `device` satisfies the selectors of `alt` (class first, then the
    /// request's, the first false deciding), evaluated once.
    fn selected(&mut self, alt: &Alternative<'_>, device: usize) -> Result<bool, AllocateError> {
        if let Some(known) = self.matches[alt.id][device] {
            return Ok(known);
        }
        let d = &self.node.devices[device];
        let mut matched = d.value.is_some();
        if let Some(value) = &d.value {
            for planned in &alt.selectors {
                let holds = planned.selector.matches(value).map_err(|error| {
                    AllocateError::SelectorRuntime {
                        origin: planned.origin.clone(),
                        index: planned.index,
                        device: Box::new(d.id.clone()),
                        error,
                    }
                })?;
                if !holds {
                    matched = false;
                    break;
                }
            }
        }
        self.matches[alt.id][device] = Some(matched);
        Ok(matched)
    }

    /// Picks `device` for the alternative if it may be picked at all (reachable,
    /// allocatable, untainted) and the claim's constraints admit it.
    fn take(&mut self, slot: usize, alternative: usize, device: usize) -> Take {
        let d = &self.node.devices[device];
        if !self.reachable(device) || d.tainted || d.excluded.is_some() {
            return Take::Unusable;
        }
        let Slot { claim, request } = self.slots[slot];
        let request_name = &self.plans[claim].requests[request].name;
        let alt = self.alternative(slot, alternative);
        let applying: Vec<usize> = (0..self.constraints[claim].len())
            .filter(|&c| self.constraints[claim][c].applies_to(request_name, &alt.result_name))
            .collect();
        if !applying
            .iter()
            .all(|&c| self.constraints[claim][c].admits(&d.id.driver, &d.api))
        {
            return Take::Constraint;
        }
        for &c in &applying {
            self.constraints[claim][c].push(&d.id.driver, &d.api);
        }
        self.busy[device] = true;
        self.per_claim[claim] += 1;
        self.picks.push(Pick {
            claim,
            request,
            alternative,
            device,
            constraints: applying,
        });
        Take::Taken
    }

    /// Undoes the last [`Self::take`].
    fn release(&mut self) {
        let Some(pick) = self.picks.pop() else {
            return;
        };
        for &c in &pick.constraints {
            self.constraints[pick.claim][c].pop();
        }
        self.busy[pick.device] = false;
        self.per_claim[pick.claim] -= 1;
    }
}
