//! The search: one pass over all requests of a pod's unallocated claims, picking
//! devices in a fixed order and backtracking, as Kubernetes' structured allocator
//! does, until every request has its devices or every combination was tried.
//!
//! Requests are taken claim by claim, in their order; a request's alternatives
//! (`firstAvailable`) in theirs. An `ExactCount` request picks its devices in pool and
//! slice order, each one after the previous (the constraints do not depend on order,
//! so combinations suffice); an `All` request takes every matching device or fails.
//! A device is usable when it is free (not in the caller's in-use set, not picked for
//! another request of the pod), not tainted `NoSchedule`/`NoExecute`, admitted by the
//! zone rule and by the claim's constraints.
//!
//! Selectors are evaluated the first time the search reaches an alternative, on every
//! device of the node's usable pools; a runtime error on any of them fails the node
//! (whatever the device's position), which keeps the outcome independent of order.
//! Each device tried counts a step; past the bound the search gives up with
//! [`AllocateError::SearchBound`].

use std::collections::HashSet;
use std::rc::Rc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::DeviceId;
use super::cel::SelectorCache;
use super::constraint::Constraint;
use super::error::{AllocateError, Shortage};
use super::pools::NodeDevices;
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
    if search.place(0)? {
        return Ok(result::build(node, input, &plans, &search.picks));
    }
    Err(search.diagnose())
}

/// One request of one planned claim, in search order.
#[derive(Debug, Clone, Copy)]
struct Slot {
    claim: usize,
    request: usize,
}

/// The devices of a node matching an alternative's selectors, in search order.
type Candidates = Rc<Vec<usize>>;

struct Search<'s, 'a> {
    node: &'s NodeDevices,
    plans: &'s [PlannedClaim<'a>],
    rule: &'s ZoneRule,
    slots: Vec<Slot>,
    /// Held by someone else.
    external: Vec<bool>,
    /// Held by someone else or picked by this search.
    busy: Vec<bool>,
    /// By alternative id, once evaluated.
    candidates: Vec<Option<Candidates>>,
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
            candidates: vec![None; alternatives],
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

    /// Satisfies the requests from `slot` on; `true` when all are.
    fn place(&mut self, slot: usize) -> Result<bool, AllocateError> {
        let Some(&Slot { claim, request }) = self.slots.get(slot) else {
            return Ok(true);
        };
        for alternative in 0..self.plans[claim].requests[request].alternatives.len() {
            let alt = self.alternative(slot, alternative);
            let candidates = self.candidates(alt)?;
            let placed = match alt.mode {
                Mode::Exact(n) => self.pick(slot, alternative, &candidates, n, 0)?,
                Mode::All => {
                    if let Some(problem) = self.node.pools.iter().find_map(|p| p.problem()) {
                        return Err(AllocateError::AllDevicesUnavailable {
                            claim: self.plans[claim].name.clone(),
                            request: alt.result_name.clone(),
                            problem,
                        });
                    }
                    self.pick_all(slot, alternative, &candidates)?
                }
            };
            if placed {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Picks `need` more devices among `candidates[from..]`, then the next requests.
    fn pick(
        &mut self,
        slot: usize,
        alternative: usize,
        candidates: &[usize],
        need: usize,
        from: usize,
    ) -> Result<bool, AllocateError> {
        if need == 0 {
            return self.place(slot + 1);
        }
        if self.per_claim[self.slots[slot].claim] + need > MAX_DEVICES_PER_CLAIM {
            return Ok(false);
        }
        for (i, &device) in candidates.iter().enumerate().skip(from) {
            if candidates.len() - i < need {
                break;
            }
            self.step()?;
            if !self.take(slot, alternative, device) {
                continue;
            }
            if self.pick(slot, alternative, candidates, need - 1, i + 1)? {
                return Ok(true);
            }
            self.release();
        }
        Ok(false)
    }

    /// Takes every candidate, then the next requests.
    fn pick_all(
        &mut self,
        slot: usize,
        alternative: usize,
        candidates: &[usize],
    ) -> Result<bool, AllocateError> {
        let claim = self.slots[slot].claim;
        if candidates.is_empty() || self.per_claim[claim] + candidates.len() > MAX_DEVICES_PER_CLAIM
        {
            return Ok(false);
        }
        let mut taken = 0;
        for &device in candidates {
            self.step()?;
            if !self.take(slot, alternative, device) {
                break;
            }
            taken += 1;
        }
        if taken == candidates.len() && self.place(slot + 1)? {
            return Ok(true);
        }
        for _ in 0..taken {
            self.release();
        }
        Ok(false)
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

    /// Whether a device may be picked at all (before constraints).
    fn usable(&self, device: usize) -> bool {
        let d = &self.node.devices[device];
        !self.busy[device] && !d.tainted && self.rule.admits(d.zones.as_ref())
    }

    /// Picks `device` for the alternative if it is usable and the claim's constraints
    /// admit it.
    fn take(&mut self, slot: usize, alternative: usize, device: usize) -> bool {
        if !self.usable(device) {
            return false;
        }
        let Slot { claim, request } = self.slots[slot];
        let request_name = &self.plans[claim].requests[request].name;
        let alt = self.alternative(slot, alternative);
        let d = &self.node.devices[device];
        let applying: Vec<usize> = (0..self.constraints[claim].len())
            .filter(|&c| self.constraints[claim][c].applies_to(request_name, &alt.result_name))
            .collect();
        if !applying
            .iter()
            .all(|&c| self.constraints[claim][c].admits(&d.id.driver, &d.api))
        {
            return false;
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
        true
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

    /// The devices matching `alt`'s selectors in usable pools, evaluated once.
    fn candidates(&mut self, alt: &Alternative<'_>) -> Result<Candidates, AllocateError> {
        if let Some(found) = &self.candidates[alt.id] {
            return Ok(Rc::clone(found));
        }
        let mut matching = Vec::new();
        for (index, device) in self.node.devices.iter().enumerate() {
            let Some(value) = device
                .value
                .as_ref()
                .filter(|_| self.node.pool_is_usable(device.pool))
            else {
                continue;
            };
            let mut all = true;
            for planned in &alt.selectors {
                let matched = planned.selector.matches(value).map_err(|error| {
                    AllocateError::SelectorRuntime {
                        origin: planned.origin.clone(),
                        index: planned.index,
                        device: Box::new(device.id.clone()),
                        error,
                    }
                })?;
                if !matched {
                    all = false;
                    break;
                }
            }
            if all {
                matching.push(index);
            }
        }
        let matching = Rc::new(matching);
        self.candidates[alt.id] = Some(Rc::clone(&matching));
        Ok(matching)
    }

    /// Why the search found nothing: the first request that cannot be satisfied even
    /// on its own, or else the combination.
    fn diagnose(&mut self) -> AllocateError {
        for slot in 0..self.slots.len() {
            let Slot { claim, request } = self.slots[slot];
            let alternatives = self.plans[claim].requests[request].alternatives.len();
            let mut first = None;
            for alternative in 0..alternatives {
                let alt = self.alternative(slot, alternative);
                let candidates = match self.candidates(alt) {
                    Ok(candidates) => candidates,
                    Err(e) => return e,
                };
                let shortage = self.shortage(alt.mode, &candidates);
                let enough = match alt.mode {
                    Mode::Exact(n) => shortage.free() >= n,
                    Mode::All => shortage.matching > 0 && shortage.free() == shortage.matching,
                };
                if enough {
                    first = None;
                    break;
                }
                first.get_or_insert((alt, shortage));
            }
            if let Some((alt, shortage)) = first {
                let claim = self.plans[claim].name.clone();
                let request = alt.result_name.clone();
                return match alt.mode {
                    Mode::Exact(_) => AllocateError::Unsatisfiable {
                        claim,
                        request,
                        shortage,
                    },
                    Mode::All => AllocateError::AllDevicesUnavailable {
                        claim,
                        request,
                        problem: format!("not all of them are free: {shortage}"),
                    },
                };
            }
        }
        AllocateError::NoCombination
    }

    /// How the matching devices of an alternative split into free and not.
    fn shortage(&self, mode: Mode, candidates: &[usize]) -> Shortage {
        let mut shortage = Shortage {
            needed: match mode {
                Mode::Exact(n) => n,
                Mode::All => 1,
            },
            matching: candidates.len(),
            in_use: 0,
            tainted: 0,
            outside_zones: 0,
            unusable_pools: Vec::new(),
        };
        for &device in candidates {
            let d = &self.node.devices[device];
            if self.external[device] {
                shortage.in_use += 1;
            } else if d.tainted {
                shortage.tainted += 1;
            } else if !self.rule.admits(d.zones.as_ref()) {
                shortage.outside_zones += 1;
            }
        }
        if shortage.free() < shortage.needed {
            shortage.unusable_pools = self.node.pools.iter().filter_map(|p| p.problem()).collect();
        }
        shortage
    }
}
