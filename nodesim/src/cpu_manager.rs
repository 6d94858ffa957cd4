//! The CPU manager, static policy: exclusive CPU ids for integer CPUs of Guaranteed pods.
//!
//! Hints: for every NUMA mask whose free CPUs (plus CPUs the pod's finished init
//! containers left for reuse) cover the request; preferred when the mask has the
//! fewest nodes that could ever hold the request, counted on *all* CPUs of the mask
//! (reserved ones included), not the free ones.
//!
//! Allocation takes CPUs inside the hinted zones first, then anywhere (best-effort can
//! admit with a hint that does not cover the request). Within a set of candidates it
//! takes whole free zones while the request is at least a zone, then packs the rest
//! into the zones with the fewest candidates left, lowest ids first. An init
//! container's CPUs become reusable by the containers after it, and are taken first:
//! a pod holds the union of its containers' CPUs until it is released.
//! Policy `none` hands out nothing and gives no hints.

use std::collections::{BTreeMap, BTreeSet};

use crate::admit::AllocationError;
use crate::machine::{CpuManagerPolicy, Machine};
use crate::mask::{Hint, NumaMask};
use crate::request::{CPU, ContainerKind, ContainerRequest, PodKey, PodRequest};
use crate::topology_manager::ResourceHints;

/// Exclusive CPUs of one node.
#[derive(Debug, Clone)]
pub struct CpuManager {
    policy: CpuManagerPolicy,
    machine: Machine,
    free: BTreeSet<u32>,
    pods: BTreeMap<PodKey, PodCpus>,
}

#[derive(Debug, Clone, Default)]
struct PodCpus {
    containers: BTreeMap<String, BTreeSet<u32>>,
    reusable: BTreeSet<u32>,
}

/// Exclusive CPUs `container` gets: its integer CPU request if the pod is Guaranteed,
/// else none (it runs in the shared pool).
pub fn guaranteed_cpus(pod: &PodRequest, container: &ContainerRequest) -> usize {
    let milli = container.get(CPU);
    if !pod.is_guaranteed() || !milli.is_multiple_of(1000) {
        return 0;
    }
    (milli / 1000) as usize
}

impl CpuManager {
    /// All allocatable CPUs free.
    pub fn new(machine: &Machine, policy: CpuManagerPolicy) -> Self {
        Self {
            policy,
            machine: machine.clone(),
            free: machine.allocatable_cpus(),
            pods: BTreeMap::new(),
        }
    }

    /// CPUs not held by any pod (shared pool; reserved CPUs excluded).
    pub fn free(&self) -> &BTreeSet<u32> {
        &self.free
    }

    /// The CPUs of `container` of `pod`, if it has exclusive ones.
    pub fn assigned(&self, pod: &PodKey, container: &str) -> Option<&BTreeSet<u32>> {
        self.pods.get(pod)?.containers.get(container)
    }

    /// Hints for one container.
    pub fn container_hints(&self, pod: &PodRequest, container: &ContainerRequest) -> ResourceHints {
        self.hints_for(&pod.key, guaranteed_cpus(pod, container))
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&self, pod: &PodRequest) -> ResourceHints {
        let request = pod.effective(|c| guaranteed_cpus(pod, c) as u64);
        self.hints_for(&pod.key, request as usize)
    }

    fn hints_for(&self, pod: &PodKey, request: usize) -> ResourceHints {
        if self.policy == CpuManagerPolicy::None || request == 0 {
            return ResourceHints::new();
        }
        let available = self.available(pod);
        let masks = NumaMask::subsets(self.machine.zone_count());
        let narrowest = masks
            .iter()
            .filter(|&&m| self.machine.cpus_in(m).len() >= request)
            .map(|m| m.count())
            .min()
            .unwrap_or(self.machine.zone_count());
        let hints = masks
            .iter()
            .filter(|&&m| self.machine.cpus_in(m).intersection(&available).count() >= request)
            .map(|&m| Hint::new(m, m.count() == narrowest))
            .collect();
        ResourceHints::from([(CPU.to_string(), Some(hints))])
    }

    /// Free CPUs plus those the pod's init containers left for reuse.
    fn available(&self, pod: &PodKey) -> BTreeSet<u32> {
        let mut available = self.free.clone();
        if let Some(held) = self.pods.get(pod) {
            available.extend(&held.reusable);
        }
        available
    }

    /// Gives `container` its exclusive CPUs, inside `affinity` where possible.
    pub fn allocate(
        &mut self,
        pod: &PodRequest,
        container: &ContainerRequest,
        affinity: Option<NumaMask>,
    ) -> Result<(), AllocationError> {
        let request = guaranteed_cpus(pod, container);
        if self.policy == CpuManagerPolicy::None || request == 0 {
            return Ok(());
        }
        let available = self.available(&pod.key);
        if available.len() < request {
            return Err(AllocationError(format!(
                "not enough cpus available to satisfy request: requested={request}, available={}",
                available.len()
            )));
        }
        let aligned = self
            .machine
            .cpus_in(affinity.unwrap_or(self.machine.all_zones()));
        let reusable = self
            .pods
            .get(&pod.key)
            .map(|p| p.reusable.clone())
            .unwrap_or_default();
        let mut chosen = BTreeSet::new();
        let tiers = [
            reusable.intersection(&aligned).copied().collect(),
            self.free.intersection(&aligned).copied().collect(),
            reusable.clone(),
            self.free.clone(),
        ];
        for tier in tiers {
            let candidates: BTreeSet<u32> = tier.difference(&chosen).copied().collect();
            let take = self.pack(&candidates, request - chosen.len());
            chosen.extend(take);
        }

        for cpu in &chosen {
            self.free.remove(cpu);
        }
        let held = self.pods.entry(pod.key.clone()).or_default();
        match container.kind {
            ContainerKind::Init => held.reusable.extend(&chosen),
            ContainerKind::Sidecar | ContainerKind::App => {
                held.reusable.retain(|cpu| !chosen.contains(cpu));
            }
        }
        held.containers.insert(container.name.clone(), chosen);
        Ok(())
    }

    /// Up to `want` CPUs of `candidates`: whole zones first, then packed.
    fn pack(&self, candidates: &BTreeSet<u32>, want: usize) -> Vec<u32> {
        let mut taken = Vec::new();
        let mut zones: Vec<(u32, Vec<u32>)> = self
            .machine
            .zones
            .iter()
            .map(|z| (z.id, z.cpus.intersection(candidates).copied().collect()))
            .collect();
        for (id, cpus) in &mut zones {
            let whole = self.machine.zones[*id as usize]
                .cpus
                .difference(&self.machine.reserved_cpus)
                .count();
            if !cpus.is_empty() && cpus.len() == whole && cpus.len() <= want - taken.len() {
                taken.append(cpus);
            }
        }
        zones.sort_by_key(|(id, cpus)| (cpus.len(), *id));
        for (_, cpus) in zones {
            for cpu in cpus.into_iter().take(want - taken.len()) {
                taken.push(cpu);
            }
        }
        taken
    }

    /// Frees every CPU `pod` holds.
    pub fn release(&mut self, pod: &PodKey) {
        if let Some(held) = self.pods.remove(pod) {
            for cpus in held.containers.values() {
                self.free.extend(cpus);
            }
        }
    }
}
