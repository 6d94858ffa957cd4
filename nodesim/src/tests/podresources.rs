//! What the fake kubelet reports: `GetAllocatableResources` and `List`.

use tas_api::nrt::TopologyManagerPolicy::SingleNumaNode;
use tas_podresources::v1;

use super::*;
use crate::node::{allocatable_resources, pod_resources};
use crate::request::ContainerKind::{App, Init};

fn numa(topology: &Option<v1::TopologyInfo>) -> Vec<i64> {
    topology
        .as_ref()
        .map(|t| t.nodes.iter().map(|n| n.id).collect())
        .unwrap_or_default()
}

#[test]
fn allocatable_lists_cpus_memory_per_zone_and_each_device() {
    let mut pages = with_nics(zone(2, 4), 1);
    pages.hugepages.insert("hugepages-2Mi".into(), 512 << 20);
    let state = node(vec![zone(2, 4), pages], SingleNumaNode);
    let allocatable = allocatable_resources(&state);
    assert_eq!(allocatable.cpu_ids, [0, 1, 2, 3]);
    let memory: Vec<(String, u64, Vec<i64>)> = allocatable
        .memory
        .iter()
        .map(|m| (m.memory_type.clone(), m.size, numa(&m.topology)))
        .collect();
    let expected = [
        ("memory", 4 * GI, vec![0]),
        ("hugepages-2Mi", 512 << 20, vec![1]),
        ("memory", 4 * GI, vec![1]),
    ]
    .map(|(t, s, n)| (t.to_string(), s, n));
    assert_eq!(memory, expected);
    assert_eq!(allocatable.devices.len(), 1);
    assert_eq!(allocatable.devices[0].device_ids, ["nic-0-z1"]);
    assert_eq!(numa(&allocatable.devices[0].topology), [1]);
}

#[test]
fn managers_off_report_no_cpus_or_memory() {
    let mut settings = settings(
        SingleNumaNode,
        tas_api::nrt::TopologyManagerScope::Container,
    );
    settings.cpu_manager_policy = CpuManagerPolicy::None;
    settings.memory_manager_policy = MemoryManagerPolicy::None;
    let mut state = NodeState::new(&machine(vec![zone(2, 4), zone(2, 4)]), settings);
    let allocatable = allocatable_resources(&state);
    assert!(allocatable.cpu_ids.is_empty() && allocatable.memory.is_empty());
    assert_eq!(state.admit(&guaranteed("p", 2, 1)), Admission::Admitted);
    let listed = pod_resources(&state);
    assert!(listed[0].containers[0].cpu_ids.is_empty());
    assert!(listed[0].containers[0].memory.is_empty());
}

#[test]
fn list_shows_exclusive_allocations_of_app_containers() {
    let mut state = node(vec![zone(4, 8), with_nics(zone(4, 8), 2)], SingleNumaNode);
    let guaranteed_pod = pod(
        "g",
        QosClass::Guaranteed,
        vec![
            container("init", Init, &[("cpu", 1000), ("memory", GI)]),
            container("c", App, &[("cpu", 2000), ("memory", 2 * GI), (NIC, 1)]),
        ],
    );
    let burstable_pod = pod(
        "b",
        QosClass::Burstable,
        vec![container("c", App, &[("cpu", 500)])],
    );
    assert_eq!(state.admit(&guaranteed_pod), Admission::Admitted);
    assert_eq!(state.admit(&burstable_pod), Admission::Admitted);

    let listed = pod_resources(&state);
    let names: Vec<&str> = listed.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["g", "b"], "admission order");
    let g = &listed[0];
    assert_eq!(g.namespace, "ns");
    assert_eq!(
        g.containers.len(),
        1,
        "finished init containers are not listed"
    );
    let c = &g.containers[0];
    assert_eq!(c.name, "c");
    assert_eq!(c.cpu_ids, [4, 5]);
    assert_eq!(c.memory.len(), 1);
    assert_eq!(
        (c.memory[0].memory_type.as_str(), c.memory[0].size),
        ("memory", 2 * GI)
    );
    assert_eq!(numa(&c.memory[0].topology), [1]);
    assert_eq!(c.devices.len(), 1);
    assert_eq!(c.devices[0].resource_name, NIC);
    assert_eq!(numa(&c.devices[0].topology), [1]);

    let b = &listed[1].containers[0];
    assert!(b.cpu_ids.is_empty() && b.memory.is_empty() && b.devices.is_empty());

    state.release(&key("g"));
    let names: Vec<String> = pod_resources(&state).into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["b"]);
}
