//! An independent judge of an allocation: given the generated [`World`] and one
//! `AllocationResult` per claim, is it a valid allocation under the Kubernetes API's
//! rules? It reads the model, not the objects, and evaluates selectors natively
//! ([`Sel::eval`]), so it shares no code with TAS's allocator nor with the referee.
//!
//! What the node sees follows kube-scheduler: the slices that reach the node, grouped
//! into pools; of each pool the newest generation among them; a pool whose slice
//! count differs from `resourceSliceCount` is incomplete (usable, except for
//! `allocationMode: All`), one naming a device twice is invalid (never used).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::AllocationResult;

use super::model::{Alt, Attr, Claim, Dev, Held, Mode, NODE, Reach, World, all_hold};

/// The devices one node may be allocated, per pool.
pub struct View<'w> {
    /// Devices of visible pools that are not invalid, with their driver.
    devices: BTreeMap<Held, &'w Dev>,
    /// Some visible pool is incomplete or invalid: no `All` request can be satisfied.
    blocks_all: bool,
    in_use: BTreeSet<Held>,
}

impl<'w> View<'w> {
    pub fn new(world: &'w World) -> Self {
        let reaches = |reach: &Reach| match reach {
            Reach::Node(node) => node == NODE,
            Reach::Rack(rack) => *rack == world.rack,
            Reach::All => true,
        };
        let mut pools: BTreeMap<(&str, &str), Vec<&super::model::Slice>> = BTreeMap::new();
        for slice in world.slices.iter().filter(|s| reaches(&s.reach)) {
            pools
                .entry((&slice.driver, &slice.pool))
                .or_default()
                .push(slice);
        }
        let mut devices = BTreeMap::new();
        let mut blocks_all = false;
        for ((driver, pool), slices) in pools {
            let newest = slices.iter().map(|s| s.generation).max().unwrap_or(0);
            let current: Vec<_> = slices
                .into_iter()
                .filter(|s| s.generation == newest)
                .collect();
            let names: Vec<&str> = current
                .iter()
                .flat_map(|s| s.devices.iter().map(|d| d.name.as_str()))
                .collect();
            let unique: BTreeSet<&str> = names.iter().copied().collect();
            let invalid = unique.len() != names.len();
            let incomplete = i64::try_from(current.len()).ok() != Some(current[0].count);
            blocks_all |= invalid || incomplete;
            if invalid {
                continue;
            }
            for slice in current {
                for device in &slice.devices {
                    let id = (driver.to_owned(), pool.to_owned(), device.name.clone());
                    devices.insert(id, device);
                }
            }
        }
        Self {
            devices,
            blocks_all,
            in_use: world.held.iter().flatten().cloned().collect(),
        }
    }
}

/// How `distinctAttribute` is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distinct {
    /// Every device has the attribute, all values differ (the API's definition).
    ByValue,
    /// Every device has the attribute (kube-scheduler v1.34's allocator, which
    /// compares the values' addresses; see the known differences).
    Presence,
}

/// Whether `allocations` (one per claim, in order) is a valid allocation of the
/// world's claims on the node; the first violation otherwise.
pub fn check(
    world: &World,
    view: &View<'_>,
    allocations: &[AllocationResult],
    distinct: Distinct,
) -> Result<(), String> {
    if allocations.len() != world.claims.len() {
        return Err(format!(
            "{} results for {} claims",
            allocations.len(),
            world.claims.len()
        ));
    }
    let mut used = BTreeSet::new();
    for (claim, allocation) in world.claims.iter().zip(allocations) {
        let results: Vec<(String, Held)> = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| {
                let id = (r.driver.clone(), r.pool.clone(), r.device.clone());
                (r.request.clone(), id)
            })
            .collect();
        let fail = |what: String| format!("claim {}: {what}", claim.name);
        if results.len() > 32 {
            return Err(fail(format!("{} devices, more than 32", results.len())));
        }
        for (_, id) in &results {
            if !view.devices.contains_key(id) {
                return Err(fail(format!("{id:?} is not a usable device of the node")));
            }
            if view.in_use.contains(id) {
                return Err(fail(format!("{id:?} is in use by another claim")));
            }
            if !used.insert(id.clone()) {
                return Err(fail(format!("{id:?} is allocated twice")));
            }
        }
        check_requests(world, view, claim, &results).map_err(fail)?;
        check_constraints(view, claim, &results, distinct).map_err(fail)?;
    }
    Ok(())
}

/// Every request got the devices of exactly one of its alternatives, as many as
/// it asks for, each selected by the class's and the request's selectors.
fn check_requests(
    world: &World,
    view: &View<'_>,
    claim: &Claim,
    results: &[(String, Held)],
) -> Result<(), String> {
    let mut accounted = 0;
    for request in &claim.requests {
        let mut chosen = None;
        for alt in &request.alternatives {
            let name = if request.first_available {
                format!("{}/{}", request.name, alt.name)
            } else {
                request.name.clone()
            };
            let devices: Vec<&Held> = results
                .iter()
                .filter(|(r, _)| *r == name)
                .map(|(_, id)| id)
                .collect();
            if devices.is_empty() {
                continue;
            }
            if chosen.replace(name.clone()).is_some() {
                return Err(format!("request {}: two subrequests used", request.name));
            }
            check_alternative(world, view, alt, &devices).map_err(|e| format!("{name}: {e}"))?;
            accounted += devices.len();
        }
        if chosen.is_none() {
            return Err(format!("request {}: no device", request.name));
        }
    }
    if accounted != results.len() {
        return Err("results name requests the claim does not have".to_owned());
    }
    Ok(())
}

fn check_alternative(
    world: &World,
    view: &View<'_>,
    alt: &Alt,
    devices: &[&Held],
) -> Result<(), String> {
    let class = world
        .classes
        .get(&alt.class)
        .ok_or_else(|| format!("class {} does not exist", alt.class))?;
    // The class's selectors first, then the request's, as one list.
    let selectors: Vec<_> = class.iter().chain(&alt.selectors).cloned().collect();
    let selected = |id: &Held, device: &Dev| all_hold(&selectors, &id.0, device);
    for id in devices {
        let device = view.devices[*id];
        if selected(id, device) != Ok(true) {
            return Err(format!("{id:?} is not selected"));
        }
    }
    match alt.mode {
        Mode::Exact(count) => {
            let want = count.unwrap_or(1) as usize;
            if devices.len() != want {
                return Err(format!("{} devices for a count of {want}", devices.len()));
            }
        }
        Mode::All => {
            if view.blocks_all {
                return Err("all devices of an incomplete or invalid pool".to_owned());
            }
            let mut every = BTreeSet::new();
            for (id, device) in &view.devices {
                match selected(id, device) {
                    Ok(true) => {
                        every.insert(id);
                    }
                    Ok(false) => {}
                    Err(()) => return Err(format!("selectors fail on {id:?}")),
                }
            }
            let got: BTreeSet<&Held> = devices.iter().copied().collect();
            if got != every {
                return Err(format!(
                    "{} of the {} matching devices",
                    got.len(),
                    every.len()
                ));
            }
        }
    }
    Ok(())
}

fn check_constraints(
    view: &View<'_>,
    claim: &Claim,
    results: &[(String, Held)],
    distinct: Distinct,
) -> Result<(), String> {
    for constraint in &claim.constraints {
        let (domain, id) = constraint
            .attribute
            .split_once('/')
            .ok_or("unqualified attribute")?;
        let applies = |request: &str| {
            constraint.requests.is_empty()
                || constraint.requests.iter().any(|r| r == request)
                || request
                    .split_once('/')
                    .is_some_and(|(parent, _)| constraint.requests.iter().any(|r| r == parent))
        };
        let mut values: Vec<&Attr> = Vec::new();
        for (_, device) in results.iter().filter(|(r, _)| applies(r)) {
            let value = view.devices[device]
                .attribute(&device.0, domain, id)
                .ok_or_else(|| format!("{device:?} lacks {}", constraint.attribute))?;
            values.push(value);
        }
        let kind = if constraint.matching {
            "match"
        } else {
            "distinct"
        };
        let broken = if constraint.matching {
            values.windows(2).any(|w| w[0] != w[1])
        } else {
            distinct == Distinct::ByValue
                && values
                    .iter()
                    .enumerate()
                    .any(|(i, v)| values[..i].contains(v))
        };
        if broken {
            return Err(format!("{kind}Attribute {} broken", constraint.attribute));
        }
    }
    Ok(())
}
