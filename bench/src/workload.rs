//! The benchmark's cluster and workload, as pure data: identical kwok nodes with NUMA
//! zones (the Node objects, and the same hardware as a nodesim [`Machine`]), and a fixed
//! sequence of Guaranteed pods that every scheduler gets in the same order.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use tas_nodesim::machine::{CpuManagerPolicy, KubeletSettings, Machine, MemoryManagerPolicy, Zone};
use tas_testcluster::FakeNode;

/// Label every benchmark pod carries; its value names the run.
pub const RUN_LABEL: &str = "bench.tas.dev/run";

const GIB: u64 = 1 << 30;

/// The device resource of the saturation nodes (one device plugin, devices per zone).
pub const DEVICE: &str = "example.com/nic";
/// The hugepage resource of the saturation nodes.
pub const HUGEPAGES: &str = "hugepages-2Mi";

/// How many nodes, and what each one has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterShape {
    /// Number of nodes.
    pub nodes: usize,
    /// NUMA zones per node.
    pub zones: u32,
    /// CPUs per zone.
    pub zone_cpus: u32,
    /// Memory per zone, GiB.
    pub zone_memory_gib: u64,
    /// Pods per node (the kubelet's `maxPods`).
    pub max_pods: u32,
    /// Devices ([`DEVICE`]) per zone; 0: none.
    pub devices_per_zone: u32,
    /// 2 MiB hugepages per zone, GiB; 0: none.
    pub hugepages_gib_per_zone: u64,
}

impl ClusterShape {
    /// Name of node `i`.
    pub fn node_name(&self, i: usize) -> String {
        format!("bench-node-{i:04}")
    }

    /// Every node name, in order.
    pub fn node_names(&self) -> Vec<String> {
        (0..self.nodes).map(|i| self.node_name(i)).collect()
    }

    /// The hardware of every node: zones `0..zones`, CPU ids numbered zone after zone,
    /// nothing reserved.
    pub fn machine(&self) -> Machine {
        let zones = (0..self.zones)
            .map(|id| Zone {
                id,
                cpus: (id * self.zone_cpus..(id + 1) * self.zone_cpus).collect(),
                memory: self.zone_memory_gib * GIB,
                hugepages: if self.hugepages_gib_per_zone > 0 {
                    BTreeMap::from([(HUGEPAGES.to_string(), self.hugepages_gib_per_zone * GIB)])
                } else {
                    BTreeMap::new()
                },
                devices: if self.devices_per_zone > 0 {
                    let ids = (0..self.devices_per_zone)
                        .map(|d| format!("nic-{id}-{d}"))
                        .collect();
                    BTreeMap::from([(DEVICE.to_string(), ids)])
                } else {
                    BTreeMap::new()
                },
            })
            .collect();
        Machine {
            zones,
            reserved_cpus: BTreeSet::new(),
            max_pods: self.max_pods,
        }
    }

    /// The kubelet every node runs: single-numa-node, container scope, static CPU and
    /// memory managers.
    pub fn kubelet() -> KubeletSettings {
        KubeletSettings {
            topology_manager_policy: TopologyManagerPolicy::SingleNumaNode,
            topology_manager_scope: TopologyManagerScope::Container,
            cpu_manager_policy: CpuManagerPolicy::Static,
            memory_manager_policy: MemoryManagerPolicy::Static,
        }
    }

    /// The Node object of node `i`: the sum of its zones.
    pub fn fake_node(&self, i: usize) -> FakeNode {
        FakeNode {
            cpu: (self.zones * self.zone_cpus).to_string(),
            memory: format!("{}Gi", u64::from(self.zones) * self.zone_memory_gib),
            pods: self.max_pods,
            hugepages_2mi: (self.hugepages_gib_per_zone > 0)
                .then(|| format!("{}Gi", u64::from(self.zones) * self.hugepages_gib_per_zone)),
            extended: if self.devices_per_zone > 0 {
                BTreeMap::from([(
                    DEVICE.to_string(),
                    (self.zones * self.devices_per_zone).to_string(),
                )])
            } else {
                BTreeMap::new()
            },
            ..FakeNode::new(self.node_name(i))
        }
    }

    /// The allocatable of every node (as [`Self::fake_node`] declares it), in the units
    /// of [`crate::run_end::Amounts`].
    pub fn allocatable(&self) -> crate::run_end::Amounts {
        let zones = u64::from(self.zones);
        let mut amounts = BTreeMap::from([
            ("cpu".to_string(), zones * u64::from(self.zone_cpus) * 1000),
            ("memory".to_string(), zones * self.zone_memory_gib * GIB),
            (crate::run_end::PODS.to_string(), u64::from(self.max_pods)),
        ]);
        if self.hugepages_gib_per_zone > 0 {
            amounts.insert(HUGEPAGES.into(), zones * self.hugepages_gib_per_zone * GIB);
        }
        if self.devices_per_zone > 0 {
            amounts.insert(DEVICE.into(), zones * u64::from(self.devices_per_zone));
        }
        amounts
    }

    /// CPUs of the whole cluster.
    pub fn total_cpus(&self) -> u64 {
        self.nodes as u64 * u64::from(self.zones * self.zone_cpus)
    }
}

/// The pods every scheduler is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Number of pods.
    pub pods: usize,
    /// CPU sizes, drawn evenly (each must fit one zone).
    pub cpu_sizes: Vec<u32>,
    /// Memory per CPU, GiB.
    pub memory_per_cpu_gib: u64,
    /// What kind of pods.
    pub mix: Mix,
}

/// The kinds of pods a workload draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Guaranteed single-container pods of `cpu_sizes` CPUs.
    Guaranteed,
    /// The saturation mix (see [`saturation_pod`]): Guaranteed pods of `cpu_sizes` CPUs,
    /// some also asking for a device or hugepages, and some Burstable pods.
    Mixed,
    /// Guaranteed pods of `cpu_sizes` CPUs, each with a DRA claim for a GPU (some a GPU
    /// and a NIC) from a template ([`crate::dra::pod`]).
    Dra,
}

impl Workload {
    /// Name of pod `i` of the run of `scheduler` (a run's own scheduler name): unique
    /// across runs, so nothing left over from a deleted pod of an earlier run (kwok
    /// deletes pods by name from a work queue that can lag behind by a minute) can
    /// touch a pod of a later one.
    pub fn pod_name(scheduler: &str, i: usize) -> String {
        format!("{scheduler}-{i:05}")
    }

    /// The index of a pod from its name (its last `-` segment), if it is a benchmark
    /// pod.
    pub fn pod_index(name: &str) -> Option<usize> {
        let (_, index) = name.rsplit_once('-')?;
        if index.len() != 5 {
            return None;
        }
        index.parse().ok()
    }

    /// CPUs of pod `i`: a fixed pseudo-random draw, the same in every run.
    pub fn cpus(&self, i: usize) -> u32 {
        let n = self.cpu_sizes.len().max(1) as u64;
        let pick = (splitmix64(i as u64) % n) as usize;
        self.cpu_sizes.get(pick).copied().unwrap_or(1)
    }

    /// The same pods without their DRA claims (the baseline of what allocation costs);
    /// other workloads unchanged.
    pub fn without_claims(&self) -> Self {
        let mix = match self.mix {
            Mix::Dra => Mix::Guaranteed,
            other => other,
        };
        Self {
            mix,
            ..self.clone()
        }
    }

    /// CPUs asked for by all pods together.
    pub fn total_cpus(&self) -> u64 {
        (0..self.pods).map(|i| u64::from(self.cpus(i))).sum()
    }

    /// Pod `i` for `scheduler`, labelled with `run`: one container whose requests equal
    /// its limits (Guaranteed, so the kubelet pins its CPUs and memory).
    pub fn pod(&self, i: usize, scheduler: &str, run: &str) -> Pod {
        match self.mix {
            Mix::Mixed => return saturation_pod(self, i, scheduler, run),
            Mix::Dra => return crate::dra::pod(self, i, scheduler, run),
            Mix::Guaranteed => {}
        }
        self.guaranteed_pod(i, scheduler, run)
    }

    /// Memory of pod `i`: [`Self::memory_per_cpu_gib`] per CPU, as a quantity.
    pub fn memory(&self, i: usize) -> String {
        format!("{}Gi", u64::from(self.cpus(i)) * self.memory_per_cpu_gib)
    }

    /// Pod `i` of the [`Mix::Guaranteed`] mix, whatever the workload's: its CPUs and
    /// memory only, what the other mixes add to.
    pub fn guaranteed_pod(&self, i: usize, scheduler: &str, run: &str) -> Pod {
        guaranteed_pod(
            &Self::pod_name(scheduler, i),
            scheduler,
            run,
            &self.cpus(i).to_string(),
            &self.memory(i),
        )
    }
}

/// What pod `i` of the saturation mix is, from a second fixed draw (the CPU size is
/// [`Workload::cpus`]): 1 in 6 Burstable (requests half its CPUs, limits all, no
/// exclusive resources), otherwise Guaranteed, and of those 1 in 8 with one
/// [`DEVICE`] and 1 in 8 with 1 GiB of [`HUGEPAGES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixedKind {
    /// Guaranteed, CPUs and memory only.
    Guaranteed,
    /// Guaranteed with a device.
    Device,
    /// Guaranteed with hugepages.
    Hugepages,
    /// Burstable.
    Burstable,
}

/// The kind of pod `i` of the saturation mix.
pub fn mixed_kind(i: usize) -> MixedKind {
    match splitmix64(i as u64 ^ 0x5A7) % 48 {
        0..8 => MixedKind::Burstable,
        8..13 => MixedKind::Device,
        13..18 => MixedKind::Hugepages,
        _ => MixedKind::Guaranteed,
    }
}

/// Pod `i` of the saturation mix.
pub fn saturation_pod(workload: &Workload, i: usize, scheduler: &str, run: &str) -> Pod {
    let cpus = workload.cpus(i);
    let memory = workload.memory(i);
    let name = Workload::pod_name(scheduler, i);
    let (requests, limits) = match mixed_kind(i) {
        MixedKind::Guaranteed => {
            let r = serde_json::json!({ "cpu": cpus.to_string(), "memory": memory });
            (r.clone(), r)
        }
        MixedKind::Device => {
            let r = serde_json::json!({ "cpu": cpus.to_string(), "memory": memory, DEVICE: "1" });
            (r.clone(), r)
        }
        MixedKind::Hugepages => {
            let r =
                serde_json::json!({ "cpu": cpus.to_string(), "memory": memory, HUGEPAGES: "1Gi" });
            (r.clone(), r)
        }
        MixedKind::Burstable => (
            serde_json::json!({ "cpu": format!("{}m", cpus * 500), "memory": memory }),
            serde_json::json!({ "cpu": cpus.to_string(), "memory": memory }),
        ),
    };
    pod_with(&name, scheduler, run, requests, limits)
}

/// A single-container pod with requests = limits (none when `cpu` is empty), never
/// restarted and deleted without grace.
pub fn guaranteed_pod(name: &str, scheduler: &str, run: &str, cpu: &str, memory: &str) -> Pod {
    if cpu.is_empty() {
        return pod_with(
            name,
            scheduler,
            run,
            serde_json::json!({}),
            serde_json::json!({}),
        );
    }
    let amounts = serde_json::json!({ "cpu": cpu, "memory": memory });
    pod_with(name, scheduler, run, amounts.clone(), amounts)
}

/// A single-container pod with these requests and limits (none when both are empty),
/// never restarted and deleted without grace.
pub fn pod_with(
    name: &str,
    scheduler: &str,
    run: &str,
    requests: serde_json::Value,
    limits: serde_json::Value,
) -> Pod {
    let empty = |v: &serde_json::Value| v.as_object().is_none_or(|m| m.is_empty());
    let resources = if empty(&requests) && empty(&limits) {
        serde_json::json!({})
    } else {
        serde_json::json!({ "requests": requests, "limits": limits })
    };
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { RUN_LABEL: run } },
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "restartPolicy": "Never",
            "containers": [{ "name": "app", "image": "bench", "resources": resources }],
        },
    });
    serde_json::from_value(pod).unwrap_or_default()
}

/// A well-mixed 64-bit hash (splitmix64's finaliser): spreads consecutive indexes.
pub(crate) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tas_nodesim::request::{PodRequest, QosClass};

    fn shape() -> ClusterShape {
        ClusterShape {
            nodes: 3,
            zones: 4,
            zone_cpus: 12,
            zone_memory_gib: 64,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        }
    }

    #[test]
    fn machine_and_node_agree() {
        let shape = shape();
        let machine = shape.machine();
        assert_eq!(machine.zone_count(), 4);
        assert_eq!(machine.zones[1].cpus.iter().next(), Some(&12));
        assert_eq!(machine.allocatable()["cpu"], 48_000);
        let node = shape.fake_node(2);
        assert_eq!(node.name, "bench-node-0002");
        assert_eq!((node.cpu.as_str(), node.memory.as_str()), ("48", "256Gi"));
        assert_eq!(machine.allocatable()["memory"], 256 * GIB);
    }

    #[test]
    fn allocatable_is_what_the_node_object_declares() {
        use tas_api::quantity::{parse_milli, parse_value};
        let saturation = ClusterShape {
            devices_per_zone: 2,
            hugepages_gib_per_zone: 4,
            ..shape()
        };
        let node = saturation.fake_node(0);
        let value = |q: &str| u64::try_from(parse_value(q).unwrap()).unwrap();
        let declared = BTreeMap::from([
            (
                "cpu".to_string(),
                u64::try_from(parse_milli(&node.cpu).unwrap()).unwrap(),
            ),
            ("memory".to_string(), value(&node.memory)),
            ("pods".to_string(), u64::from(node.pods)),
            (
                HUGEPAGES.to_string(),
                value(node.hugepages_2mi.as_deref().unwrap()),
            ),
            (DEVICE.to_string(), value(&node.extended[DEVICE])),
        ]);
        assert_eq!(saturation.allocatable(), declared);
        assert_eq!(declared["cpu"], 48_000);
        assert_eq!(declared[DEVICE], 8);
        // Without hugepages or devices, neither is listed (a request for one fits nowhere).
        assert_eq!(shape().allocatable().len(), 3);
    }

    #[test]
    fn pods_are_guaranteed_and_the_mix_is_stable_and_even() {
        let workload = Workload {
            pods: 4000,
            cpu_sizes: vec![1, 2, 4, 8],
            memory_per_cpu_gib: 4,
            mix: Mix::Guaranteed,
        };
        let pod = workload.pod(7, "sched", "r1");
        let request = PodRequest::from_pod(&pod).unwrap();
        assert_eq!(request.qos, QosClass::Guaranteed);
        let cpus = workload.cpus(7);
        assert_eq!(request.containers[0].get("cpu"), u64::from(cpus) * 1000);
        assert_eq!(
            request.containers[0].get("memory"),
            u64::from(cpus) * 4 * GIB
        );
        assert_eq!(pod.spec.unwrap().scheduler_name.as_deref(), Some("sched"));
        assert_eq!(Workload::pod_index("bench-00007"), Some(7));
        assert_eq!(Workload::pod_index("warmup"), None);
        let name = Workload::pod_name("bench-numa-plugin-r2", 7);
        assert_eq!(name, "bench-numa-plugin-r2-00007");
        assert_eq!(Workload::pod_index(&name), Some(7));
        assert_eq!(Workload::pod_index("warmup-bench-tas-r1"), None);

        let again: Vec<u32> = (0..50).map(|i| workload.cpus(i)).collect();
        assert_eq!(again, (0..50).map(|i| workload.cpus(i)).collect::<Vec<_>>());
        for size in [1, 2, 4, 8] {
            let n = (0..4000).filter(|&i| workload.cpus(i) == size).count();
            assert!((850..1150).contains(&n), "{n} pods of {size} CPUs");
        }
    }

    #[test]
    fn saturation_mix_has_every_kind_and_the_node_advertises_devices() {
        let workload = Workload {
            pods: 4800,
            cpu_sizes: vec![1, 2, 4, 8, 16],
            memory_per_cpu_gib: 2,
            mix: Mix::Mixed,
        };
        let count = |kind| (0..4800).filter(|&i| mixed_kind(i) == kind).count();
        assert!((600..1000).contains(&count(MixedKind::Burstable)));
        assert!((350..650).contains(&count(MixedKind::Device)));
        assert!((350..650).contains(&count(MixedKind::Hugepages)));
        let i = (0..).find(|&i| mixed_kind(i) == MixedKind::Device).unwrap();
        let request = PodRequest::from_pod(&workload.pod(i, "s", "r")).unwrap();
        assert_eq!(request.qos, QosClass::Guaranteed);
        assert_eq!(request.containers[0].get(DEVICE), 1);
        let i = (0..)
            .find(|&i| mixed_kind(i) == MixedKind::Hugepages)
            .unwrap();
        let request = PodRequest::from_pod(&workload.pod(i, "s", "r")).unwrap();
        assert_eq!(request.containers[0].get(HUGEPAGES), GIB);
        let i = (0..)
            .find(|&i| mixed_kind(i) == MixedKind::Burstable)
            .unwrap();
        let request = PodRequest::from_pod(&workload.pod(i, "s", "r")).unwrap();
        assert_eq!(request.qos, QosClass::Burstable);

        let shape = ClusterShape {
            devices_per_zone: 2,
            hugepages_gib_per_zone: 4,
            ..shape()
        };
        let node = shape.fake_node(0);
        assert_eq!(node.extended.get(DEVICE).map(String::as_str), Some("8"));
        assert_eq!(node.hugepages_2mi.as_deref(), Some("16Gi"));
        let machine = shape.machine();
        assert_eq!(machine.zones[3].devices[DEVICE].len(), 2);
        assert_eq!(machine.zones[0].hugepages[HUGEPAGES], 4 * GIB);
    }

    #[test]
    fn best_effort_pod_has_no_requests() {
        let request = PodRequest::from_pod(&guaranteed_pod("w", "s", "r", "", "")).unwrap();
        assert_eq!(request.qos, QosClass::BestEffort);
    }
}
