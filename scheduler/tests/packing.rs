//! Packing simulation: how many pods each scoring strategy places on a cluster before
//! nothing more fits.
//!
//! A deterministic cluster of single-numa-node nodes with 2, 4 or 8 zones (16, 32 or 64
//! CPUs per node, hugepages on every zone, a NIC device on some) receives the same
//! random stream of Guaranteed pods (1/2/4/8/16 CPUs, some with hugepages or a NIC)
//! once per strategy. Each pod goes through the real decision code
//! ([`cycle::decide`]); the chosen node's kubelet is modelled the way its Topology
//! Manager chooses a zone under single-numa-node (the lowest-numbered zone that holds
//! every aligned request), and the node's NRT object is rebuilt from what is left. A pod
//! that fits nowhere stays Pending and the stream goes on.
//!
//! The figures are printed (`cargo test -p tas-scheduler --test packing -- --nocapture`)
//! and never asserted: only the invariants are — no zone is ever overcommitted and the
//! kubelet model finds a zone for every pod the scheduler places.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::NodesWithoutTopology;
use tas_scheduler::cycle::{self, CycleSettings, Decision, PodInput, Sampling, TopologyView};
use tas_scheduler::filter::{NodeInfo, PodFilterInput, PodUsage};
use tas_scheduler::numa::{NodeTopology, PodRequest, ScoreConfig, ScoringStrategy};

const GIB: i64 = 1 << 30;
const NODES: usize = 32;
const MEMORY_PER_CPU_GIB: i64 = 4;
const HUGEPAGES_PER_ZONE_GIB: i64 = 4;
const NICS_PER_ZONE: i64 = 2;
const NIC: &str = "example.com/nic";
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

/// cpu (millicores), memory, hugepages-1Gi, NIC — per zone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Amounts([i64; 4]);

impl Amounts {
    fn fits_in(&self, free: &Amounts) -> bool {
        self.0.iter().zip(free.0).all(|(a, f)| *a <= f)
    }
}

struct SimNode {
    name: String,
    zone_cpus: i64,
    nics: bool,
    capacity: Amounts,
    free: Vec<Amounts>,
    info: NodeInfo,
}

impl SimNode {
    fn new(rng: &mut StdRng, index: usize) -> Self {
        let zones = [2usize, 4, 8][rng.random_range(0..3)];
        let zone_cpus = [8i64, 16][rng.random_range(0..2)];
        let nics = rng.random_bool(0.5);
        let capacity = Amounts([
            zone_cpus * 1000,
            zone_cpus * MEMORY_PER_CPU_GIB * GIB,
            HUGEPAGES_PER_ZONE_GIB * GIB,
            if nics { NICS_PER_ZONE } else { 0 },
        ]);
        let name = format!("node-{index:02}-{zones}x{zone_cpus}");
        let info = NodeInfo::new(&node_object(&name, zones as i64, &capacity)).expect("node");
        Self {
            name,
            zone_cpus,
            nics,
            capacity,
            free: vec![capacity; zones],
            info,
        }
    }

    fn topology(&self) -> TopologyView {
        let resource = |name: &str, cap: i64, free: i64| {
            json!({"name": name, "capacity": cap.to_string(),
                   "allocatable": cap.to_string(), "available": free.to_string()})
        };
        let zones = self.free.len();
        let zone_objects: Vec<Value> = self
            .free
            .iter()
            .enumerate()
            .map(|(z, f)| {
                let costs: Vec<Value> = (0..zones)
                    .map(|to| json!({"name": format!("node-{to}"), "value": if to == z { 10 } else { 20 }}))
                    .collect();
                let mut resources = vec![
                    resource("cpu", self.capacity.0[0] / 1000, f.0[0] / 1000),
                    resource("hugepages-1Gi", self.capacity.0[2], f.0[2]),
                    resource("memory", self.capacity.0[1], f.0[1]),
                ];
                if self.nics {
                    resources.push(resource(NIC, self.capacity.0[3], f.0[3]));
                }
                json!({"name": format!("node-{z}"), "type": "Node", "costs": costs,
                       "resources": resources})
            })
            .collect();
        let nrt: NodeResourceTopology = serde_json::from_value(json!({
            "metadata": {"name": self.name},
            "attributes": [
                {"name": "topologyManagerPolicy", "value": "single-numa-node"},
                {"name": "topologyManagerScope", "value": "container"},
            ],
            "zones": zone_objects,
        }))
        .expect("NRT");
        TopologyView::Known(Arc::new(NodeTopology::from_nrt(&nrt).expect("valid NRT")))
    }

    /// The kubelet's zone under single-numa-node: the lowest zone that holds it all.
    fn admit(&mut self, want: &Amounts) -> Option<usize> {
        let zone = self.free.iter().position(|f| want.fits_in(f))?;
        let f = &mut self.free[zone];
        for (slot, w) in f.0.iter_mut().zip(want.0) {
            *slot -= w;
        }
        Some(zone)
    }

    fn largest_free_cpus(&self) -> i64 {
        self.free.iter().map(|f| f.0[0] / 1000).max().unwrap_or(0)
    }
}

fn node_object(name: &str, zones: i64, zone: &Amounts) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {
            "cpu": (zone.0[0] / 1000 * zones).to_string(),
            "memory": (zone.0[1] * zones).to_string(),
            "hugepages-1Gi": (zone.0[2] * zones).to_string(),
            NIC: (zone.0[3] * zones).to_string(),
            "pods": "250",
        }},
    }))
    .expect("node fixture")
}

struct SimPod {
    want: Amounts,
    pod: Pod,
}

fn pod_stream(rng: &mut StdRng, count: usize) -> Vec<SimPod> {
    (0..count)
        .map(|i| {
            let cpus = match rng.random_range(0..100) {
                0..=29 => 1,
                30..=54 => 2,
                55..=74 => 4,
                75..=89 => 8,
                _ => 16,
            };
            let hugepages = if rng.random_bool(0.2) {
                rng.random_range(1..=2)
            } else {
                0
            };
            let nic = i64::from(rng.random_bool(0.1));
            let memory = cpus * 2 * GIB;
            let mut amounts = json!({"cpu": cpus.to_string(), "memory": memory.to_string()});
            if hugepages > 0 {
                amounts["hugepages-1Gi"] = json!((hugepages * GIB).to_string());
            }
            if nic > 0 {
                amounts[NIC] = json!(nic.to_string());
            }
            let name = format!("pod-{i:04}");
            let pod = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "sim", "uid": format!("uid-{name}")},
                "spec": {"containers": [{"name": "app", "image": "app:1",
                    "resources": {"requests": amounts, "limits": amounts}}]},
            }))
            .expect("pod fixture");
            SimPod {
                want: Amounts([cpus * 1000, memory, hugepages * GIB, nic]),
                pod,
            }
        })
        .collect()
}

#[derive(Debug, Default)]
struct Outcome {
    capacity: i64,
    placed: usize,
    cpus: i64,
    /// Pods and CPUs placed when the first pod found no node.
    first_pending_at: Option<(usize, i64)>,
    /// Largest free zone (CPUs) → nodes, when the first pod found no node.
    largest_free_then: BTreeMap<i64, usize>,
    /// CPU size → pods left Pending.
    pending: BTreeMap<i64, usize>,
    /// Largest free zone (CPUs) → nodes.
    largest_free: BTreeMap<i64, usize>,
}

fn run(seed: u64, strategy: ScoringStrategy) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut nodes: Vec<SimNode> = (0..NODES).map(|i| SimNode::new(&mut rng, i)).collect();
    let capacity: i64 = nodes
        .iter()
        .map(|n| n.zone_cpus * n.free.len() as i64)
        .sum();
    // Twice the cluster's CPUs: far more than fits.
    let pods = pod_stream(&mut rng, (capacity / 4 * 2) as usize);
    let settings = CycleSettings {
        score: ScoreConfig::new(strategy),
        nodes_without_topology: NodesWithoutTopology::Skip,
        parallelism: 1,
        // Every node is judged: the simulation compares strategies, not samples.
        sampling: Sampling::new(100),
    };
    let mut topologies: HashMap<String, TopologyView> = nodes
        .iter()
        .map(|n| (n.name.clone(), n.topology()))
        .collect();
    let mut out = Outcome {
        capacity,
        ..Outcome::default()
    };
    for p in &pods {
        let input = PodInput {
            uid: p.pod.metadata.uid.clone().unwrap_or_default(),
            filter: PodFilterInput::new(&p.pod).expect("filter input"),
            request: PodRequest::from_pod(&p.pod).expect("NUMA request"),
            dra: None,
        };
        let refs: Vec<&NodeInfo> = nodes.iter().map(|n| &n.info).collect();
        let lookup = |name: &str| {
            topologies
                .get(name)
                .cloned()
                .unwrap_or(TopologyView::Missing)
        };
        let chosen = match cycle::decide(&input, &refs, lookup, &settings) {
            Decision::Schedule(c) => c.node,
            Decision::Unschedulable(_) => {
                if out.first_pending_at.is_none() {
                    out.first_pending_at = Some((out.placed, out.cpus));
                    out.largest_free_then = histogram(&nodes);
                }
                *out.pending.entry(p.want.0[0] / 1000).or_default() += 1;
                continue;
            }
        };
        let node = nodes
            .iter_mut()
            .find(|n| n.name == chosen)
            .expect("a known node");
        let zone = node.admit(&p.want);
        assert!(
            zone.is_some(),
            "{strategy:?}: the kubelet finds no zone on {chosen} for {:?}; free {:?}",
            p.want,
            node.free
        );
        for f in &node.free {
            assert!(f.0.iter().all(|&v| v >= 0), "overcommitted {chosen}: {f:?}");
        }
        let uid = input.uid.clone();
        node.info
            .add_usage(&uid, PodUsage::from_pod(&p.pod).expect("usage"));
        topologies.insert(chosen, node.topology());
        out.placed += 1;
        out.cpus += p.want.0[0] / 1000;
    }
    out.largest_free = histogram(&nodes);
    out
}

fn histogram(nodes: &[SimNode]) -> BTreeMap<i64, usize> {
    let mut h = BTreeMap::new();
    for n in nodes {
        *h.entry(n.largest_free_cpus()).or_default() += 1;
    }
    h
}

#[test]
fn packing_per_strategy() {
    let strategies = [
        ScoringStrategy::LeastAllocated,
        ScoringStrategy::MostAllocated,
        ScoringStrategy::BalancedAllocation,
        ScoringStrategy::LeastNumaNodes,
        ScoringStrategy::FragmentationAware,
    ];
    for seed in SEEDS {
        eprintln!("seed {seed}, {NODES} nodes:");
        for strategy in strategies {
            let o = run(seed, strategy);
            let (pods, cpus) = o.first_pending_at.unwrap_or((o.placed, o.cpus));
            eprintln!(
                "  {:<18} first Pending after {pods:>4} pods, {cpus:>5}/{} CPUs, largest free \
                 zone then {:?}; whole stream: {} pods, pending by CPUs {:?}",
                format!("{strategy:?}"),
                o.capacity,
                o.largest_free_then,
                o.placed,
                o.pending,
            );
        }
    }
}
