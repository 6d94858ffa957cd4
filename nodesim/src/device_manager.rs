//! The device manager: device plugin resources with NUMA affinity, for pods of any QoS.
//!
//! Hints per requested device resource: "don't care" when none of its devices has a
//! NUMA node; an empty list ("impossible") when fewer are available than requested;
//! otherwise every mask holding enough available devices (the pod's reusable ones must
//! all lie inside it), preferred when the mask has the fewest nodes that could ever hold
//! the request, counted over all devices.
//!
//! Allocation: the pod's reusable devices (left by its init containers) first, then free
//! devices on the hinted nodes, then any free device; lowest ids first.

use std::collections::{BTreeMap, BTreeSet};

use crate::admit::AllocationError;
use crate::machine::Machine;
use crate::mask::{Hint, NumaMask};
use crate::request::{ContainerKind, ContainerRequest, PodKey, PodRequest};
use crate::topology_manager::ResourceHints;

/// Devices of one node.
#[derive(Debug, Clone)]
pub struct DeviceManager {
    zones: u32,
    /// Resource → device id → its NUMA node.
    devices: BTreeMap<String, BTreeMap<String, Option<u32>>>,
    free: BTreeMap<String, BTreeSet<String>>,
    pods: BTreeMap<PodKey, PodDevices>,
}

#[derive(Debug, Clone, Default)]
struct PodDevices {
    /// Container → resource → device ids.
    containers: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    reusable: BTreeMap<String, BTreeSet<String>>,
}

impl DeviceManager {
    /// Every device free.
    pub fn new(machine: &Machine) -> Self {
        let mut devices: BTreeMap<String, BTreeMap<String, Option<u32>>> = BTreeMap::new();
        for zone in &machine.zones {
            for (name, ids) in &zone.devices {
                let of_resource = devices.entry(name.clone()).or_default();
                for id in ids {
                    of_resource.insert(id.clone(), Some(zone.id));
                }
            }
        }
        let free = devices
            .iter()
            .map(|(name, ids)| (name.clone(), ids.keys().cloned().collect()))
            .collect();
        Self {
            zones: machine.zone_count(),
            devices,
            free,
            pods: BTreeMap::new(),
        }
    }

    /// Whether `resource` is a device resource of this node.
    pub fn is_device(&self, resource: &str) -> bool {
        self.devices.contains_key(resource)
    }

    /// The NUMA node of device `id` of `resource`.
    pub fn zone_of(&self, resource: &str, id: &str) -> Option<u32> {
        self.devices.get(resource)?.get(id).copied().flatten()
    }

    /// Free device ids of `resource`.
    pub fn free(&self, resource: &str) -> BTreeSet<String> {
        self.free.get(resource).cloned().unwrap_or_default()
    }

    /// The devices of `container` of `pod`: resource → ids.
    pub fn assigned(&self, pod: &PodKey, container: &str) -> BTreeMap<String, BTreeSet<String>> {
        self.pods
            .get(pod)
            .and_then(|p| p.containers.get(container).cloned())
            .unwrap_or_default()
    }

    /// Hints for one container.
    pub fn container_hints(&self, pod: &PodRequest, container: &ContainerRequest) -> ResourceHints {
        let requests = container
            .amounts
            .iter()
            .filter(|(name, _)| self.is_device(name))
            .map(|(name, &n)| (name.clone(), n));
        self.hints(&pod.key, requests)
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&self, pod: &PodRequest) -> ResourceHints {
        let names: BTreeSet<&String> = pod
            .containers
            .iter()
            .flat_map(|c| c.amounts.keys())
            .filter(|name| self.is_device(name))
            .collect();
        let requests = names
            .into_iter()
            .map(|name| (name.clone(), pod.effective(|c| c.get(name))));
        self.hints(&pod.key, requests)
    }

    fn hints(&self, pod: &PodKey, requests: impl Iterator<Item = (String, u64)>) -> ResourceHints {
        requests
            .filter(|&(_, n)| n > 0)
            .map(|(name, n)| {
                let hints = self.resource_hints(pod, &name, n as usize);
                (name, hints)
            })
            .collect()
    }

    fn resource_hints(&self, pod: &PodKey, resource: &str, request: usize) -> Option<Vec<Hint>> {
        let all = &self.devices[resource];
        if all.values().all(Option::is_none) {
            return None;
        }
        let reusable = self.reusable(pod, resource);
        let available = self.free(resource);
        if available.len() + reusable.len() < request {
            return Some(Vec::new());
        }
        let in_mask = |mask: NumaMask, id: &String| all[id].is_some_and(|z| mask.contains(z));
        let masks = NumaMask::subsets(self.zones);
        let narrowest = masks
            .iter()
            .filter(|&&m| all.keys().filter(|id| in_mask(m, id)).count() >= request)
            .map(|m| m.count())
            .min()
            .unwrap_or(self.zones);
        let hints = masks
            .into_iter()
            .filter(|&m| {
                // Reusable devices without a node do not constrain the mask.
                let reusable_ok = reusable
                    .iter()
                    .all(|id| all[id].is_none() || in_mask(m, id));
                let matching = reusable
                    .iter()
                    .chain(&available)
                    .filter(|id| in_mask(m, id));
                reusable_ok && matching.count() >= request
            })
            .map(|m| Hint::new(m, m.count() == narrowest))
            .collect();
        Some(hints)
    }

    fn reusable(&self, pod: &PodKey, resource: &str) -> BTreeSet<String> {
        self.pods
            .get(pod)
            .and_then(|p| p.reusable.get(resource).cloned())
            .unwrap_or_default()
    }

    /// Gives `container` its devices, on `affinity` where possible.
    pub fn allocate(
        &mut self,
        pod: &PodRequest,
        container: &ContainerRequest,
        affinity: Option<NumaMask>,
    ) -> Result<(), AllocationError> {
        let mask = affinity.unwrap_or(NumaMask::all(self.zones));
        let mut granted = BTreeMap::new();
        for (name, &request) in &container.amounts {
            if !self.is_device(name) || request == 0 {
                continue;
            }
            let request = request as usize;
            let reusable = self.reusable(&pod.key, name);
            let free = self.free(name);
            if reusable.len() + free.len() < request {
                return Err(AllocationError(format!(
                    "requested number of devices unavailable for {name}. Requested: {request}, Available: {}",
                    reusable.len() + free.len()
                )));
            }
            let on_mask = |id: &&String| self.zone_of(name, id).is_some_and(|z| mask.contains(z));
            let chosen: BTreeSet<String> = reusable
                .iter()
                .chain(free.iter().filter(on_mask))
                .chain(free.iter().filter(|id| !on_mask(id)))
                .take(request)
                .cloned()
                .collect();
            granted.insert(name.clone(), chosen);
        }
        if granted.is_empty() {
            return Ok(());
        }

        let held = self.pods.entry(pod.key.clone()).or_default();
        for (name, ids) in &granted {
            let free = self.free.entry(name.clone()).or_default();
            free.retain(|id| !ids.contains(id));
            let reuse = held.reusable.entry(name.clone()).or_default();
            match container.kind {
                ContainerKind::Init => reuse.extend(ids.iter().cloned()),
                ContainerKind::Sidecar | ContainerKind::App => reuse.retain(|id| !ids.contains(id)),
            }
        }
        held.containers.insert(container.name.clone(), granted);
        Ok(())
    }

    /// Frees every device `pod` holds.
    pub fn release(&mut self, pod: &PodKey) {
        let Some(held) = self.pods.remove(pod) else {
            return;
        };
        for devices in held.containers.into_values() {
            for (name, ids) in devices {
                self.free.entry(name).or_default().extend(ids);
            }
        }
    }
}
