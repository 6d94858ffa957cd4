//! One scheduling decision, and the NUMA fit + score it repeats per node.
//!
//! The cluster is built once per zone count: nodes of 32 CPUs per NUMA zone running
//! single-numa-node / container scope, each with its own mix of exclusive allocations,
//! so a share of the nodes is rejected — by a cordon, a taint, full zones, or hugepages
//! scattered over zones — the way a busy cluster rejects them. The pod is Guaranteed:
//! a server container wanting 8 CPUs, 16 GiB and 4 GiB of 1 GiB hugepages in one zone,
//! plus a 1-CPU metrics agent. Topology lookups come from a prebuilt map, so the
//! figures leave out the cache's locking and measure the cycle itself. The
//! `decision-shared` group measures the production entry point instead, snapshot read
//! included, over the scheduler's shared state filled with the same nodes.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Node, Pod};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use tas_api::config::scheduler::SchedulerConfig;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::NodesWithoutTopology;
use tas_scheduler::cache::{CacheConfig, CacheMetrics, PodRef, TopologyCache};
use tas_scheduler::config::Settings;
use tas_scheduler::cycle::{self, CycleSettings, Decision, PodInput, TopologyView};
use tas_scheduler::decision_trace::decide_traced;
use tas_scheduler::events::EventSender;
use tas_scheduler::filter::{NodeInfo, PodFilterInput, PodUsage};
use tas_scheduler::metrics::Metrics;
use tas_scheduler::numa::{self, NodeTopology, PodRequest, ScoreConfig};
use tas_scheduler::shared::Shared;
use tas_scheduler::snapshot::with_snapshot;
use tas_scheduler::telemetry::Telemetry;

const GIB: u64 = 1 << 30;
const CPUS_PER_ZONE: u32 = 32;
const MEMORY_PER_ZONE_GIB: u64 = 128;
const HUGEPAGES_PER_ZONE_GIB: u64 = 16;
/// CPUs the kubelet keeps for the system, all on zone 0.
const RESERVED_CPUS: u32 = 2;
/// Memory the kubelet keeps for the system, all on zone 0.
const RESERVED_MEMORY_GIB: u64 = 4;
const CLUSTER_SIZES: [usize; 2] = [1_000, 5_000];
const ZONE_COUNTS: [usize; 3] = [2, 4, 8];
/// Nodes and zones of the clusters the production path is measured on.
const PRODUCTION_CLUSTERS: [(usize, usize); 1] = [(5_000, 4)];

/// What exclusive allocations hold in one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ZoneUse {
    cpus: u32,
    memory_gib: u64,
    hugepages_gib: u64,
}

fn zone_allocatable(zone: usize) -> (u32, u64) {
    if zone == 0 {
        (
            CPUS_PER_ZONE - RESERVED_CPUS,
            MEMORY_PER_ZONE_GIB - RESERVED_MEMORY_GIB,
        )
    } else {
        (CPUS_PER_ZONE, MEMORY_PER_ZONE_GIB)
    }
}

/// How busy a node is; picked per node with the weights in [`pick_shape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Cordoned,
    Tainted,
    /// Every zone has at most 6 CPUs left: no zone takes the 8-CPU container.
    Packed,
    /// CPUs free, but at most 3 GiB of 1 GiB hugepages left per zone: enough on the
    /// node as a whole, in no single zone.
    HugepagesFragmented,
    /// Zones filled anywhere from empty to full.
    Mixed,
}

fn pick_shape(rng: &mut StdRng) -> Shape {
    match rng.random_range(0..=99) {
        0..=1 => Shape::Cordoned,
        2..=4 => Shape::Tainted,
        5..=29 => Shape::Packed,
        30..=37 => Shape::HugepagesFragmented,
        _ => Shape::Mixed,
    }
}

fn zone_uses(rng: &mut StdRng, shape: Shape, zones: usize) -> Vec<ZoneUse> {
    (0..zones)
        .map(|z| {
            let (cpus, memory_gib) = zone_allocatable(z);
            let used_cpus = match shape {
                Shape::Packed => cpus - rng.random_range(0..=6) as u32,
                _ => rng.random_range(0..=u64::from(cpus)) as u32,
            };
            let hugepages_gib = match shape {
                Shape::HugepagesFragmented => HUGEPAGES_PER_ZONE_GIB - rng.random_range(0..=3),
                _ => rng.random_range(0..=HUGEPAGES_PER_ZONE_GIB / 2),
            };
            ZoneUse {
                cpus: used_cpus,
                memory_gib: (u64::from(used_cpus) * 4).min(memory_gib),
                hugepages_gib,
            }
        })
        .collect()
}

fn node_object(name: &str, index: usize, shape: Shape, zones: usize) -> Node {
    let cpus = CPUS_PER_ZONE * zones as u32 - RESERVED_CPUS;
    let memory = (MEMORY_PER_ZONE_GIB * zones as u64 - RESERVED_MEMORY_GIB) * GIB;
    let taints = match shape {
        Shape::Tainted => json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        _ => json!([]),
    };
    let region_zone = ["eu-west-1a", "eu-west-1b", "eu-west-1c"][index % 3];
    let value = json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": format!("metal-{}c", CPUS_PER_ZONE * zones as u32),
            "topology.kubernetes.io/zone": region_zone,
        }},
        "spec": {"unschedulable": shape == Shape::Cordoned, "taints": taints},
        "status": {"allocatable": {
            "cpu": cpus.to_string(),
            "memory": memory.to_string(),
            "hugepages-1Gi": format!("{}Gi", HUGEPAGES_PER_ZONE_GIB * zones as u64),
            "ephemeral-storage": "400Gi",
            "pods": "110",
        }},
    });
    serde_json::from_value(value).expect("node fixture")
}

fn guaranteed_pod(name: &str, containers: &[(&str, u32, u64, u64)]) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|&(container, cpus, memory, hugepages)| {
            let mut amounts = json!({"cpu": cpus.to_string(), "memory": memory.to_string()});
            if hugepages > 0 {
                amounts["hugepages-1Gi"] = json!(hugepages.to_string());
            }
            json!({"name": container, "image": "registry.example/app:1.0",
                   "resources": {"requests": amounts, "limits": amounts}})
        })
        .collect();
    let value = json!({
        "metadata": {"name": name, "namespace": "ml-serving", "uid": format!("uid-{name}")},
        "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}, "containers": containers},
    });
    serde_json::from_value(value).expect("pod fixture")
}

/// The node's NRT object as the node agent publishes it, parsed as the scheduler does.
fn topology(name: &str, uses: &[ZoneUse]) -> Arc<NodeTopology> {
    let nrt = nrt_object(name, uses);
    Arc::new(NodeTopology::from_nrt(&nrt).expect("valid NRT fixture"))
}

/// The node's NRT object as the node agent publishes it.
fn nrt_object(name: &str, uses: &[ZoneUse]) -> NodeResourceTopology {
    let zones = uses.len();
    let socket = |z: usize| z * 2 / zones;
    let resource = |name: &str, capacity: u64, allocatable: u64, used: u64| {
        json!({"name": name, "capacity": capacity.to_string(),
               "allocatable": allocatable.to_string(),
               "available": allocatable.saturating_sub(used).to_string()})
    };
    let zone_objects: Vec<Value> = uses
        .iter()
        .enumerate()
        .map(|(z, used)| {
            let (cpus, memory_gib) = zone_allocatable(z);
            let hugepages = HUGEPAGES_PER_ZONE_GIB * GIB;
            let costs: Vec<Value> = (0..zones)
                .map(|to| {
                    let distance = if to == z {
                        10
                    } else if socket(to) == socket(z) {
                        12
                    } else {
                        32
                    };
                    json!({"name": format!("node-{to}"), "value": distance})
                })
                .collect();
            json!({"name": format!("node-{z}"), "type": "Node", "costs": costs, "resources": [
                resource("cpu", u64::from(CPUS_PER_ZONE), u64::from(cpus), u64::from(used.cpus)),
                resource("hugepages-1Gi", hugepages, hugepages, used.hugepages_gib * GIB),
                resource("memory", MEMORY_PER_ZONE_GIB * GIB, memory_gib * GIB,
                         used.memory_gib * GIB),
            ]})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "attributes": [
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "container"},
        ],
        "zones": zone_objects,
    }))
    .expect("NRT fixture")
}

/// Nodes and their topologies for one zone count.
struct Cluster {
    nodes: Vec<NodeInfo>,
    topologies: HashMap<String, TopologyView>,
}

impl Cluster {
    fn new(size: usize, zones: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(0x7a5 + zones as u64);
        // Node-level usage is the same for equal zone use; parse each shape once.
        let mut usages: HashMap<ZoneUse, PodUsage> = HashMap::new();
        let daemons = PodUsage::from_pod(&guaranteed_pod("daemons", &[("agents", 2, 3 * GIB, 0)]))
            .expect("daemon usage");
        let mut nodes = Vec::with_capacity(size);
        let mut topologies = HashMap::with_capacity(size);
        for i in 0..size {
            let name = format!("worker-{zones}z-{i:05}");
            let shape = pick_shape(&mut rng);
            let uses = zone_uses(&mut rng, shape, zones);
            let mut info = NodeInfo::new(&node_object(&name, i, shape, zones)).expect("node");
            info.add_usage("daemons", daemons.clone());
            for (z, used) in uses
                .iter()
                .enumerate()
                .filter(|(_, u)| u.cpus > 0 || u.hugepages_gib > 0)
            {
                let usage = usages.entry(*used).or_insert_with(|| {
                    let pod = guaranteed_pod(
                        "pinned",
                        &[(
                            "app",
                            used.cpus,
                            used.memory_gib * GIB,
                            used.hugepages_gib * GIB,
                        )],
                    );
                    PodUsage::from_pod(&pod).expect("pinned usage")
                });
                info.add_usage(&format!("pinned-{z}"), usage.clone());
            }
            topologies.insert(name.clone(), TopologyView::Known(topology(&name, &uses)));
            nodes.push(info);
        }
        Self { nodes, topologies }
    }

    fn lookup(&self) -> impl Fn(&str) -> TopologyView + Sync + '_ {
        |name: &str| {
            self.topologies
                .get(name)
                .cloned()
                .unwrap_or(TopologyView::Missing)
        }
    }
}

/// Every 10th node that is neither cordoned nor tainted carries one reservation: a
/// pod this scheduler just placed, assumed in the cluster state and reserved on every
/// zone of the node's view in the cache, its binding not yet observed.
const RESERVED_EVERY: usize = 10;

/// The scheduler's shared state for `size` nodes of `zones` zones — the same nodes as
/// [`Cluster::new`] builds — filled the way the watches fill it: each Node object in
/// the cluster state, its bound pods (the daemons and the pinned workloads) on it, and
/// its NRT object in the reserve cache; plus the reservations of [`RESERVED_EVERY`].
fn shared_cluster(size: usize, zones: usize) -> Arc<Shared> {
    let settings = Settings::from_config(&SchedulerConfig::default()).expect("default settings");
    let cache = TopologyCache::new(
        CacheConfig::from_settings(&settings),
        CacheMetrics::default(),
    );
    let shared = Shared::new(
        settings,
        cache,
        Metrics::new(),
        EventSender::disabled(),
        Telemetry::off(),
    );
    let mut rng = StdRng::seed_from_u64(0x7a5 + zones as u64);
    let bound = |mut pod: Pod, node: &str| {
        pod.spec.get_or_insert_default().node_name = Some(node.to_owned());
        pod
    };
    let placed = guaranteed_pod("placed", &[("app", 2, 4 * GIB, 0)]);
    let placed_request = PodRequest::from_pod(&placed).expect("placed request");
    let placed_usage = PodUsage::from_pod(&placed).expect("placed usage");
    let mut state = shared.state.write();
    for i in 0..size {
        let name = format!("worker-{zones}z-{i:05}");
        let shape = pick_shape(&mut rng);
        let uses = zone_uses(&mut rng, shape, zones);
        state.upsert_node(&node_object(&name, i, shape, zones));
        let daemons = guaranteed_pod(&format!("daemons-{name}"), &[("agents", 2, 3 * GIB, 0)]);
        state.upsert_bound_pod(&bound(daemons, &name));
        for (z, used) in uses
            .iter()
            .enumerate()
            .filter(|(_, u)| u.cpus > 0 || u.hugepages_gib > 0)
        {
            let pod = guaranteed_pod(
                &format!("pinned-{name}-{z}"),
                &[(
                    "app",
                    used.cpus,
                    used.memory_gib * GIB,
                    used.hugepages_gib * GIB,
                )],
            );
            state.upsert_bound_pod(&bound(pod, &name));
        }
        shared.cache.update_nrt(nrt_object(&name, &uses));
        if i % RESERVED_EVERY == 0 && !matches!(shape, Shape::Cordoned | Shape::Tainted) {
            let pod = PodRef::new(
                format!("uid-placed-{name}"),
                "ml-serving".to_owned(),
                format!("placed-{name}"),
            );
            shared
                .cache
                .reserve(&name, &pod, &placed_request, Instant::now());
            state.assume(&pod.uid, &name, placed_usage.clone());
        }
    }
    drop(state);
    shared
}

/// The production entry point end to end: [`decide_traced`] reads the snapshot from
/// [`Shared`] (nominations, the cluster state and namespaces under their locks, each
/// node's view from the reserve cache) and runs the cycle over it, judging every node
/// (`all-nodes`, and `all-nodes-serial` on one thread) or sampling adaptively as
/// configured by default (`adaptive`). `snapshot-take` only takes the snapshot (the
/// locks and the list of nodes); `snapshot-read` takes the same snapshot and
/// looks every node's view up without deciding: the part of the figure the
/// prepared-node bench leaves out. `prepared-all-nodes` decides over the same state
/// read out beforehand, as `decision` does: the cycle alone on this state (and
/// `prepared-adaptive` sampling).
fn bench_production(c: &mut Criterion) {
    let pod = pod_input();
    let mut group = c.benchmark_group("decision-shared");
    for (size, zones) in PRODUCTION_CLUSTERS {
        let shared = shared_cluster(size, zones);
        let base = CycleSettings {
            score: shared.settings.score.clone(),
            nodes_without_topology: shared.settings.nodes_without_topology,
            parallelism: shared.settings.parallelism,
            sampling: cycle::Sampling::new(shared.settings.percentage_of_nodes_to_score),
        };
        let every_node = CycleSettings {
            sampling: cycle::Sampling::new(100),
            ..base.clone()
        };
        let (decision, trace) = decide_traced(&shared, &pod, &every_node, false);
        let picked = match decision {
            Decision::Schedule(c) => c.node,
            Decision::Unschedulable(_) => "nothing".to_owned(),
        };
        let phases = trace.phases();
        let (_, sampled) = decide_traced(&shared, &pod, &base, false);
        eprintln!(
            "shared {size} nodes x {zones} zones, parallelism {}: {} feasible, picked {picked}, \
             dirty nodes {}; adaptive evaluates {} nodes, {} feasible",
            base.parallelism,
            trace.cycle.feasible,
            shared.cache.dirty_nodes().len(),
            sampled.cycle.evaluated,
            sampled.cycle.feasible,
        );
        eprintln!("  first all-nodes decision's phases: {phases:?}");

        let parameter = format!("{size}nodes-{zones}zones");
        group.throughput(Throughput::Elements(size as u64));
        for (label, s) in [("all-nodes", &every_node), ("adaptive", &base)] {
            let id = BenchmarkId::new(label, &parameter);
            group.bench_function(id, |b| {
                b.iter(|| decide_traced(&shared, black_box(&pod), s, false));
            });
        }
        let serial = CycleSettings {
            parallelism: 1,
            ..every_node.clone()
        };
        group.bench_function(BenchmarkId::new("all-nodes-serial", &parameter), |b| {
            b.iter(|| decide_traced(&shared, black_box(&pod), &serial, false));
        });
        // The same nodes and views read out once, decided over the way `decision`
        // does: what the cycle costs on this state without the snapshot read.
        {
            let state = shared.state.read();
            let nodes: Vec<&NodeInfo> = state.nodes().collect();
            let views: HashMap<String, TopologyView> = nodes
                .iter()
                .filter_map(|n| {
                    let view = shared.cache.snapshot(n.name())?.ok()?;
                    Some((n.name().to_owned(), TopologyView::Known(view)))
                })
                .collect();
            let lookup = |name: &str| views.get(name).cloned().unwrap_or(TopologyView::Missing);
            group.bench_function(BenchmarkId::new("prepared-all-nodes", &parameter), |b| {
                b.iter(|| cycle::decide(black_box(&pod), &nodes, lookup, &every_node));
            });
            group.bench_function(BenchmarkId::new("prepared-adaptive", &parameter), |b| {
                b.iter(|| cycle::decide(black_box(&pod), &nodes, lookup, &base));
            });
        }
        group.bench_function(BenchmarkId::new("snapshot-take", &parameter), |b| {
            b.iter(|| with_snapshot(&shared, black_box(&pod), |cluster, _| cluster.nodes.len()));
        });
        group.bench_function(BenchmarkId::new("snapshot-read", &parameter), |b| {
            b.iter(|| {
                with_snapshot(&shared, black_box(&pod), |cluster, lookup| {
                    cluster
                        .nodes
                        .iter()
                        .filter(|n| matches!(lookup(n.name()), TopologyView::Known(_)))
                        .count()
                })
            });
        });
    }
    group.finish();
}

fn pod_input() -> PodInput {
    let pod = guaranteed_pod(
        "recommender-inference-0",
        &[
            ("server", 8, 16 * GIB, 4 * GIB),
            ("metrics-agent", 1, GIB / 2, 0),
        ],
    );
    PodInput {
        uid: "uid-recommender-inference-0".to_owned(),
        filter: PodFilterInput::new(&pod).expect("filter input"),
        request: PodRequest::from_pod(&pod).expect("NUMA request"),
    }
}

fn settings(parallelism: usize) -> CycleSettings {
    settings_sampled(parallelism, 100)
}

/// `percentage` of the nodes to find feasible (0: adaptive, 100: every node).
fn settings_sampled(parallelism: usize, percentage: u32) -> CycleSettings {
    CycleSettings {
        score: ScoreConfig::default(),
        nodes_without_topology: NodesWithoutTopology::Skip,
        parallelism,
        sampling: cycle::Sampling::new(percentage),
    }
}

fn bench_decision(c: &mut Criterion) {
    let pod = pod_input();
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut runs = vec![("serial".to_owned(), settings(1))];
    if machine > 1 {
        runs.push((format!("parallel-{machine}"), settings(machine)));
        runs.push((
            format!("parallel-{machine}-adaptive"),
            settings_sampled(machine, 0),
        ));
    }
    runs.push(("serial-adaptive".to_owned(), settings_sampled(1, 0)));
    let largest = CLUSTER_SIZES.iter().copied().max().unwrap_or_default();

    let mut group = c.benchmark_group("decision");
    for zones in ZONE_COUNTS {
        let cluster = Cluster::new(largest, zones);
        let lookup = cluster.lookup();
        for size in CLUSTER_SIZES {
            let nodes: Vec<&NodeInfo> = cluster.nodes[..size].iter().collect();
            let fitting = nodes
                .iter()
                .filter(|n| cycle::score_node(&pod, n, lookup(n.name()), &runs[0].1).is_ok())
                .count();
            let outcome = match cycle::decide(&pod, &nodes, &lookup, &runs[0].1) {
                Decision::Schedule(c) => c.node,
                Decision::Unschedulable(_) => "nothing".to_owned(),
            };
            eprintln!("{size} nodes x {zones} zones: {fitting} fit, picked {outcome}");

            group.throughput(Throughput::Elements(size as u64));
            for (label, s) in &runs {
                let id = BenchmarkId::new(label, format!("{size}nodes-{zones}zones"));
                group.bench_with_input(id, &nodes, |b, nodes| {
                    b.iter(|| cycle::decide(black_box(&pod), nodes, &lookup, s));
                });
            }
        }
    }
    group.finish();
}

fn bench_fit_and_score(c: &mut Criterion) {
    let pod = pod_input();
    let config = ScoreConfig::default();
    let node_level = |r: &str| matches!(r, "cpu" | "memory" | "ephemeral-storage");
    // Lowest zones nearly full, so the fit walks a few zones before one takes the server.
    let free_cpus: [&[u32]; 2] = [&[2, 5, 14, 9], &[2, 5, 1, 6, 14, 9, 3, 20]];

    let mut group = c.benchmark_group("numa-fit-score");
    for free in free_cpus {
        let uses: Vec<ZoneUse> = free
            .iter()
            .enumerate()
            .map(|(z, &f)| {
                let cpus = zone_allocatable(z).0 - f;
                ZoneUse {
                    cpus,
                    memory_gib: u64::from(cpus) * 4,
                    hugepages_gib: 4,
                }
            })
            .collect();
        let topo = topology("worker-fit", &uses);
        assert!(
            numa::fit(&topo, &pod.request, &node_level).is_ok(),
            "fixture must fit"
        );
        let id = BenchmarkId::from_parameter(format!("{}zones", free.len()));
        group.bench_with_input(id, &topo, |b, topo| {
            b.iter(|| {
                let placement = numa::fit(topo, black_box(&pod.request), &node_level);
                (placement, numa::score(topo, &pod.request, &config))
            });
        });
    }
    group.finish();
}

// Sample size and timings come from the command line (`make bench` sets them).
criterion_group!(
    benches,
    bench_decision,
    bench_production,
    bench_fit_and_score
);
criterion_main!(benches);
