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
//! On the updater's view the scheduler judges as it does in the cluster: the object
//! less what the regular init containers of the pods on the node keep, which
//! podresources never reports (`tas_scheduler::numa::init_holdings`, predicted for
//! each pod when it was admitted, on the view before it). Under the CPU manager
//! `static` the updater also reads the shared pool from its own container's cpuset
//! (here: the CPU manager's free CPUs and the reserved ones, as the kubelet sets the
//! cpuset of a shared-pool container), so the object counts the CPUs init containers
//! keep and only their memory and devices are predicted (`initContainerCpus`). Like the
//! updater, the view follows the memory manager's groups from one `List` to the next
//! (`MemoryCells`), listing the pods again after each admission as the updater does
//! when they change.
//!
//! The test fails on any false-admit on the true-state view (there the NRT says exactly
//! what the kubelet has, so admitting a pod the kubelet refuses is a bug of the model),
//! on more false-admits on the updater's view than known, and on more false-rejects on
//! either view, on machines with or without SMT, than known. Zone mismatches are
//! reported.
//!
//! Every supported kubelet minor is judged: `TAS_REFEREE_BINS` lists one referee per
//! minor (`v1.34.4=PATH,v1.35.4=PATH,...`, set by `make test` and `make bench` from
//! `nodesim/referee/build.sh --all`); the same seeded nodes and pods go to each in turn,
//! and the known false-admits below apply to each minor. Without it, the one referee
//! of `TAS_REFEREE_BIN` judges.
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
use std::path::{Path, PathBuf};
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
use tas_scheduler::numa::init_holdings::{self, InitHolding, init_holdings};
use tas_scheduler::numa::{self, MemoryDoubt, NodeTopology, Placement, PodRequest, Resources};
use tas_updater::kubelet_config::KubeletConfig;
use tas_updater::memory_cells::MemoryCells;
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

/// False-admits on the updater's view the default seed may find: none. Before the
/// scheduler accounted for init containers' holdings it found 3.
const KNOWN_AGENT_FALSE_ADMITS: u64 = 0;

/// False-admits on the updater's view the large seed may find (of 30,000): none (22
/// before init containers' holdings were accounted for, 2 before the updater counted
/// their CPUs from the shared pool, 1 before the scheduler doubted memory groups a
/// kubelet refusal may have split). That last one, on v1.34 and v1.35 (node 244,
/// `best-effort`, pod scope): a pod the kubelet refused part-way had its first
/// container's memory put on zone 1 of the group {1, 2}; the kubelet released that
/// memory but kept zone 1 as single, so a later pod could not extend over {1, 2}. No
/// source the updater may read shows it; the scheduler infers it from the refused pod
/// (`numa::memory_doubt`), and so does the agent's view here. Measured with v1.34.4:
/// 0 false-admits on both views of 30,000 attempts (52 false-rejects on the agent's
/// view, 21 on the true state).
const KNOWN_LARGE_AGENT_FALSE_ADMITS: u64 = 0;

/// More false-admits on both views (true state, updater) at the default size and the
/// large one with a kubelet of v1.36 or later. Its device manager hints only NUMA sets
/// of zones that hold a device of the resource (`generateDeviceTopologyHints` iterates
/// `deviceNUMANodes(resource)`, new in v1.36; v1.34 and v1.35 iterate every zone), so
/// under `best-effort` its merge can settle on a narrower set than with every zone and
/// the memory manager then cannot extend it. Before the scheduler applied that rule on
/// nodes whose object names a v1.36+ kubelet (`kubeletVersion`, published by the
/// updater from the Node), it found 3 on each view at the default size and 4 and 3
/// more at the large one; now none at either (the large size measured with v1.36.3:
/// 0 false-admits on both views of 30,000 attempts).
const KNOWN_V136_DEVICE_HINT_FALSE_ADMITS: [u64; 2] = [0, 0];
const KNOWN_LARGE_V136_DEVICE_HINT_FALSE_ADMITS: [u64; 2] = [0, 0];

/// False-rejects the default seed may find per view (updater, true state) and machine
/// (no SMT, SMT), at most over every minor (3,000 attempts each, 1,500 per kind of
/// machine). Measured: updater 0/1 (v1.34, v1.35) and 0/2 (v1.36, v1.37), true state
/// 0/0 on every minor. Before the memory doubt replayed both worlds of a doubted zone
/// and doubted only after refusals another hint provider could have narrowed: updater
/// 3/3 and 3/4; before the scheduler read the CPU layout (`cpuThreadsPerCore`, zone
/// `cpuSocket`): 1/1 and 1/2, true state 1/0 (a `restricted`, container-scope pod on a
/// machine without SMT, whose init container's 3 CPUs the next two app containers
/// took, followed both ways since the NRT did not say which CPUs are whose; without
/// SMT the CPU manager takes them first, see `numa::cpu_reuse`). Those left are on the
/// updater's view only, `best-effort`, pod scope, memory manager `Static`, SMT ("no
/// NUMA zones to extend the topology hint with"): node 92 on every minor (it stays
/// without any doubt: not classified further) and on v1.36 and v1.37 one on node 128
/// (gone without the doubt: a zone still doubted that the kubelet had not split).
const KNOWN_FALSE_REJECTS: [[u64; 2]; 2] = [[0, 2], [0, 0]];

/// The same for the large seed (30,000 attempts, about 15,000 per kind of machine),
/// measured with v1.34.4 only, so the ratchet holds for v1.34 (other minors are not
/// bounded until measured): updater 5/14 (0/19/280 false-admits/false-rejects/zone
/// mismatches: 0.03 % and 0.09 % of the attempts on machines without and with SMT),
/// true state 0/6 (0/6/216). Before the scheduler read the CPU layout
/// (`cpuThreadsPerCore`, zone `cpuSocket`, see `numa::cpu_reuse`): updater 7/27
/// (0/34/283), true state 2/19 (0/21/216); the 15 it removed on both views were
/// init containers' CPUs followed both ways. The 6 left on both views are `restricted`
/// and `single-numa-node`, container scope, SMT, "no zone has enough free cpu and
/// memory together": likely init containers' CPUs the layout rule still follows both
/// ways (several zones, or fewer CPUs asked than reusable); not classified further.
/// The 13 on the updater's view only are refusals of the memory manager (`none`,
/// `best-effort`, `restricted`: likely init containers' memory holdings and doubted
/// groups) and 2 under `single-numa-node`, pod scope; not classified further.
const KNOWN_LARGE_FALSE_REJECTS: [[u64; 2]; 2] = [[5, 14], [0, 6]];

/// [`KNOWN_LARGE_FALSE_REJECTS`] for the minors it was measured with.
fn known_large_false_rejects(version: &str) -> [[u64; 2]; 2] {
    if version.starts_with("v1.34.") {
        KNOWN_LARGE_FALSE_REJECTS
    } else {
        [[u64::MAX; 2]; 2]
    }
}

/// What a run may find: false-admits on the true state and on the updater's view (in
/// that order), false-rejects per view in the report's order (updater, true state) and
/// machine (no SMT, SMT).
#[derive(Clone, Copy)]
struct Known {
    false_admits: [u64; 2],
    false_rejects: [[u64; 2]; 2],
}

/// The known false-admits on both views for a kubelet version (`v1.36.3`), `base`
/// being those of every minor.
fn known_for(version: &str, base: [u64; 2], v136: [u64; 2], false_rejects: [[u64; 2]; 2]) -> Known {
    if std::env::var("TAS_DIFF_SEED").is_ok() {
        return Known {
            false_admits: [0, u64::MAX],
            false_rejects: [[u64::MAX; 2]; 2],
        };
    }
    let minor = version
        .strip_prefix("v1.")
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok());
    let false_admits = match minor {
        Some(m) if m >= 36 => [base[0] + v136[0], base[1] + v136[1]],
        _ => base,
    };
    Known {
        false_admits,
        false_rejects,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_agrees_with_the_kubelet() {
    run_every_minor(seed(15), NODES, |v| {
        known_for(
            v,
            [KNOWN_FALSE_ADMITS, KNOWN_AGENT_FALSE_ADMITS],
            KNOWN_V136_DEVICE_HINT_FALSE_ADMITS,
            KNOWN_FALSE_REJECTS,
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "ten times the size; `make bench` runs it"]
async fn scheduler_agrees_with_the_kubelet_large() {
    run_every_minor(seed(1015), NODES * 10, |v| {
        known_for(
            v,
            [KNOWN_LARGE_FALSE_ADMITS, KNOWN_LARGE_AGENT_FALSE_ADMITS],
            KNOWN_LARGE_V136_DEVICE_HINT_FALSE_ADMITS,
            known_large_false_rejects(v),
        )
    })
    .await;
}

fn seed(default: u64) -> u64 {
    std::env::var("TAS_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The referees to judge with: `TAS_REFEREE_BINS` (`version=path` pairs, comma
/// separated), else the one of `TAS_REFEREE_BIN`, its version read from the cache
/// directory's name (`referee-<version>-<digest>`) when it has one.
fn referees() -> Vec<(String, PathBuf)> {
    if let Some(list) = std::env::var("TAS_REFEREE_BINS")
        .ok()
        .filter(|l| !l.trim().is_empty())
    {
        return list
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|pair| match pair.split_once('=') {
                Some((version, path)) => (version.trim().to_owned(), PathBuf::from(path.trim())),
                None => panic!("TAS_REFEREE_BINS: {pair:?} is not version=path"),
            })
            .collect();
    }
    let path = Referee::binary().unwrap_or_else(|e| panic!("{e}"));
    let version = path
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|d| d.to_str())
        .and_then(|d| d.strip_prefix("referee-"))
        .and_then(|d| d.rsplit_once('-'))
        .map_or_else(|| "of TAS_REFEREE_BIN".to_owned(), |(v, _)| v.to_owned());
    vec![(version, path)]
}

/// Runs the test against every referee, one after the other (each runs its nodes side
/// by side), and fails at the end with every minor's failures.
async fn run_every_minor(seed: u64, nodes: usize, allowed: impl Fn(&str) -> Known) {
    let mut failed = Vec::new();
    for (version, binary) in referees() {
        let start = std::time::Instant::now();
        let referee = Referee::spawn(&binary, &[]).unwrap_or_else(|e| panic!("{e}"));
        let problems = run(
            &version,
            referee,
            seed,
            nodes,
            allowed(&version),
            PARALLEL_NODES,
        )
        .await;
        println!("kubelet {version}: {:.0?}", start.elapsed());
        failed.extend(
            problems
                .into_iter()
                .map(|p| format!("kubelet {version}: {p}")),
        );
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// `known`: the false-admits and false-rejects known on each view. Returns what went
/// wrong (more than known), empty when nothing did.
async fn run(
    version: &str,
    referee: Referee,
    seed: u64,
    nodes: usize,
    known: Known,
    parallel: usize,
) -> Vec<String> {
    let [allowed, allowed_agent] = known.false_admits;
    let parallel = std::env::var("TAS_DIFF_PARALLEL")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(parallel);
    let referee = Arc::new(referee);
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
            async move { (i, run_node(referee, dir, seed, i, version).await) }
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
    println!(
        "differential test, kubelet {version}, seed {seed}, {nodes} nodes × {ATTEMPTS_PER_NODE} attempts"
    );
    println!("{}", report.render());
    let mut problems = Vec::new();
    let bugs = report.false_admits(1);
    if bugs > allowed {
        problems.push(format!(
            "{bugs} pods admitted by the scheduler on an NRT equal to the kubelet's true state \
             were refused by the kubelet (see the table and cases above); {allowed} are known"
        ));
    }
    if bugs < allowed {
        println!("fewer false-admits than known ({bugs} < {allowed}): lower KNOWN_FALSE_ADMITS");
    }
    let agent = report.false_admits(0);
    if agent > allowed_agent {
        problems.push(format!(
            "{agent} pods admitted by the scheduler on the updater's NRT (less init containers' \
             holdings) were refused by the kubelet (see the table and cases above); \
             {allowed_agent} are known"
        ));
    }
    if allowed_agent != u64::MAX && agent < allowed_agent {
        println!(
            "fewer false-admits on the updater's view than known ({agent} < {allowed_agent}): \
             lower the KNOWN_*AGENT_FALSE_ADMITS"
        );
    }
    for (view, name) in report::VIEWS.iter().enumerate() {
        let found = report.false_rejects(view);
        for (machine, kind) in ["no SMT", "SMT"].iter().enumerate() {
            let (found, allowed) = (found[machine], known.false_rejects[view][machine]);
            if found > allowed {
                problems.push(format!(
                    "{found} false-rejects on the {name} view, machines with {kind}; \
                     {allowed} are known (see the table and cases above)"
                ));
            } else if allowed != u64::MAX && found < allowed {
                println!(
                    "fewer false-rejects on the {name} view, machines with {kind}, than \
                     known ({found} < {allowed}): lower the KNOWN_*FALSE_REJECTS"
                );
            }
        }
    }
    problems
}

/// One admission attempt and both views' verdicts.
struct Attempt {
    policy: String,
    scope: String,
    /// `cpu=static mem=Static`: the scheduler cannot see these in the NRT yet.
    managers: String,
    /// Whether the node's cores have two threads (the CPU manager's reuse and
    /// `full-pcpus-only` rules differ with SMT).
    smt: bool,
    kubelet: Admission,
    kubelet_zones: BTreeSet<u32>,
    views: [Result<BTreeSet<u32>, String>; 2],
    case: Value,
    size: (usize, usize, usize),
}

impl Attempt {
    fn tally(&self, report: &mut Report) {
        for (view, verdict) in self.views.iter().enumerate() {
            report.attempt(view, &self.policy, &self.scope, self.smt);
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
                smt: self.smt,
                policy: self.policy.clone(),
                scope: self.scope.clone(),
                class: class_of(&class),
                size: self.size,
                case: self.case.clone(),
            });
        }
    }
}

/// `version`: the referee's kubelet version, which the updater publishes from the
/// Node (`kubeletVersion`).
async fn run_node(
    referee: Arc<Referee>,
    dir: &Path,
    seed: u64,
    i: usize,
    version: &str,
) -> Vec<Attempt> {
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
    let layout = views::cpu_layout(&machine);
    let smt = machine
        .zones
        .iter()
        .flat_map(|z| &z.cores)
        .any(|c| c.cpus.len() > 1);
    let pr_allocatable = client
        .get_allocatable()
        .await
        .expect("GetAllocatableResources");

    // Pods on the node: uid, node-level request, the pod, and what its regular init
    // containers keep that podresources does not report (predicted as the scheduler
    // does when it places or first sees the pod, on the agent's view before it).
    let mut on_node: Vec<(String, Resources, Pod, Vec<InitHolding>)> = Vec::new();
    let mut attempts = Vec::with_capacity(ATTEMPTS_PER_NODE);
    let mut cells = MemoryCells::default();
    // What the scheduler infers from the pods the kubelet refused (their phase turns
    // Failed with the kubelet's rejection message; see `numa::memory_doubt`).
    let mut doubt = MemoryDoubt::default();
    for step in 0..ATTEMPTS_PER_NODE {
        if !on_node.is_empty() && rng.random_bool(0.2) {
            let (uid, _, _, _) = on_node.remove(rng.random_range(0..on_node.len()));
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
                version,
                &topology,
                &layout,
                &kubelet,
                &views::from_podresources(
                    &topology,
                    &kubelet,
                    &pr_allocatable,
                    &list.pod_resources,
                    Some(views::shared_pool(&kubelet, &state)),
                    &mut cells,
                ),
            ),
            views::publish(
                &node,
                version,
                &topology,
                &layout,
                &kubelet,
                &views::from_state(&topology, &kubelet, &pr_allocatable, &machine, &state),
            ),
        ];
        let used: Vec<&Resources> = on_node.iter().map(|(_, r, _, _)| r).collect();
        let held: Vec<InitHolding> = on_node
            .iter()
            .flat_map(|(_, _, _, h)| h.iter().cloned())
            .collect();
        let [agent, truth] = nrts;
        let agent_nrt = agent;
        let agent = judge(
            &agent_nrt,
            &held,
            Some(&mut doubt),
            &request,
            &allocatable,
            &used,
        );
        let truth = judge(&truth, &[], None, &request, &allocatable, &used);
        let holdings = match &agent {
            Ok((node, placement)) => init_holdings(node, &request, placement),
            Err(_) => Vec::new(),
        };
        let views = [agent, truth].map(|v| v.map(|(_, p)| zones_of(&p)));

        let verdict = referee.admit(&node, &pod).await.expect("admit");
        let kubelet_zones = used_zones(&machine, &verdict);
        let size = (
            machine.zones.len(),
            on_node.len(),
            request.containers().len(),
        );
        let case = json!({
            // `TAS_DIFF_NODES` takes the index after `node-`.
            "node": node,
            "machine": machine,
            "kubelet": kubelet_json,
            "podsOnNode": on_node.iter().map(|(_, _, p, _)| p).collect::<Vec<_>>(),
            "pod": pod,
            "kubeletVerdict": verdict,
            "scheduler": views.iter().map(|v| match v {
                Ok(z) => json!({"fits": z}),
                Err(e) => json!({"unfit": e}),
            }).collect::<Vec<_>>(),
        });
        if !verdict.admit
            && let Ok(view) = NodeTopology::from_nrt(&agent_nrt)
        {
            doubt.note_refusal(&view, Some(&request));
        }
        if verdict.admit {
            on_node.push((uid, request.effective().clone(), pod, holdings));
            // The updater lists the pods whenever they change: it sees every pod that
            // runs, also one removed before the next attempt.
            let list = client.list().await.expect("List");
            cells.observe(&topology, &list.pod_resources);
        }
        attempts.push(Attempt {
            policy: policy.clone(),
            scope: scope.clone(),
            managers: managers.clone(),
            smt,
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
/// fit on the object less what init containers of the pods on the node keep (`held`);
/// the node as judged and the placement.
fn judge(
    nrt: &NodeResourceTopology,
    held: &[InitHolding],
    doubt: Option<&mut MemoryDoubt>,
    request: &PodRequest,
    allocatable: &BTreeMap<String, i64>,
    used: &[&Resources],
) -> Result<(NodeTopology, Placement), String> {
    for (name, amount) in request.effective().iter() {
        let taken: i64 = used.iter().map(|r| r.get(name)).sum();
        if amount > 0 && taken + amount > allocatable.get(name).copied().unwrap_or(0) {
            return Err(format!("node-level: Insufficient {name}"));
        }
    }
    let mut topology = NodeTopology::from_nrt(nrt).map_err(|e| format!("bad NRT: {e}"))?;
    if let Some(doubt) = doubt {
        doubt.prune(&topology);
        doubt.apply(&mut topology);
    }
    init_holdings::hold(&mut topology, held);
    let node_level =
        |r: &str| allocatable.get(r).is_some_and(|&a| a > 0) || matches!(r, "cpu" | "memory");
    let placement = numa::fit(&topology, request, &node_level).map_err(|u| u.to_string())?;
    Ok((topology, placement))
}

/// The zones a placement expects the pod to use.
fn zones_of(placement: &Placement) -> BTreeSet<u32> {
    placement
        .zones
        .map(|z| z.iter().collect())
        .unwrap_or_default()
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
