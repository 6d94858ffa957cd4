//! What the kubelet keeps for a pod's regular init containers that the node agent
//! cannot see.
//!
//! A regular init container's exclusive CPUs, pinned memory and devices stay with the
//! pod until it ends; later containers of the pod reuse them (the CPU and device
//! managers' reusable sets, the memory manager's reusable memory per zone set), and
//! what they do not reuse stays held. The kubelet's podresources API reports app
//! containers and sidecars only, so an NRT built from it shows that remainder as free.
//! [`init_holdings`] predicts it from the pod's request and the placement the kubelet
//! makes on the node as it was before the pod ([`super::fit`]), with the kubelet's own
//! reuse rules:
//! - devices: the device manager hands reusable devices out first; an init container
//!   reuses the earlier ones', so what is held is the largest init request, less what
//!   sidecars and app containers take after it;
//! - CPUs: the CPU manager takes a container's CPUs by topology from the free and
//!   reusable ones, not reusable ones first, and which CPUs those are the NRT does not
//!   show: an app container asking for whole cores leaves an init container's lone
//!   thread behind, one asking for fewer CPUs than a NUMA node has can leave the init
//!   container's whole node. So no later container is counted as reusing them, and an
//!   init container asking for a different count than the one before may take other
//!   CPUs than it (the same count from the same pool takes the same ones);
//! - memory: reused only by containers pinned to exactly the same zone set, as the
//!   memory manager keys it.
//!
//! The scheduler holds each remainder back on its zones for as long as the pod is on
//! the node: on every zone of its set, whole, when the set has several (where on them
//! the kubelet keeps it is not known). An object whose writer saw the CPU manager's
//! shared pool already leaves the kept CPUs out of its free ones
//! ([`tas_api::nrt::init_cpus`]): there only memory and devices are held back
//! ([`hold`]), and the CPUs come out exact, whichever the CPU manager let later
//! containers reuse.

use std::collections::BTreeMap;

use super::align::all_zones;
use super::fit::{Placement, handed_over, memory_reqs};
use super::mask::NumaSet;
use super::memory::MemoryManager;
use super::request::{ContainerKind, PodRequest};
use super::resources::{ResourceKind, Resources};
use super::topology::NodeTopology;
use tas_api::nrt::TopologyManagerPolicy;
use tas_api::nrt::TopologyManagerScope;

/// Resources a pod's regular init containers keep on a set of zones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitHolding {
    /// The zones (NUMA ids) holding them: one of them, or all, when several.
    pub zones: NumaSet,
    /// What is kept: millicores for CPU, bytes for memory and hugepages, else units.
    pub amounts: Resources,
}

/// What `pod`'s regular init containers would keep if `node`'s kubelet admitted it
/// now: [`init_holdings`] of the placement [`super::fit`] finds, or the largest init
/// requests on every zone ([`conservative`]) when the model finds none.
pub fn predict(node: &NodeTopology, pod: &PodRequest) -> Vec<InitHolding> {
    if !keeps_anything(node, pod) {
        return Vec::new();
    }
    match super::fit(node, pod, &|_| true) {
        Ok(placement) => init_holdings(node, pod, &placement),
        Err(_) => conservative(node, pod, all_zones(node.zone_count() as u32)),
    }
}

/// Whether any regular init container of `pod` asks `node`'s kubelet for something it
/// keeps: exclusive CPUs, pinned memory or devices.
pub fn keeps_anything(node: &NodeTopology, pod: &PodRequest) -> bool {
    pod.containers()
        .iter()
        .any(|c| c.kind == ContainerKind::Init && managed(node, pod, c.exclusive_cpu, &c.resources))
}

/// What `pod`'s regular init containers keep on `node` once it is admitted with
/// `placement` (the result of [`super::fit`] on the node as it was before the pod);
/// empty when nothing is kept, which is the case for every pod without regular init
/// containers asking for exclusive CPUs, pinned memory or devices.
pub fn init_holdings(
    node: &NodeTopology,
    pod: &PodRequest,
    placement: &Placement,
) -> Vec<InitHolding> {
    let containers = pod.containers();
    if !keeps_anything(node, pod) {
        return Vec::new();
    }
    let all = all_zones(node.zone_count() as u32);
    let policy = node.policy();
    let pod_scope = node.scope() == TopologyManagerScope::Pod;
    // The zone-index mask each container's topology hint gave it (`None`: no hint).
    let hint_of = |i: usize| -> Option<u64> {
        if policy == TopologyManagerPolicy::None {
            return None;
        }
        let zones = if pod_scope {
            placement.zones
        } else {
            placement.containers.get(i).copied().flatten()
        };
        zones.map(|z| node.zone_mask(z))
    };
    // CPUs and devices: (amount left to reuse, zones holding it), by resource name.
    let mut reusable: BTreeMap<String, (i64, u64)> = BTreeMap::new();
    // The CPU request of the latest regular init container taking exclusive CPUs.
    let mut last_init_cpus = 0;
    // Memory: by (zone set, resource name), as the memory manager keys it.
    let mut memory: BTreeMap<(u64, String), i64> = BTreeMap::new();
    let mut mm = if pod.is_guaranteed() && node.static_memory() {
        MemoryManager::new(node, node.free())
    } else {
        None
    };
    for (i, c) in containers.iter().enumerate() {
        let hint = hint_of(i);
        for e in c.resources.entries() {
            let cpu = e.kind == ResourceKind::Cpu
                && c.exclusive_cpu
                && pod.is_guaranteed()
                && node.static_cpus();
            if !(cpu || e.kind == ResourceKind::Device) || !node.reports(&e.name) {
                continue;
            }
            let slot = reusable.entry(e.name.to_string()).or_insert((0, 0));
            match c.kind {
                // The CPU manager takes an init container's CPUs by topology from the
                // free and reusable ones: the same CPUs as the one before only when it
                // asks for as many (same pool, same choice); otherwise others may join.
                ContainerKind::Init if cpu => {
                    slot.0 = if e.amount == last_init_cpus {
                        slot.0.max(e.amount)
                    } else {
                        slot.0 + e.amount
                    };
                    last_init_cpus = e.amount;
                    slot.1 |= hint.unwrap_or(all);
                }
                // The device manager hands reusable devices out first.
                ContainerKind::Init => {
                    slot.0 = slot.0.max(e.amount);
                    slot.1 |= hint.unwrap_or(all);
                }
                // Later containers may leave the init containers' CPUs (see the module
                // documentation); they take reusable devices first.
                _ if cpu => {}
                _ => slot.0 = (slot.0 - e.amount).max(0),
            }
        }
        if let Some(mm) = mm.as_mut() {
            let reqs = memory_reqs(node, &c.resources);
            let handed = if policy == TopologyManagerPolicy::None {
                None
            } else {
                handed_over(policy, hint, all)
            };
            let Ok(mask) = mm.allocate(c.kind, reqs.as_slice(), handed, placement.aligned) else {
                // The model refused what the kubelet admitted: keep the init
                // containers' memory on every zone.
                return conservative(node, pod, all);
            };
            for r in reqs.as_slice() {
                let name = node.resource_name(r.res as usize).to_owned();
                let slot = memory.entry((mask, name)).or_insert(0);
                if c.kind == ContainerKind::Init {
                    *slot = (*slot).max(r.need);
                } else {
                    *slot = (*slot - r.need).max(0);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (name, (amount, zones)) in reusable {
        if amount > 0 && zones != 0 {
            push(&mut out, node.numa_set(zones), &name, amount);
        }
    }
    for ((zones, name), amount) in memory {
        if amount > 0 && zones != 0 {
            push(&mut out, node.numa_set(zones), &name, amount);
        }
    }
    spread(node, out)
}

/// Under `none` and `best-effort` the kubelet refuses only for counts (too few CPUs or
/// devices, memory where the memory manager pins it), so a holding on several zones is
/// split over them: each zone in NUMA id order gives what it has free, the last the
/// rest (the way the memory manager fills a multi-zone allocation). Under the policies
/// that align, it stays whole on each of its zones: a pod must not be judged to fit on
/// a zone that may hold it.
fn spread(node: &NodeTopology, holdings: Vec<InitHolding>) -> Vec<InitHolding> {
    if matches!(
        node.policy(),
        TopologyManagerPolicy::Restricted | TopologyManagerPolicy::SingleNumaNode
    ) {
        return holdings;
    }
    let mut out = Vec::new();
    for h in holdings {
        if h.zones.len() <= 1 {
            out.push(h);
            continue;
        }
        for (name, amount) in h.amounts.iter() {
            let zones: Vec<u32> = h
                .zones
                .iter()
                .filter(|&id| node.available(id, name).is_some())
                .collect();
            let mut left = amount;
            for (k, &id) in zones.iter().enumerate() {
                let free = node.available(id, name).unwrap_or(0).max(0);
                let take = if k + 1 == zones.len() {
                    left
                } else {
                    left.min(free)
                };
                if take > 0 {
                    push(&mut out, NumaSet::from_ids([id]), name, take);
                }
                left -= take;
            }
        }
    }
    out
}

/// Every managed resource of the regular init containers, at its largest request,
/// held on every zone: for a pod whose placement the model does not reproduce.
pub fn conservative(node: &NodeTopology, pod: &PodRequest, all: u64) -> Vec<InitHolding> {
    let mut largest: BTreeMap<String, i64> = BTreeMap::new();
    for c in pod
        .containers()
        .iter()
        .filter(|c| c.kind == ContainerKind::Init)
    {
        for e in c.resources.entries() {
            let memory = e.kind.is_memory() && pod.is_guaranteed() && node.static_memory();
            let cpu = e.kind == ResourceKind::Cpu
                && c.exclusive_cpu
                && pod.is_guaranteed()
                && node.static_cpus();
            if (memory || cpu || e.kind == ResourceKind::Device) && node.reports(&e.name) {
                let slot = largest.entry(e.name.to_string()).or_insert(0);
                *slot = (*slot).max(e.amount);
            }
        }
    }
    let zones = node.numa_set(all);
    let mut out = Vec::new();
    for (name, amount) in largest {
        push(&mut out, zones, &name, amount);
    }
    out
}

/// Whether the kubelet keeps any of `resources` for a container: exclusive CPUs,
/// pinned memory (Guaranteed pods under the static managers) or devices.
fn managed(
    node: &NodeTopology,
    pod: &PodRequest,
    exclusive_cpu: bool,
    resources: &Resources,
) -> bool {
    resources.entries().iter().any(|e| match e.kind {
        ResourceKind::Cpu => exclusive_cpu && pod.is_guaranteed() && node.static_cpus(),
        ResourceKind::Memory | ResourceKind::Hugepages => {
            pod.is_guaranteed() && node.static_memory()
        }
        ResourceKind::Device => true,
        _ => false,
    } && node.reports(&e.name))
}

fn push(out: &mut Vec<InitHolding>, zones: NumaSet, name: &str, amount: i64) {
    match out.iter_mut().find(|h| h.zones == zones) {
        Some(h) => {
            let mut pairs: Vec<(String, i64)> =
                h.amounts.iter().map(|(n, a)| (n.to_owned(), a)).collect();
            pairs.push((name.to_owned(), amount));
            h.amounts = Resources::from_amounts(pairs.iter().map(|(n, a)| (n.as_str(), *a)));
        }
        None => out.push(InitHolding {
            zones,
            amounts: Resources::from_amounts([(name, amount)]),
        }),
    }
}

/// Subtracts `holdings` from `node`'s free amounts, each whole from every zone of its
/// set (see [`spread`]); [`release`] undoes it. CPUs are left alone when the node's
/// object already counts what init containers keep ([`NodeTopology::counts_init_cpus`]):
/// hold back only pods that object reflects.
pub fn hold(node: &mut NodeTopology, holdings: &[InitHolding]) {
    let counted = node.counts_init_cpus();
    for h in holdings {
        node.reserve_on_zones(&held(&h.amounts, counted), h.zones);
    }
}

/// Adds back what [`hold`] subtracted for `holdings`.
pub fn release(node: &mut NodeTopology, holdings: &[InitHolding]) {
    let counted = node.counts_init_cpus();
    for h in holdings {
        node.unreserve_on_zones(&held(&h.amounts, counted), h.zones);
    }
}

/// What of `amounts` the view holds back: without CPUs when the object counts them.
fn held(amounts: &Resources, cpus_counted: bool) -> std::borrow::Cow<'_, Resources> {
    if !cpus_counted
        || amounts
            .entries()
            .iter()
            .all(|e| e.kind != ResourceKind::Cpu)
    {
        return std::borrow::Cow::Borrowed(amounts);
    }
    std::borrow::Cow::Owned(Resources::from_amounts(
        amounts
            .entries()
            .iter()
            .filter(|e| e.kind != ResourceKind::Cpu)
            .map(|e| (&*e.name, e.amount)),
    ))
}
