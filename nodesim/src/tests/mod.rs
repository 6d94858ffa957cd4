//! Table tests of the admission model: the worked cases of the Topology Manager
//! reference, scopes, init containers, the memory manager's group rule, CPU id
//! selection, release, and the default scenario.

mod admission;
mod managers;
mod scenarios;

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::admit::{Admission, NodeState, Rejection};
use super::machine::{CpuManagerPolicy, KubeletSettings, Machine, MemoryManagerPolicy, Zone};
use super::request::{ContainerKind, ContainerRequest, PodKey, PodRequest, QosClass};

pub(super) const GI: u64 = 1 << 30;
pub(super) const NIC: &str = "example.com/nic";

/// A zone of `cpus` CPUs (ids assigned by [`machine`]) and `memory_gi` GiB.
pub(super) fn zone(cpus: u32, memory_gi: u64) -> Zone {
    Zone {
        id: 0,
        cpus: (0..cpus).collect(),
        memory: memory_gi * GI,
        hugepages: BTreeMap::new(),
        devices: BTreeMap::new(),
    }
}

/// Gives `zone` `n` NICs.
pub(super) fn with_nics(mut zone: Zone, n: u32) -> Zone {
    zone.devices
        .insert(NIC.into(), (0..n).map(|i| format!("nic-{i}")).collect());
    zone
}

/// Numbers zones and CPUs in order (and makes device ids unique per zone).
pub(super) fn machine(zones: Vec<Zone>) -> Machine {
    let mut next = 0;
    let zones = zones
        .into_iter()
        .enumerate()
        .map(|(id, mut zone)| {
            let id = id as u32;
            let count = zone.cpus.len() as u32;
            zone.id = id;
            zone.cpus = (next..next + count).collect();
            next += count;
            for ids in zone.devices.values_mut() {
                for device in ids.iter_mut() {
                    *device = format!("{device}-z{id}");
                }
            }
            zone
        })
        .collect();
    Machine {
        zones,
        reserved_cpus: BTreeSet::new(),
        max_pods: 110,
    }
}

pub(super) fn settings(
    policy: TopologyManagerPolicy,
    scope: TopologyManagerScope,
) -> KubeletSettings {
    KubeletSettings {
        topology_manager_policy: policy,
        topology_manager_scope: scope,
        cpu_manager_policy: CpuManagerPolicy::Static,
        memory_manager_policy: MemoryManagerPolicy::Static,
    }
}

/// A node under `policy`, container scope, both managers static.
pub(super) fn node(zones: Vec<Zone>, policy: TopologyManagerPolicy) -> NodeState {
    NodeState::new(
        &machine(zones),
        settings(policy, TopologyManagerScope::Container),
    )
}

/// A node whose memory manager is `None`: only CPUs (and devices) give hints.
pub(super) fn cpu_only_node(zones: Vec<Zone>, policy: TopologyManagerPolicy) -> NodeState {
    let mut settings = settings(policy, TopologyManagerScope::Container);
    settings.memory_manager_policy = MemoryManagerPolicy::None;
    NodeState::new(&machine(zones), settings)
}

pub(super) fn container(
    name: &str,
    kind: ContainerKind,
    amounts: &[(&str, u64)],
) -> ContainerRequest {
    ContainerRequest {
        name: name.into(),
        kind,
        amounts: amounts.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    }
}

/// An app container with `cpus` CPUs and `memory_gi` GiB.
pub(super) fn app(name: &str, cpus: u64, memory_gi: u64) -> ContainerRequest {
    container(
        name,
        ContainerKind::App,
        &[("cpu", cpus * 1000), ("memory", memory_gi * GI)],
    )
}

pub(super) fn pod(name: &str, qos: QosClass, containers: Vec<ContainerRequest>) -> PodRequest {
    PodRequest {
        key: key(name),
        qos,
        containers,
    }
}

/// A Guaranteed pod of one container.
pub(super) fn guaranteed(name: &str, cpus: u64, memory_gi: u64) -> PodRequest {
    pod(name, QosClass::Guaranteed, vec![app("c", cpus, memory_gi)])
}

pub(super) fn key(name: &str) -> PodKey {
    PodKey {
        namespace: "ns".into(),
        name: name.into(),
        uid: String::new(),
    }
}

pub(super) fn rejected(reason: &str) -> Admission {
    let message = match reason {
        "TopologyAffinityError" => {
            "Resources cannot be allocated with Topology locality".to_string()
        }
        _ => String::new(),
    };
    Admission::Rejected(Rejection {
        reason: reason.into(),
        message,
    })
}

/// The reason of a rejection, or `"Admitted"`.
pub(super) fn outcome(admission: &Admission) -> &str {
    match admission {
        Admission::Admitted => "Admitted",
        Admission::Rejected(rejection) => &rejection.reason,
    }
}

/// CPUs of container `container` of admitted `pod`.
pub(super) fn cpus(state: &NodeState, pod: &str, container: &str) -> Vec<u32> {
    state
        .cpu()
        .assigned(&key(pod), container)
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default()
}
