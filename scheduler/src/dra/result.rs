//! The search's picks → one `AllocationResult` per claim, with the zones of every
//! device and whether the whole allocation is aligned with the zone rule.
//!
//! `devices.results` lists the picks in search order. `devices.config` holds first
//! each used class's configs (source `FromClass`, restricted to the results of the
//! requests that used the class), then the claim's own configs that apply to an
//! allocated request (source `FromClaim`, requests as written: none means all).
//! `nodeSelector` pins the claim to the node when a device comes from a slice with
//! `nodeName` (or from a node selector of several terms, which one term cannot
//! repeat), repeats the slices' one-term node selectors otherwise, and is absent when
//! every device comes from `allNodes` slices.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult,
};

use super::DeviceId;
use super::allocate::AllocationInput;
use super::pools::{NodeDevices, Reach};
use super::request::{self, PlannedClaim};
use super::topology::Zones;

/// One device picked by the search.
#[derive(Debug, Clone)]
pub(crate) struct Pick {
    /// Index into the planned claims.
    pub claim: usize,
    pub request: usize,
    pub alternative: usize,
    /// Index into the node's devices.
    pub device: usize,
    /// The claim's constraints the device was added to.
    pub constraints: Vec<usize>,
}

/// A device of an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// The result's request name (`request` or `request/subrequest`).
    pub request: String,
    pub id: DeviceId,
    /// Its NUMA zones, `None` when unknown.
    pub zones: Option<Zones>,
}

/// One claim of the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimAllocation {
    /// `namespace/name`.
    pub claim: String,
    /// The allocation to write to the claim's status; `None` when the claim already
    /// had one (its devices are still listed).
    pub result: Option<AllocationResult>,
    pub devices: Vec<AllocatedDevice>,
}

/// The outcome of a successful allocation, one entry per input claim, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub claims: Vec<ClaimAllocation>,
    /// Every device of the pod's claims (new or already allocated) has known zones
    /// and, under `ZoneRule::Within`, they lie inside the rule's set.
    pub aligned: bool,
}

impl Allocation {
    /// The devices newly allocated, which the caller must count as in use (in-flight)
    /// until the claims are written or the pod is unreserved.
    pub fn new_devices(&self) -> impl Iterator<Item = &DeviceId> {
        self.claims
            .iter()
            .filter(|c| c.result.is_some())
            .flat_map(|c| c.devices.iter().map(|d| &d.id))
    }

    /// The union of the known zones of all the pod's devices.
    pub fn zones(&self) -> Zones {
        self.claims
            .iter()
            .flat_map(|c| &c.devices)
            .flat_map(|d| d.zones.iter().flatten().copied())
            .collect()
    }
}

/// The devices an existing allocation holds, with the request names it gave them.
pub(crate) fn held_devices(
    allocation: &AllocationResult,
) -> impl Iterator<Item = AllocatedDevice> + '_ {
    allocation
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| AllocatedDevice {
            request: r.request.clone(),
            id: DeviceId::new(&r.driver, &r.pool, &r.device),
            zones: None,
        })
}

/// Builds the allocation of every input claim from the search's picks.
pub(crate) fn build(
    node: &NodeDevices,
    input: &AllocationInput<'_>,
    plans: &[PlannedClaim<'_>],
    picks: &[Pick],
) -> Allocation {
    let mut claims = Vec::with_capacity(input.claims.len());
    for (index, claim) in input.claims.iter().enumerate() {
        let entry = match plans.iter().position(|p| p.index == index) {
            Some(planned) => claim_result(
                node,
                &plans[planned],
                picks.iter().filter(|p| p.claim == planned),
            ),
            None => {
                let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
                ClaimAllocation {
                    claim: request::claim_name(claim),
                    result: None,
                    devices: allocation
                        .into_iter()
                        .flat_map(held_devices)
                        .map(|d| AllocatedDevice {
                            zones: node.zones(&d.id).cloned(),
                            ..d
                        })
                        .collect(),
                }
            }
        };
        claims.push(entry);
    }
    let aligned = claims
        .iter()
        .flat_map(|c| &c.devices)
        .all(|d| input.zone_rule.aligned(d.zones.as_ref()));
    Allocation { claims, aligned }
}

fn claim_result<'p>(
    node: &NodeDevices,
    plan: &PlannedClaim<'_>,
    picks: impl Iterator<Item = &'p Pick>,
) -> ClaimAllocation {
    let picks: Vec<&Pick> = picks.collect();
    let mut devices = Vec::with_capacity(picks.len());
    let mut results = Vec::with_capacity(picks.len());
    for pick in &picks {
        let alt = &plan.requests[pick.request].alternatives[pick.alternative];
        let device = &node.devices[pick.device];
        results.push(DeviceRequestAllocationResult {
            request: alt.result_name.clone(),
            driver: device.id.driver.clone(),
            pool: device.id.pool.clone(),
            device: device.id.device.clone(),
            ..Default::default()
        });
        devices.push(AllocatedDevice {
            request: alt.result_name.clone(),
            id: device.id.clone(),
            zones: device.zones.clone(),
        });
    }
    let result = AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: Some(configs(plan, &picks)).filter(|c| !c.is_empty()),
        }),
        node_selector: node_selector(node, &picks),
        ..Default::default()
    };
    ClaimAllocation {
        claim: plan.name.clone(),
        result: Some(result),
        devices,
    }
}

/// Class configs per used class, then the claim's configs for allocated requests.
fn configs(plan: &PlannedClaim<'_>, picks: &[&Pick]) -> Vec<DeviceAllocationConfiguration> {
    // The alternative each request was satisfied with, in request order.
    let mut chosen: Vec<(usize, usize)> =
        picks.iter().map(|p| (p.request, p.alternative)).collect();
    chosen.dedup();
    let mut configs = Vec::new();
    let mut classes_done = BTreeSet::new();
    for &(request, alternative) in &chosen {
        let alt = &plan.requests[request].alternatives[alternative];
        if !classes_done.insert(alt.class_name.as_str()) {
            continue;
        }
        let requests: Vec<String> = chosen
            .iter()
            .map(|&(r, a)| &plan.requests[r].alternatives[a])
            .filter(|a| a.class_name == alt.class_name)
            .map(|a| a.result_name.clone())
            .collect();
        for config in alt.class.spec.config.iter().flatten() {
            configs.push(DeviceAllocationConfiguration {
                source: "FromClass".to_owned(),
                requests: Some(requests.clone()),
                opaque: config.opaque.clone(),
            });
        }
    }
    let allocated: BTreeSet<&str> = chosen
        .iter()
        .flat_map(|&(r, a)| {
            let request = &plan.requests[r];
            [
                request.name.as_str(),
                request.alternatives[a].result_name.as_str(),
            ]
        })
        .collect();
    let claim_configs = plan
        .claim
        .spec
        .devices
        .as_ref()
        .and_then(|d| d.config.as_ref());
    for config in claim_configs.into_iter().flatten() {
        let names = config.requests.as_deref().unwrap_or_default();
        if names.is_empty() || names.iter().any(|n| allocated.contains(n.as_str())) {
            configs.push(DeviceAllocationConfiguration {
                source: "FromClaim".to_owned(),
                requests: config.requests.clone(),
                opaque: config.opaque.clone(),
            });
        }
    }
    configs
}

/// Where the claim's devices can be used, from the slices they came from.
fn node_selector(node: &NodeDevices, picks: &[&Pick]) -> Option<NodeSelector> {
    let pin = || NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node.node_name().to_owned()]),
            }]),
            ..Default::default()
        }],
    };
    let mut fields: Vec<NodeSelectorRequirement> = Vec::new();
    let mut expressions: Vec<NodeSelectorRequirement> = Vec::new();
    for pick in picks {
        match &node.devices[pick.device].reach {
            Reach::Node(_) => return Some(pin()),
            Reach::AllNodes => {}
            Reach::Selector(selector) => match selector.node_selector_terms.as_slice() {
                [] => {}
                [term] => {
                    add_new(&mut fields, term.match_fields.iter().flatten());
                    add_new(&mut expressions, term.match_expressions.iter().flatten());
                }
                _ => return Some(pin()),
            },
        }
    }
    if fields.is_empty() && expressions.is_empty() {
        return None;
    }
    Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(fields).filter(|f| !f.is_empty()),
            match_expressions: Some(expressions).filter(|e| !e.is_empty()),
        }],
    })
}

fn add_new<'r>(
    into: &mut Vec<NodeSelectorRequirement>,
    from: impl Iterator<Item = &'r NodeSelectorRequirement>,
) {
    for requirement in from {
        if !into.contains(requirement) {
            into.push(requirement.clone());
        }
    }
}
