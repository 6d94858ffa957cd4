//! The memory manager, static policy: memory and hugepages of Guaranteed pods pinned to
//! NUMA nodes.
//!
//! Hints: one list for all memory resources a container (or, in pod scope, the pod)
//! requests: every mask whose free amounts (plus what the pod's init containers left for
//! reuse on that same mask) cover every request, and whose nodes are not bound to a
//! different group. Preferred = the fewest nodes that could ever hold the requests,
//! counted on allocatable amounts.
//!
//! Groups: a NUMA node already used by a multi-node allocation serves only allocations
//! on exactly that set of nodes, and a node used by a single-node allocation serves only
//! single-node ones; a node is free of its group once nothing is allocated on it.
//!
//! Allocation uses the Topology Manager's mask; with "any" it uses the best of its own
//! hints, and a mask that does not cover the request is widened to the narrowest mask
//! that does (best-effort). Each requested resource is taken from the mask's nodes in
//! ascending order; the container's block reports the full request on the whole mask,
//! as the kubelet's podresources API does. Policy `None` pins nothing.

use std::collections::BTreeMap;

use crate::admit::AllocationError;
use crate::machine::{Machine, MemoryManagerPolicy};
use crate::mask::{Hint, NumaMask};
use crate::request::{ContainerKind, ContainerRequest, PodKey, PodRequest, is_memory_resource};
use crate::topology_manager::ResourceHints;

/// A container's pinned memory of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryBlock {
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes requested.
    pub size: u64,
    /// The NUMA nodes it is pinned to.
    pub affinity: NumaMask,
}

/// Pinned memory of one node.
#[derive(Debug, Clone)]
pub struct MemoryManager {
    policy: MemoryManagerPolicy,
    zones: Vec<ZoneMemory>,
    pods: BTreeMap<PodKey, PodMemory>,
}

#[derive(Debug, Clone)]
struct ZoneMemory {
    allocatable: BTreeMap<String, u64>,
    free: BTreeMap<String, u64>,
    /// Container allocations using this node.
    assignments: u32,
    /// The mask of those allocations (all equal); empty when unused.
    group: NumaMask,
}

#[derive(Debug, Clone, Default)]
struct PodMemory {
    containers: BTreeMap<String, Vec<MemoryBlock>>,
    /// (zone, resource, bytes) taken from free amounts, given back on release.
    taken: Vec<(usize, String, u64)>,
    /// Masks of the pod's container allocations.
    groups: Vec<NumaMask>,
    /// What init containers left for reuse: mask → resource → bytes.
    reusable: BTreeMap<NumaMask, BTreeMap<String, u64>>,
}

type Amounts = BTreeMap<String, u64>;

impl MemoryManager {
    /// Everything free.
    pub fn new(machine: &Machine, policy: MemoryManagerPolicy) -> Self {
        let zones = machine
            .zones
            .iter()
            .map(|zone| {
                let pools = machine.memory_of(zone);
                ZoneMemory {
                    allocatable: pools.clone(),
                    free: pools,
                    assignments: 0,
                    group: NumaMask::EMPTY,
                }
            })
            .collect();
        Self {
            policy,
            zones,
            pods: BTreeMap::new(),
        }
    }

    /// Free bytes of `resource` on `zone`.
    pub fn free(&self, zone: u32, resource: &str) -> u64 {
        self.zones
            .get(zone as usize)
            .and_then(|z| z.free.get(resource).copied())
            .unwrap_or(0)
    }

    /// The blocks of `container` of `pod`.
    pub fn assigned(&self, pod: &PodKey, container: &str) -> &[MemoryBlock] {
        self.pods
            .get(pod)
            .and_then(|p| p.containers.get(container))
            .map_or(&[], Vec::as_slice)
    }

    fn requests(&self, pod: &PodRequest, container: &ContainerRequest) -> Amounts {
        if self.policy == MemoryManagerPolicy::None || !pod.is_guaranteed() {
            return Amounts::new();
        }
        container
            .amounts
            .iter()
            .filter(|(name, _)| is_memory_resource(name))
            .map(|(name, &amount)| (name.clone(), amount))
            .collect()
    }

    /// Hints for one container.
    pub fn container_hints(&self, pod: &PodRequest, container: &ContainerRequest) -> ResourceHints {
        self.hints_by_resource(&pod.key, &self.requests(pod, container))
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&self, pod: &PodRequest) -> ResourceHints {
        let mut requests = Amounts::new();
        for container in &pod.containers {
            for name in self.requests(pod, container).keys() {
                let amount = pod.effective(|c| c.get(name));
                requests.insert(name.clone(), amount);
            }
        }
        self.hints_by_resource(&pod.key, &requests)
    }

    fn hints_by_resource(&self, pod: &PodKey, requests: &Amounts) -> ResourceHints {
        let hints = self.hints(pod, requests);
        requests
            .keys()
            .map(|name| (name.clone(), Some(hints.clone())))
            .collect()
    }

    fn hints(&self, pod: &PodKey, requests: &Amounts) -> Vec<Hint> {
        let masks = NumaMask::subsets(self.zones.len() as u32);
        let narrowest = masks
            .iter()
            .filter(|&&m| self.covers(m, requests, |z, r| z.allocatable.get(r).copied()))
            .map(|m| m.count())
            .min()
            .unwrap_or(self.zones.len() as u32);
        masks
            .into_iter()
            .filter(|&m| self.fits(pod, m, requests) && self.group_allows(m))
            .map(|m| Hint::new(m, m.count() == narrowest))
            .collect()
    }

    fn covers(
        &self,
        mask: NumaMask,
        requests: &Amounts,
        amount: impl Fn(&ZoneMemory, &str) -> Option<u64>,
    ) -> bool {
        requests.iter().all(|(name, &wanted)| {
            let sum: u64 = mask
                .ids()
                .filter_map(|id| self.zones.get(id as usize))
                .map(|z| amount(z, name).unwrap_or(0))
                .sum();
            sum >= wanted
        })
    }

    /// Free amounts plus the pod's reusable memory on exactly `mask` cover `requests`.
    fn fits(&self, pod: &PodKey, mask: NumaMask, requests: &Amounts) -> bool {
        let reusable = self.reusable(pod, mask);
        self.covers(mask, requests, |z, name| {
            Some(z.free.get(name).copied().unwrap_or(0) + reusable.get(name).copied().unwrap_or(0))
        })
    }

    fn reusable(&self, pod: &PodKey, mask: NumaMask) -> Amounts {
        self.pods
            .get(pod)
            .and_then(|p| p.reusable.get(&mask).cloned())
            .unwrap_or_default()
    }

    fn group_allows(&self, mask: NumaMask) -> bool {
        mask.ids()
            .filter_map(|id| self.zones.get(id as usize))
            .all(|z| z.assignments == 0 || z.group == mask)
    }

    /// Pins `container`'s memory on `affinity` (see the module docs).
    pub fn allocate(
        &mut self,
        pod: &PodRequest,
        container: &ContainerRequest,
        affinity: Option<NumaMask>,
    ) -> Result<(), AllocationError> {
        let requests = self.requests(pod, container);
        if requests.is_empty() {
            return Ok(());
        }
        let fail = |what: &str| AllocationError(format!("[memorymanager] {what}"));
        let hints = self.hints(&pod.key, &requests);
        let mut mask = match affinity {
            Some(mask) => mask,
            None => best(hints.iter().copied())
                .ok_or_else(|| fail("no NUMA nodes with enough memory are available"))?,
        };
        if !self.fits(&pod.key, mask, &requests) {
            let wider = NumaMask::subsets(self.zones.len() as u32)
                .into_iter()
                .filter(|&m| mask.is_subset_of(m) && self.fits(&pod.key, m, &requests))
                .map(|m| Hint::new(m, false));
            mask = best(wider).ok_or_else(|| {
                fail("failed to find NUMA nodes to extend the current topology hint")
            })?;
        }
        if !self.group_allows(mask) {
            return Err(fail("preferred hint violates NUMA node allocation"));
        }

        let reusable = self.reusable(&pod.key, mask);
        let mut taken = Vec::new();
        let mut blocks = Vec::new();
        for (name, &size) in &requests {
            let mut need = size.saturating_sub(reusable.get(name).copied().unwrap_or(0));
            for id in mask.ids() {
                let zone = &mut self.zones[id as usize];
                let free = zone.free.entry(name.clone()).or_default();
                let take = need.min(*free);
                *free -= take;
                need -= take;
                if take > 0 {
                    taken.push((id as usize, name.clone(), take));
                }
            }
            blocks.push(MemoryBlock {
                resource: name.clone(),
                size,
                affinity: mask,
            });
        }
        for id in mask.ids() {
            let zone = &mut self.zones[id as usize];
            zone.assignments += 1;
            zone.group = mask;
        }

        let held = self.pods.entry(pod.key.clone()).or_default();
        held.taken.extend(taken);
        held.groups.push(mask);
        let reuse = held.reusable.entry(mask).or_default();
        for block in &blocks {
            let entry = reuse.entry(block.resource.clone()).or_default();
            match container.kind {
                ContainerKind::Init => *entry = (*entry).max(block.size),
                ContainerKind::Sidecar | ContainerKind::App => {
                    *entry = entry.saturating_sub(block.size);
                }
            }
        }
        held.containers.insert(container.name.clone(), blocks);
        Ok(())
    }

    /// Gives back everything `pod` holds.
    pub fn release(&mut self, pod: &PodKey) {
        let Some(held) = self.pods.remove(pod) else {
            return;
        };
        for (id, name, bytes) in held.taken {
            *self.zones[id].free.entry(name).or_default() += bytes;
        }
        for mask in held.groups {
            for id in mask.ids() {
                let zone = &mut self.zones[id as usize];
                zone.assignments -= 1;
                if zone.assignments == 0 {
                    zone.group = NumaMask::EMPTY;
                }
            }
        }
    }
}

/// Preferred first, then the narrowest.
fn best(hints: impl Iterator<Item = Hint>) -> Option<NumaMask> {
    hints
        .filter_map(|h| h.affinity.map(|m| (!h.preferred, m.count(), m.bits(), m)))
        .min()
        .map(|(.., mask)| mask)
}
