//! A large busy node, as the kubelet and sysfs would show it to the node agent.
//!
//! 256 CPUs (128 cores with their hyperthread siblings) in 8 NUMA zones on two sockets,
//! 128 GiB per zone with 16 GiB of 1 GiB and 1 GiB of 2 MiB hugepages, a GPU and 16 NIC
//! virtual functions per zone, plus FUSE devices without NUMA affinity. It runs 200
//! pods: shared-pool pods, Guaranteed pods with exclusive CPUs and pinned memory (some
//! with hugepages), GPU and NIC pods, and a few databases spanning two zones.
//! Allocations never exceed what a zone has, as on a real node. Seeded: every run sees
//! the same node.

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tas_updater::podresources::v1;
use tas_updater::sysfs::{Topology, Zone};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const ZONES: u32 = 8;
const CORES_PER_ZONE: u32 = 16;
/// Logical CPU `c` and `c + SIBLING_OFFSET` are the two threads of one core.
const SIBLING_OFFSET: u32 = ZONES * CORES_PER_ZONE;
const MEMORY_PER_ZONE: u64 = 128 * GIB;
const HUGE_1G_PER_ZONE: u64 = 16 * GIB;
const HUGE_2M_PER_ZONE: u64 = GIB;
/// Memory the kubelet keeps for the system, all on zone 0.
const SYSTEM_MEMORY: u64 = 4 * GIB;
const GPUS_PER_ZONE: u32 = 1;
const VFS_PER_ZONE: u32 = 16;
const PODS: usize = 200;

const GPU: &str = "nvidia.com/gpu";
const VF: &str = "example.com/nic-vf";
const FUSE: &str = "example.com/fuse";
/// The characters Kubernetes uses for generated name suffixes.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A generated name suffix of `len` characters; seeded, so every run sees the same names.
fn suffix(rng: &mut StdRng, len: usize) -> String {
    let pick = |rng: &mut StdRng| SUFFIX_ALPHABET[rng.random_range(0..SUFFIX_ALPHABET.len())];
    (0..len).map(|_| char::from(pick(rng))).collect()
}

fn numa(ids: &[u32]) -> Option<v1::TopologyInfo> {
    Some(v1::TopologyInfo {
        nodes: ids
            .iter()
            .map(|&id| v1::NumaNode { id: i64::from(id) })
            .collect(),
    })
}

fn memory_block(memory_type: &str, size: u64, zones: &[u32]) -> v1::ContainerMemory {
    v1::ContainerMemory {
        memory_type: memory_type.to_owned(),
        size,
        topology: numa(zones),
    }
}

fn devices(resource: &str, ids: Vec<String>, zone: Option<u32>) -> v1::ContainerDevices {
    v1::ContainerDevices {
        resource_name: resource.to_owned(),
        device_ids: ids,
        topology: zone.and_then(|z| numa(&[z])),
    }
}

pub fn topology() -> Topology {
    let socket = |z: u32| z * 2 / ZONES;
    let zones = (0..ZONES)
        .map(|z| Zone {
            id: z,
            cpus: (z * CORES_PER_ZONE..(z + 1) * CORES_PER_ZONE)
                .flat_map(|core| [core, core + SIBLING_OFFSET])
                .collect(),
            memory_bytes: MEMORY_PER_ZONE,
            hugepages: BTreeMap::from([
                ("hugepages-1Gi".to_owned(), HUGE_1G_PER_ZONE),
                ("hugepages-2Mi".to_owned(), HUGE_2M_PER_ZONE),
            ]),
            distances: (0..ZONES)
                .map(|to| {
                    let d = if to == z {
                        10
                    } else if socket(to) == socket(z) {
                        12
                    } else {
                        32
                    };
                    (to, d)
                })
                .collect(),
        })
        .collect();
    Topology { zones }
}

fn gpu_id(zone: u32, i: u32) -> String {
    format!("GPU-{zone:02}{i:02}a1c3-7e2b-4f19-9d0e")
}

fn vf_id(zone: u32, i: u32) -> String {
    format!(
        "0000:{:02x}:{:02x}.{}",
        0x17 + zone * 0x10,
        2 + i / 8,
        i % 8
    )
}

/// Reserved CPUs: core 0 and its sibling.
pub fn reserved_cpus() -> BTreeSet<u32> {
    BTreeSet::from([0, SIBLING_OFFSET])
}

pub fn allocatable(topology: &Topology) -> v1::AllocatableResourcesResponse {
    let reserved = reserved_cpus();
    let mut memory = Vec::new();
    let mut device_list = Vec::new();
    for zone in &topology.zones {
        let z = zone.id;
        let system = if z == 0 { SYSTEM_MEMORY } else { 0 };
        let plain = MEMORY_PER_ZONE - HUGE_1G_PER_ZONE - HUGE_2M_PER_ZONE - system;
        memory.push(memory_block("memory", plain, &[z]));
        memory.push(memory_block("hugepages-1Gi", HUGE_1G_PER_ZONE, &[z]));
        memory.push(memory_block("hugepages-2Mi", HUGE_2M_PER_ZONE, &[z]));
        for i in 0..GPUS_PER_ZONE {
            device_list.push(devices(GPU, vec![gpu_id(z, i)], Some(z)));
        }
        for i in 0..VFS_PER_ZONE {
            device_list.push(devices(VF, vec![vf_id(z, i)], Some(z)));
        }
    }
    let fuse = (0..20).map(|i| format!("fuse{i}")).collect();
    device_list.push(devices(FUSE, fuse, None));
    v1::AllocatableResourcesResponse {
        devices: device_list,
        cpu_ids: (0..ZONES * CORES_PER_ZONE * 2)
            .filter(|cpu| !reserved.contains(cpu))
            .map(i64::from)
            .collect(),
        memory,
    }
}

/// What is still free per zone while pods are placed.
struct Free {
    /// Per zone, in the order the CPU manager hands them out: whole cores first.
    cpus: Vec<Vec<u32>>,
    memory: Vec<u64>,
    huge_1g: Vec<u64>,
    huge_2m: Vec<u64>,
    gpus: Vec<Vec<String>>,
    vfs: Vec<Vec<String>>,
}

impl Free {
    fn new(topology: &Topology) -> Self {
        let reserved = reserved_cpus();
        let per_zone = |f: &dyn Fn(u32) -> Vec<String>| (0..ZONES).map(f).collect();
        Self {
            cpus: topology
                .zones
                .iter()
                .map(|zone| {
                    let mut cpus: Vec<u32> = zone
                        .cpus
                        .iter()
                        .copied()
                        .filter(|cpu| !reserved.contains(cpu))
                        .collect();
                    cpus.sort_by_key(|&cpu| (cpu % SIBLING_OFFSET, cpu));
                    cpus.reverse();
                    cpus
                })
                .collect(),
            memory: (0..ZONES)
                .map(|z| {
                    let system = if z == 0 { SYSTEM_MEMORY } else { 0 };
                    MEMORY_PER_ZONE - HUGE_1G_PER_ZONE - HUGE_2M_PER_ZONE - system
                })
                .collect(),
            huge_1g: vec![HUGE_1G_PER_ZONE; ZONES as usize],
            huge_2m: vec![HUGE_2M_PER_ZONE; ZONES as usize],
            gpus: per_zone(&|z| (0..GPUS_PER_ZONE).rev().map(|i| gpu_id(z, i)).collect()),
            vfs: per_zone(&|z| (0..VFS_PER_ZONE).rev().map(|i| vf_id(z, i)).collect()),
        }
    }

    /// A zone, tried from `start` on, with `cpus` CPUs, `memory` and the devices free.
    fn zone_with(
        &self,
        start: usize,
        cpus: usize,
        memory: u64,
        gpus: usize,
        vfs: usize,
    ) -> Option<usize> {
        (0..ZONES as usize)
            .map(|i| (start + i) % ZONES as usize)
            .find(|&z| {
                self.cpus[z].len() >= cpus
                    && self.memory[z] >= memory
                    && self.gpus[z].len() >= gpus
                    && self.vfs[z].len() >= vfs
            })
    }

    fn take_cpus(&mut self, zone: usize, n: usize) -> Vec<i64> {
        (0..n)
            .filter_map(|_| self.cpus[zone].pop())
            .map(i64::from)
            .collect()
    }
}

/// A Guaranteed container pinned to one zone: CPUs, memory, maybe hugepages and devices.
fn pinned_container(
    free: &mut Free,
    rng: &mut StdRng,
    name: &str,
    cpus: usize,
    gpus: usize,
    vfs: usize,
) -> Option<v1::ContainerResources> {
    let memory = cpus as u64 * 4 * GIB;
    let z = free.zone_with(rng.random_range(0..ZONES as usize), cpus, memory, gpus, vfs)?;
    let zone = z as u32;
    let mut container = v1::ContainerResources {
        name: name.to_owned(),
        cpu_ids: free.take_cpus(z, cpus),
        memory: vec![memory_block("memory", memory, &[zone])],
        ..Default::default()
    };
    free.memory[z] -= memory;
    match rng.random_range(0..4) {
        0 if free.huge_1g[z] >= 2 * GIB => {
            free.huge_1g[z] -= 2 * GIB;
            container
                .memory
                .push(memory_block("hugepages-1Gi", 2 * GIB, &[zone]));
        }
        1 if free.huge_2m[z] >= 128 * MIB => {
            free.huge_2m[z] -= 128 * MIB;
            container
                .memory
                .push(memory_block("hugepages-2Mi", 128 * MIB, &[zone]));
        }
        _ => {}
    }
    let gpus: Vec<String> = (0..gpus).filter_map(|_| free.gpus[z].pop()).collect();
    if !gpus.is_empty() {
        container.devices.push(devices(GPU, gpus, Some(zone)));
    }
    let vfs: Vec<String> = (0..vfs).filter_map(|_| free.vfs[z].pop()).collect();
    if !vfs.is_empty() {
        container.devices.push(devices(VF, vfs, Some(zone)));
    }
    Some(container)
}

/// A database pinned to two neighbouring zones: CPUs from both, one memory block for
/// both (the case the accounting has to split).
fn spanning_container(free: &mut Free, rng: &mut StdRng) -> Option<v1::ContainerResources> {
    let first = (0..ZONES as usize - 1)
        .map(|i| (rng.random_range(0..ZONES as usize - 1) + i) % (ZONES as usize - 1))
        .find(|&z| {
            free.cpus[z].len() >= 4
                && free.cpus[z + 1].len() >= 4
                && free.memory[z] + free.memory[z + 1] >= 48 * GIB
                && free.memory[z] >= 24 * GIB
        })?;
    let mut cpu_ids = free.take_cpus(first, 4);
    cpu_ids.extend(free.take_cpus(first + 1, 4));
    let on_first = free.memory[first].min(48 * GIB);
    free.memory[first] -= on_first;
    free.memory[first + 1] -= 48 * GIB - on_first;
    let zones = [first as u32, first as u32 + 1];
    Some(v1::ContainerResources {
        name: "postgres".to_owned(),
        cpu_ids,
        memory: vec![memory_block("memory", 48 * GIB, &zones)],
        ..Default::default()
    })
}

fn shared_container(name: &str) -> v1::ContainerResources {
    v1::ContainerResources {
        name: name.to_owned(),
        ..Default::default()
    }
}

pub fn pods(topology: &Topology) -> Vec<v1::PodResources> {
    let mut rng = StdRng::seed_from_u64(0x7a5_acc0);
    let mut free = Free::new(topology);
    let pod = |namespace: &str, name: String, containers| v1::PodResources {
        name,
        namespace: namespace.to_owned(),
        containers,
    };
    let mut list: Vec<v1::PodResources> = [
        ("kube-system", "kube-proxy"),
        ("kube-system", "calico-node"),
        ("kube-system", "csi-node-driver"),
        ("monitoring", "node-exporter"),
        ("monitoring", "fluent-bit"),
        ("tas-system", "tas-updater"),
    ]
    .iter()
    .map(|&(ns, ds)| {
        let name = format!("{ds}-{}", suffix(&mut rng, 5));
        let mut containers = vec![shared_container(ds)];
        if ds == "csi-node-driver" {
            containers.push(fuse_container());
        }
        pod(ns, name, containers)
    })
    .collect();

    let mut databases = 0;
    while list.len() < PODS {
        let deployment =
            |rng: &mut StdRng, base: &str| format!("{base}-{}-{}", suffix(rng, 10), suffix(rng, 5));
        let placed = match rng.random_range(0..20) {
            0..=8 => None,
            9..=14 => {
                let cpus = [1, 2, 2, 4][rng.random_range(0..4)];
                let name = deployment(&mut rng, "ledger-worker");
                pinned_container(&mut free, &mut rng, "worker", cpus, 0, 0)
                    .map(|c| pod("payments", name, vec![c, shared_container("istio-proxy")]))
            }
            15..=16 => {
                let name = deployment(&mut rng, "recommender-inference");
                pinned_container(&mut free, &mut rng, "server", 4, 1, 0)
                    .map(|c| pod("ml-serving", name, vec![c]))
            }
            17..=18 => {
                let vfs = 1 + rng.random_range(0..2);
                let name = deployment(&mut rng, "packet-gateway");
                pinned_container(&mut free, &mut rng, "dataplane", 2, 0, vfs)
                    .map(|c| pod("network", name, vec![c]))
            }
            _ if databases < 4 => {
                let name = format!("postgres-{databases}");
                spanning_container(&mut free, &mut rng).map(|c| {
                    databases += 1;
                    pod("data", name, vec![c])
                })
            }
            _ => None,
        };
        let next = placed.unwrap_or_else(|| {
            let (ns, base) = [
                ("search", "query-frontend"),
                ("default", "web"),
                ("batch", "nightly-report"),
                ("monitoring", "prometheus-adapter"),
            ][rng.random_range(0..4)];
            let name = deployment(&mut rng, base);
            pod(ns, name, vec![shared_container(base)])
        });
        list.push(next);
    }
    list
}

/// The FUSE device a CSI node plugin holds; it has no NUMA affinity.
fn fuse_container() -> v1::ContainerResources {
    v1::ContainerResources {
        name: "fuse-mounter".to_owned(),
        devices: vec![devices(FUSE, vec!["fuse0".to_owned()], None)],
        ..Default::default()
    }
}
