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
                hugepages: BTreeMap::new(),
                devices: BTreeMap::new(),
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
            ..FakeNode::new(self.node_name(i))
        }
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
}

impl Workload {
    /// Name of pod `i`.
    pub fn pod_name(i: usize) -> String {
        format!("bench-{i:05}")
    }

    /// The index of a pod from its name, if it is a benchmark pod.
    pub fn pod_index(name: &str) -> Option<usize> {
        name.strip_prefix("bench-")?.parse().ok()
    }

    /// CPUs of pod `i`: a fixed pseudo-random draw, the same in every run.
    pub fn cpus(&self, i: usize) -> u32 {
        let n = self.cpu_sizes.len().max(1) as u64;
        let pick = (splitmix64(i as u64) % n) as usize;
        self.cpu_sizes.get(pick).copied().unwrap_or(1)
    }

    /// CPUs asked for by all pods together.
    pub fn total_cpus(&self) -> u64 {
        (0..self.pods).map(|i| u64::from(self.cpus(i))).sum()
    }

    /// Pod `i` for `scheduler`, labelled with `run`: one container whose requests equal
    /// its limits (Guaranteed, so the kubelet pins its CPUs and memory).
    pub fn pod(&self, i: usize, scheduler: &str, run: &str) -> Pod {
        let cpus = self.cpus(i);
        let memory = format!("{}Gi", u64::from(cpus) * self.memory_per_cpu_gib);
        guaranteed_pod(
            &Self::pod_name(i),
            scheduler,
            run,
            &cpus.to_string(),
            &memory,
        )
    }
}

/// A single-container pod with requests = limits (none when `cpu` is empty), never
/// restarted and deleted without grace.
pub fn guaranteed_pod(name: &str, scheduler: &str, run: &str, cpu: &str, memory: &str) -> Pod {
    let resources = if cpu.is_empty() {
        serde_json::json!({})
    } else {
        let amounts = serde_json::json!({ "cpu": cpu, "memory": memory });
        serde_json::json!({ "requests": amounts, "limits": amounts })
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
fn splitmix64(x: u64) -> u64 {
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
    fn pods_are_guaranteed_and_the_mix_is_stable_and_even() {
        let workload = Workload {
            pods: 4000,
            cpu_sizes: vec![1, 2, 4, 8],
            memory_per_cpu_gib: 4,
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

        let again: Vec<u32> = (0..50).map(|i| workload.cpus(i)).collect();
        assert_eq!(again, (0..50).map(|i| workload.cpus(i)).collect::<Vec<_>>());
        for size in [1, 2, 4, 8] {
            let n = (0..4000).filter(|&i| workload.cpus(i) == size).count();
            assert!((850..1150).contains(&n), "{n} pods of {size} CPUs");
        }
    }

    #[test]
    fn best_effort_pod_has_no_requests() {
        let request = PodRequest::from_pod(&guaranteed_pod("w", "s", "r", "", "")).unwrap();
        assert_eq!(request.qos, QosClass::BestEffort);
    }
}
