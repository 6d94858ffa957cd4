//! The differential test: `tas_scheduler::numa::fit` against the kubelet's own code.
//!
//! Seeded random nodes (machine + kubelet settings, `random`) are added to one referee
//! (`nodesim/referee`: the kubelet's Topology, CPU, memory and device managers and its
//! podresources server). Random pods are then admitted one by one, some removed in
//! between. Before each admission the scheduler judges the pod on two NRT views of the
//! node (`views`): the object the updater builds from the referee's podresources socket,
//! and one built from the managers' true free state. Its verdict (node-level resources,
//! then the NUMA fit) is compared with the kubelet's (`report`).
//!
//! The test fails on any false-admit on the true-state view: there the NRT says exactly
//! what the kubelet has, so admitting a pod the kubelet refuses is a bug of the model.
//! Differences on the updater's view, false-rejects and zone mismatches are reported.
//!
//! `make test` runs the default size; `make bench` runs the ignored test: another seed,
//! ten times the size. `TAS_DIFF_SEED` replaces the seed of either; `TAS_DIFF_CASES=DIR`
//! writes every failing case (machine, kubelet config, pods on the node, the pod, both
//! verdicts) to its own JSON file in DIR; `TAS_DIFF_NODES=3,17` runs only those nodes;
//! `TAS_DIFF_PARALLEL=N` runs N nodes side by side (the report is the same at any N).

#[path = "differential/random.rs"]
mod random;
#[path = "differential/report.rs"]
mod report;
#[path = "differential/views.rs"]
mod views;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::quantity::{parse_milli, parse_value};
use tas_nodesim::referee::{AddNode, Admission, Machine, Referee};
use tas_scheduler::numa::{self, NodeTopology, PodRequest, Resources};
use tas_updater::kubelet_config::KubeletConfig;
use tas_updater::podresources::{ClientConfig, PodResourcesClient};

use report::{Failure, Kind, Report, class_of};

/// Nodes run side by side (each has its own podresources server and rate limit).
const PARALLEL_NODES: usize = 4;
/// Admission attempts per node.
const ATTEMPTS_PER_NODE: usize = 15;
/// 200 nodes × 15 attempts.
const NODES: usize = 200;

/// False-admits on the true-state view the default seed may find: none. Kept as a
/// knob (any false-admit there is a model bug and fails the test).
const KNOWN_FALSE_ADMITS: u64 = 0;

/// False-admits on the true-state view the large seed may find (of 30,000): none. The
/// memory manager's multi-zone groups, which gave 19 (a zone of a group looking
/// untouched, a touched zone belonging to a group rather than holding a single-zone
/// allocation), are now published per zone (`memoryManagerGroup`) and replayed by the
/// scheduler. The 8 under `best-effort`, pod scope ("failed to find NUMA nodes to extend
/// the current topology hint") came from 8-zone nodes whose hint lists were too long for
/// the literal merge, where an approximation stood in for the kubelet's non-preferred
/// hint; the merge by distinct partial merges now computes it. The last, under
/// `restricted`, container scope, on node 693, was an init container's CPU that an app
/// container left reusable (the CPU manager takes CPUs by topology, not reusable ones
/// first), which kept binding the CPU hints of the app container after it; the
/// scheduler now follows both outcomes (the `containers` module of `numa`). Kept as a
/// knob like the one above.
const KNOWN_LARGE_FALSE_ADMITS: u64 = 0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_agrees_with_the_kubelet() {
    let allowed = match std::env::var("TAS_DIFF_SEED") {
        Ok(_) => 0,
        Err(_) => KNOWN_FALSE_ADMITS,
    };
    run(seed(15), NODES, allowed, PARALLEL_NODES).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "ten times the size; `make bench` runs it"]
async fn scheduler_agrees_with_the_kubelet_large() {
    let allowed = match std::env::var("TAS_DIFF_SEED") {
        Ok(_) => 0,
        Err(_) => KNOWN_LARGE_FALSE_ADMITS,
    };
    run(seed(1015), NODES * 10, allowed, PARALLEL_NODES).await;
}

fn seed(default: u64) -> u64 {
    std::env::var("TAS_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

async fn run(seed: u64, nodes: usize, allowed: u64, parallel: usize) {
    let parallel = std::env::var("TAS_DIFF_PARALLEL")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(parallel);
    let referee = Arc::new(Referee::start().unwrap_or_else(|e| panic!("{e}")));
    let dir = tempfile::tempdir().expect("a temporary directory");
    // `TAS_DIFF_NODES=3,17`: only these node indices (to re-check failing cases).
    let only: Option<Vec<usize>> = std::env::var("TAS_DIFF_NODES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect());
    let indices: Vec<usize> = (0..nodes)
        .filter(|i| only.as_ref().is_none_or(|o| o.contains(i)))
        .collect();
    let mut outcomes: Vec<(usize, Vec<Attempt>)> = futures::stream::iter(indices)
        .map(|i| {
            let referee = referee.clone();
            let dir = dir.path();
            async move { (i, run_node(referee, dir, seed, i).await) }
        })
        .buffer_unordered(parallel)
        .collect()
        .await;
    // In node order, whatever order they finished in: the report (which case is the
    // smallest of its kind, among equals the first) is the same at any parallelism.
    outcomes.sort_by_key(|(i, _)| *i);
    let mut report = Report::default();
    for attempt in outcomes.into_iter().flat_map(|(_, attempts)| attempts) {
        attempt.tally(&mut report);
    }
    println!("differential test, seed {seed}, {nodes} nodes × {ATTEMPTS_PER_NODE} attempts");
    println!("{}", report.render());
    let bugs = report.false_admits(1);
    assert!(
        bugs <= allowed,
        "{bugs} pods admitted by the scheduler on an NRT equal to the kubelet's true state \
         were refused by the kubelet (see the table and cases above); {allowed} are known"
    );
    if bugs < allowed {
        println!("fewer false-admits than known ({bugs} < {allowed}): lower KNOWN_FALSE_ADMITS");
    }
}

/// One admission attempt and both views' verdicts.
struct Attempt {
    policy: String,
    scope: String,
    /// `cpu=static mem=Static`: the scheduler cannot see these in the NRT yet.
    managers: String,
    kubelet: Admission,
    kubelet_zones: BTreeSet<u32>,
    views: [Result<BTreeSet<u32>, String>; 2],
    case: Value,
    size: (usize, usize, usize),
}

impl Attempt {
    fn tally(&self, report: &mut Report) {
        for (view, verdict) in self.views.iter().enumerate() {
            report.attempt(view, &self.policy, &self.scope);
            let (kind, class) = match (verdict, self.kubelet.admit) {
                (Ok(_), false) => (
                    Kind::FalseAdmit,
                    format!("{}: {}", self.kubelet.reason, self.kubelet.message),
                ),
                (Err(why), true) => (Kind::FalseReject, why.clone()),
                (Ok(zones), true) if self.policy != "none" && *zones != self.kubelet_zones => (
                    Kind::ZoneMismatch,
                    relation(zones, &self.kubelet_zones).to_owned(),
                ),
                _ => continue,
            };
            let class = format!("[{}] {class}", self.managers);
            report.failure(Failure {
                view,
                kind,
                policy: self.policy.clone(),
                scope: self.scope.clone(),
                class: class_of(&class),
                size: self.size,
                case: self.case.clone(),
            });
        }
    }
}

async fn run_node(referee: Arc<Referee>, dir: &Path, seed: u64, i: usize) -> Vec<Attempt> {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
    let machine = random::machine(&mut rng);
    let kubelet_json = random::kubelet(&mut rng, &machine);
    let node = format!("node-{i}");
    let status = referee
        .add_node(&AddNode {
            node: node.clone(),
            pod_resources_dir: Some(dir.join(&node)),
            machine: machine.clone(),
            kubelet: kubelet_json.clone(),
            ..AddNode::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\nmachine: {machine:?}\nkubelet: {kubelet_json}"));
    let kubelet = KubeletConfig::from_yaml(&kubelet_json.to_string())
        .unwrap_or_else(|e| panic!("the updater cannot read {kubelet_json}: {e}"));
    let policy = kubelet.topology_manager_policy.as_str().to_owned();
    let scope = kubelet.topology_manager_scope.as_str().to_owned();
    let managers = format!(
        "cpu={} mem={}",
        kubelet.cpu_manager_policy.as_str(),
        kubelet.memory_manager_policy.as_str()
    );
    let allocatable = node_allocatable(&status.allocatable);
    let socket = status
        .pod_resources_socket
        .unwrap_or_else(|| panic!("node {node}: no podresources socket"));
    let client = PodResourcesClient::new(ClientConfig {
        // The kubelet's server allows 100 calls a second.
        min_call_interval: Duration::from_millis(11),
        ..ClientConfig::new(socket)
    });
    let topology = views::topology(&machine);
    let pr_allocatable = client
        .get_allocatable()
        .await
        .expect("GetAllocatableResources");

    let mut on_node: Vec<(String, Resources, Pod)> = Vec::new();
    let mut attempts = Vec::with_capacity(ATTEMPTS_PER_NODE);
    for step in 0..ATTEMPTS_PER_NODE {
        if !on_node.is_empty() && rng.random_bool(0.2) {
            let (uid, _, _) = on_node.remove(rng.random_range(0..on_node.len()));
            referee.remove(&node, &uid).await.expect("remove");
        }
        let uid = format!("{node}-p{step}");
        let pod = random::pod(&mut rng, &machine, &uid);
        let request = PodRequest::from_pod(&pod).expect("a valid pod request");

        let list = client.list().await.expect("List");
        let state = referee.state(&node).await.expect("state");
        let nrts = [
            views::publish(
                &node,
                &topology,
                &kubelet,
                &views::from_podresources(
                    &topology,
                    &kubelet,
                    &pr_allocatable,
                    &list.pod_resources,
                ),
            ),
            views::publish(
                &node,
                &topology,
                &kubelet,
                &views::from_state(&topology, &kubelet, &pr_allocatable, &machine, &state),
            ),
        ];
        let used: Vec<&Resources> = on_node.iter().map(|(_, r, _)| r).collect();
        let views = nrts.map(|nrt| judge(&nrt, &request, &allocatable, &used));

        let verdict = referee.admit(&node, &pod).await.expect("admit");
        let kubelet_zones = used_zones(&machine, &verdict);
        let size = (
            machine.zones.len(),
            on_node.len(),
            request.containers().len(),
        );
        let case = json!({
            "machine": machine,
            "kubelet": kubelet_json,
            "podsOnNode": on_node.iter().map(|(_, _, p)| p).collect::<Vec<_>>(),
            "pod": pod,
            "kubeletVerdict": verdict,
            "scheduler": views.iter().map(|v| match v {
                Ok(z) => json!({"fits": z}),
                Err(e) => json!({"unfit": e}),
            }).collect::<Vec<_>>(),
        });
        if verdict.admit {
            on_node.push((uid, request.effective().clone(), pod));
        }
        attempts.push(Attempt {
            policy: policy.clone(),
            scope: scope.clone(),
            managers: managers.clone(),
            kubelet: verdict,
            kubelet_zones,
            views,
            case,
            size,
        });
    }
    referee.remove_node(&node).await.expect("removeNode");
    attempts
}

/// The scheduler's verdict: node-level resources (as NodeResourcesFit), then the NUMA
/// fit; the zones it expects the pod to use.
fn judge(
    nrt: &NodeResourceTopology,
    request: &PodRequest,
    allocatable: &BTreeMap<String, i64>,
    used: &[&Resources],
) -> Result<BTreeSet<u32>, String> {
    for (name, amount) in request.effective().iter() {
        let taken: i64 = used.iter().map(|r| r.get(name)).sum();
        if amount > 0 && taken + amount > allocatable.get(name).copied().unwrap_or(0) {
            return Err(format!("node-level: Insufficient {name}"));
        }
    }
    let topology = NodeTopology::from_nrt(nrt).map_err(|e| format!("bad NRT: {e}"))?;
    let node_level =
        |r: &str| allocatable.get(r).is_some_and(|&a| a > 0) || matches!(r, "cpu" | "memory");
    let placement = numa::fit(&topology, request, &node_level).map_err(|u| u.to_string())?;
    Ok(placement
        .zones
        .map(|z| z.iter().collect())
        .unwrap_or_default())
}

/// The Node's allocatable, CPU in millicores as the scheduler counts it.
fn node_allocatable(list: &BTreeMap<String, String>) -> BTreeMap<String, i64> {
    list.iter()
        .filter_map(|(name, q)| {
            let v = if name == "cpu" {
                parse_milli(q)
            } else {
                parse_value(q)
            };
            v.ok().map(|v| (name.clone(), v))
        })
        .collect()
}

/// How the zones the scheduler expects relate to those the kubelet used.
fn relation(scheduler: &BTreeSet<u32>, kubelet: &BTreeSet<u32>) -> &'static str {
    if kubelet.is_empty() {
        "the kubelet pinned nothing, the scheduler expected zones"
    } else if scheduler.is_empty() {
        "the scheduler expected no zones, the kubelet pinned some"
    } else if kubelet.is_subset(scheduler) {
        "the kubelet used fewer zones than expected"
    } else if scheduler.is_subset(kubelet) {
        "the kubelet used more zones than expected"
    } else {
        "other zones than expected"
    }
}

/// The zones whose CPUs, memory or devices the kubelet gave the pod.
fn used_zones(machine: &Machine, verdict: &Admission) -> BTreeSet<u32> {
    let cpu_zone: BTreeMap<u32, u32> = machine
        .zones
        .iter()
        .flat_map(|z| {
            z.cores
                .iter()
                .flat_map(move |c| c.cpus.iter().map(move |&cpu| (cpu, z.id)))
        })
        .collect();
    let device_zone: BTreeMap<&str, u32> = machine
        .devices
        .values()
        .flatten()
        .filter_map(|d| d.numa.map(|z| (d.id.as_str(), z)))
        .collect();
    let mut zones = BTreeSet::new();
    for c in &verdict.containers {
        zones.extend(c.cpus.iter().filter_map(|cpu| cpu_zone.get(cpu)));
        zones.extend(c.memory.iter().flat_map(|m| m.numa_nodes.iter().copied()));
        zones.extend(
            c.devices
                .iter()
                .flat_map(|d| d.ids.iter().filter_map(|id| device_zone.get(id.as_str()))),
        );
    }
    zones
}
