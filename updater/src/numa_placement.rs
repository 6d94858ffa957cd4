//! The containers' NUMA placement, published in the format resource-topology-exporter
//! uses ([`tas_api::nrt::numa_placement`]): for every app container and sidecar the
//! kubelet gave exclusive CPUs, pinned memory or devices, the single NUMA node they
//! come from. Schedulers reading it (TAS's own preemption, among others) learn which
//! zone each pod's resources would come back to.
//!
//! A container whose resources span several NUMA nodes cannot be written in the
//! format; a reader decoding a set without it would mis-assign every container, so the
//! attributes are then left out altogether, as they are when the NUMA ids are not
//! `0..n` (the format indexes nodes by position).

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::numa_placement::{ContainerRef, Payload};

use crate::podresources::v1;
use crate::sysfs::Topology;

/// The payload for `pods` on `topology`; `None` when it cannot be written (see the
/// module documentation).
pub fn payload(topology: &Topology, pods: &[v1::PodResources]) -> Option<Payload> {
    let ids: Vec<u32> = topology.zones.iter().map(|z| z.id).collect();
    if ids.is_empty() || ids.iter().enumerate().any(|(i, &id)| i as u32 != id) {
        return None;
    }
    let zone_of_cpu: BTreeMap<i64, u32> = topology
        .zones
        .iter()
        .flat_map(|z| z.cpus.iter().map(move |&cpu| (i64::from(cpu), z.id)))
        .collect();
    let mut placements = Vec::new();
    for pod in pods {
        for c in &pod.containers {
            let mut zones = BTreeSet::new();
            for cpu in &c.cpu_ids {
                zones.insert(*zone_of_cpu.get(cpu)?);
            }
            let topologies = c
                .memory
                .iter()
                .filter_map(|m| m.topology.as_ref())
                .chain(c.devices.iter().filter_map(|d| d.topology.as_ref()));
            for t in topologies {
                for n in &t.nodes {
                    zones.insert(u32::try_from(n.id).ok()?);
                }
            }
            match zones.len() {
                0 => continue,
                1 => {}
                _ => return None,
            }
            let zone = *zones.first()?;
            placements.push((
                ContainerRef::new(&pod.namespace, &pod.name, &c.name),
                zone as usize,
            ));
        }
    }
    Payload::encode(ids.len(), placements).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::Zone;

    fn topology() -> Topology {
        Topology {
            zones: (0..2)
                .map(|id| Zone {
                    id,
                    cpus: (id * 4..id * 4 + 4).collect(),
                    ..Zone::default()
                })
                .collect(),
        }
    }

    fn container(name: &str, cpus: &[i64], device_numa: Option<i64>) -> v1::ContainerResources {
        v1::ContainerResources {
            name: name.to_owned(),
            cpu_ids: cpus.to_vec(),
            devices: device_numa
                .map(|n| v1::ContainerDevices {
                    resource_name: "example.com/gpu".to_owned(),
                    device_ids: vec!["gpu-0".to_owned()],
                    topology: Some(v1::TopologyInfo {
                        nodes: vec![v1::NumaNode { id: n }],
                    }),
                })
                .into_iter()
                .collect(),
            ..v1::ContainerResources::default()
        }
    }

    fn pod(name: &str, containers: Vec<v1::ContainerResources>) -> v1::PodResources {
        v1::PodResources {
            name: name.to_owned(),
            namespace: "ns".to_owned(),
            containers,
        }
    }

    #[test]
    fn pinned_containers_are_placed_and_decode_back() {
        let pods = [
            pod("a", vec![container("app", &[0, 1], Some(0))]),
            pod(
                "b",
                vec![container("app", &[4], None), container("shared", &[], None)],
            ),
        ];
        let payload = payload(&topology(), &pods).expect("writable");
        assert_eq!(payload.containers, 2);
        let decoded = payload
            .decode([
                ContainerRef::new("ns", "a", "app"),
                ContainerRef::new("ns", "b", "app"),
            ])
            .expect("decodes");
        assert_eq!(decoded[&ContainerRef::new("ns", "a", "app")], 0);
        assert_eq!(decoded[&ContainerRef::new("ns", "b", "app")], 1);
    }

    #[test]
    fn a_container_across_zones_leaves_the_attributes_out() {
        let pods = [pod("a", vec![container("app", &[0], Some(1))])];
        assert_eq!(payload(&topology(), &pods), None);
        let pods = [pod("a", vec![container("app", &[3, 4], None)])];
        assert_eq!(payload(&topology(), &pods), None);
    }
}
