//! One scheduling decision, and the NUMA fit + score it repeats per node.
//!
//! The cluster ([`fixture`]) is built once per zone count: nodes of 32 CPUs per NUMA
//! zone, each with its own mix of exclusive allocations, so a share of the nodes is
//! rejected — by a cordon, a taint, full zones, or hugepages scattered over zones — the
//! way a busy cluster rejects them. The pod is Guaranteed: a server container wanting
//! 8 CPUs, 16 GiB and 4 GiB of 1 GiB hugepages in one zone, plus a 1-CPU metrics agent.
//! Topology lookups come from a prebuilt map, so the figures leave out the cache's
//! locking and measure the cycle itself. The `decision-shared` group measures the
//! production entry point instead, snapshot read included, over the scheduler's shared
//! state filled with the same nodes, each decision followed by its reserve phase.

mod fixture;

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fixture::*;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use tas_api::tas::NodesWithoutTopology;
use tas_scheduler::cycle::{self, CycleSettings, Decision, TopologyView};
use tas_scheduler::decision_trace::decide_traced;
use tas_scheduler::filter::{NodeInfo, PodUsage};
use tas_scheduler::numa::{self, ScoreConfig};
use tas_scheduler::snapshot::Snapshot;

const CLUSTER_SIZES: [usize; 2] = [1_000, 5_000];
const ZONE_COUNTS: [usize; 3] = [2, 4, 8];
/// Nodes and zones of the clusters the production path is measured on.
const PRODUCTION_CLUSTERS: [(usize, usize); 1] = [(5_000, 4)];

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

/// The production entry point end to end, as the scheduling loop runs it: each
/// iteration is one decision by [`decide_traced`] (the loop's [`Snapshot`] brought up
/// to date from the shared state — the nodes changed since the last decision copied in
/// from the cluster state and the reserve cache — then the cycle) followed by its
/// reserve phase on the chosen node ([`Churn`]), judging every node (`all-nodes`, and
/// `all-nodes-serial` on one thread) or sampling adaptively as configured by default
/// (`adaptive`). `snapshot-take` only reserves and brings the snapshot up to date (and
/// lists its nodes); `snapshot-read` also looks every node's view up without deciding:
/// the part of the figure the prepared-node bench leaves out. `prepared-all-nodes` decides over
/// the same state read out beforehand, as `decision` does: the cycle alone on this
/// state (and `prepared-adaptive` sampling).
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
        let (decision, trace) = decide_traced(&shared, &mut Snapshot::new(), &pod, &every_node);
        let picked = match decision {
            Decision::Schedule(c) => c.node,
            Decision::Unschedulable(_) => "nothing".to_owned(),
        };
        let phases = trace.phases();
        let (_, sampled) = decide_traced(&shared, &mut Snapshot::new(), &pod, &base);
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
        let serial = CycleSettings {
            parallelism: 1,
            ..every_node.clone()
        };
        let runs = [
            ("all-nodes", &every_node),
            ("adaptive", &base),
            ("all-nodes-serial", &serial),
        ];
        for (label, s) in runs {
            let mut churn = Churn::new(&shared, &pod);
            let mut snapshot = Snapshot::new();
            group.bench_function(BenchmarkId::new(label, &parameter), |b| {
                b.iter(|| {
                    let (decision, _) = decide_traced(&shared, &mut snapshot, black_box(&pod), s);
                    if let Decision::Schedule(c) = decision {
                        churn.place(&c.node);
                    }
                });
            });
        }
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
        // The reserve phase of a decision on a node of the walk, then the snapshot.
        let mut churn = Churn::new(&shared, &pod);
        let mut snapshot = Snapshot::new();
        let mut next = 0;
        let mut reserve = || {
            next = (next + 7) % size;
            churn.place(&format!("worker-{zones}z-{next:05}"));
        };
        group.bench_function(BenchmarkId::new("snapshot-take", &parameter), |b| {
            b.iter(|| {
                reserve();
                snapshot.with(&shared, black_box(&pod), |cluster, _| cluster.nodes.len())
            });
        });
        group.bench_function(BenchmarkId::new("snapshot-read", &parameter), |b| {
            b.iter(|| {
                reserve();
                snapshot.with(&shared, black_box(&pod), |cluster, lookup| {
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
