//! A scenario node (its [`Machine`] and
//! [`KubeletSettings`]) as the referee's machine and `KubeletConfiguration`.
//!
//! The scenario gives every zone the memory pods may use; the referee takes what sysfs
//! shows (MemTotal, hugepages included) and subtracts what the kubelet reserves. The
//! only reservation is the kubelet's default hard-eviction threshold (100Mi), placed on
//! the first zone, which for the memory manager `Static` is also the `reservedMemory`
//! the kubelet requires; so the Node's allocatable and every zone's allocatable memory
//! stay what the scenario says. Every CPU is a core of its own on socket 0 (scenarios
//! know no SMT), distances are 10 and 20 as the node's sysfs files say.

use serde_json::{Value, json};

use super::{Core, Device, Machine as RefereeMachine, Zone as RefereeZone};
use crate::machine::{CpuManagerPolicy, KubeletSettings, Machine, MemoryManagerPolicy};
use crate::sysfs::format_cpulist;

/// The kubelet's default `evictionHard` `memory.available`.
pub const EVICTION_RESERVE: u64 = 100 << 20;

/// `machine` as the referee runs it. The kubelet refuses to start a static CPU manager
/// without a CPU reservation; a scenario node that names no `reservedSystemCPUs` gets
/// one extra CPU on its first zone, reserved, so what pods can have stays what the
/// scenario says. The node's sysfs files are written from this machine too, so the
/// node agent sees the CPU the kubelet counts.
pub fn with_cpu_reservation(machine: &Machine, settings: &KubeletSettings) -> Machine {
    let mut machine = machine.clone();
    if settings.cpu_manager_policy == CpuManagerPolicy::Static && machine.reserved_cpus.is_empty() {
        let next = machine
            .zones
            .iter()
            .flat_map(|z| z.cpus.iter().copied())
            .max()
            .map_or(0, |max| max + 1);
        if let Some(first) = machine.zones.first_mut() {
            first.cpus.insert(next);
            machine.reserved_cpus.insert(next);
        }
    }
    machine
}

/// The referee's description of `machine`.
pub fn machine(machine: &Machine) -> RefereeMachine {
    let first = machine.zones.first().map(|z| z.id);
    let mut devices = std::collections::BTreeMap::<String, Vec<Device>>::new();
    let zones = machine
        .zones
        .iter()
        .map(|zone| {
            for (resource, ids) in &zone.devices {
                devices
                    .entry(resource.clone())
                    .or_default()
                    .extend(ids.iter().map(|id| Device {
                        id: id.clone(),
                        numa: Some(zone.id),
                    }));
            }
            let huge: u64 = zone.hugepages.values().sum();
            let reserve = if Some(zone.id) == first {
                EVICTION_RESERVE
            } else {
                0
            };
            RefereeZone {
                id: zone.id,
                memory: zone.memory + huge + reserve,
                hugepages: zone
                    .hugepages
                    .iter()
                    .map(|(name, bytes)| {
                        let size = name.trim_start_matches("hugepages-");
                        let page: u64 = if size == "1Gi" { 1 << 30 } else { 2 << 20 };
                        (size.to_owned(), bytes / page)
                    })
                    .collect(),
                cores: zone
                    .cpus
                    .iter()
                    .map(|&cpu| Core {
                        socket: 0,
                        cpus: vec![cpu],
                    })
                    .collect(),
                distances: machine
                    .zones
                    .iter()
                    .map(|other| if other.id == zone.id { 10 } else { 20 })
                    .collect(),
            }
        })
        .collect();
    RefereeMachine { zones, devices }
}

/// The node's `KubeletConfiguration`: what the referee runs and the node agent reads.
pub fn kubelet_config(machine: &Machine, settings: &KubeletSettings) -> Value {
    let mut config = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "topologyManagerPolicy": settings.topology_manager_policy.as_str(),
        "topologyManagerScope": settings.topology_manager_scope.as_str(),
        "cpuManagerPolicy": settings.cpu_manager_policy.as_str(),
        "memoryManagerPolicy": settings.memory_manager_policy.as_str(),
        "maxPods": machine.max_pods,
    });
    if !machine.reserved_cpus.is_empty() {
        config["reservedSystemCPUs"] = format_cpulist(machine.reserved_cpus.iter().copied()).into();
    }
    if settings.memory_manager_policy == MemoryManagerPolicy::Static
        && let Some(first) = machine.zones.first()
    {
        config["reservedMemory"] = json!([{
            "numaNode": first.id,
            "limits": {"memory": EVICTION_RESERVE.to_string()},
        }]);
    }
    config
}
