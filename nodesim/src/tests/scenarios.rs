//! Scenario files: parsing, rendering, node files, and the claim of the default
//! scenario, judged by the referee, that careless placement fails where careful
//! placement does not.

use std::collections::BTreeMap;

use super::*;
use crate::referee::convert::with_cpu_reservation;
use crate::request::{PodRequest, QosClass};
use crate::sysfs::{kubelet_config_path, socket_path, sysfs_root, write_node_files};
use crate::workload::WORKLOAD_LABEL;
use tas_api::nrt::TopologyManagerScope;
use tas_testcluster::NODE_SIM_LABEL;

const GI: u64 = 1 << 30;
const DEFAULT: &str = include_str!("../../scenarios/default.yaml");

fn default_scenario() -> Scenario {
    Scenario::from_yaml(DEFAULT).expect("default.yaml is valid")
}

#[test]
fn default_scenario_describes_a_heterogeneous_cluster() {
    let scenario = default_scenario();
    let names: Vec<&str> = scenario.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "snn-c-0", "snn-c-1", "snn-p", "snn-big", "rst-c", "rst-p", "be-c", "be-p"
        ]
    );
    let zones: Vec<u32> = scenario
        .nodes()
        .iter()
        .map(|n| n.machine.zone_count())
        .collect();
    assert_eq!(zones, [2, 2, 4, 2, 2, 4, 2, 4]);

    let snn_p = &scenario.nodes()[2];
    assert_eq!(
        snn_p.settings.topology_manager_scope,
        TopologyManagerScope::Pod
    );
    assert_eq!(snn_p.machine.zones[2].cpus, (8..12).collect());
    assert_eq!(snn_p.machine.zones[3].devices[NIC], ["nic-3-0"]);

    let node = scenario.nodes()[0].fake_node();
    assert_eq!(node.cpu, "16");
    assert_eq!(node.memory, (32 * GI).to_string());
    assert_eq!(node.hugepages_2mi.as_deref(), Some("1073741824"));
    assert_eq!(node.hugepages_1gi, None);
    assert_eq!(node.extended[NIC], "2");
    assert_eq!(node.labels["e2e.tas.dev/nodesim"], "default");
}

#[test]
fn workload_pods_carry_the_simulator_label_and_their_qos() {
    let scenario = default_scenario();
    let pods = scenario.workload_pods("tas-scheduler", "team-a");
    let expected: u32 = scenario.workload().iter().map(|t| t.count).sum();
    assert_eq!(pods.len(), expected as usize);
    let first = &pods[0];
    assert_eq!(first.metadata.name.as_deref(), Some("burstable-0"));
    assert_eq!(first.metadata.namespace.as_deref(), Some("team-a"));
    let labels = first.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[NODE_SIM_LABEL], "true");
    assert_eq!(labels[WORKLOAD_LABEL], "burstable");
    let spec = first.spec.as_ref().unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some("tas-scheduler"));

    let qos_of = |name: &str| {
        let pod = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap();
        PodRequest::from_pod(pod).unwrap()
    };
    assert_eq!(qos_of("burstable-0").qos, QosClass::Burstable);
    assert_eq!(qos_of("be-nic-1").qos, QosClass::BestEffort);
    let pair = qos_of("gu-pair-0");
    assert_eq!(pair.qos, QosClass::Guaranteed);
    assert_eq!(pair.containers.len(), 2);
    assert_eq!(pair.effective(|c| c.get("cpu")), 6000);
    assert_eq!(
        qos_of("gu-hugepages-1g-0").containers[0].get("hugepages-1Gi"),
        GI
    );
}

#[test]
fn invalid_scenarios_name_the_problem() {
    let node = |extra: &str| {
        format!(
            "nodes:\n- name: n\n  topologyManagerPolicy: restricted\n{extra}  zones:\n  - {{ cpus: 4, memory: 8Gi, hugepages-2Mi: 3Mi }}\n"
        )
    };
    let cases = [
        (node(""), "not a whole number of pages"),
        (
            node("  topologyManagerScope: node\n").replace(", hugepages-2Mi: 3Mi", ""),
            "node",
        ),
        (
            node("  cpuManagerPolicy: dynamic\n").replace(", hugepages-2Mi: 3Mi", ""),
            "dynamic",
        ),
        (
            node("  reservedSystemCPUs: \"9\"\n").replace(", hugepages-2Mi: 3Mi", ""),
            "reserved CPU 9",
        ),
        (
            "nodes:\n- name: n\n  zones: []\n".to_string(),
            "topologyManagerPolicy",
        ),
        (
            "workload:\n- { name: w, qos: Guaranteed, cpu: \"1\" }\n".to_string(),
            "needs cpu and memory",
        ),
        (
            "workload:\n- { name: w, qos: BestEffort, memory: 1Gi }\n".to_string(),
            "takes no cpu",
        ),
        ("nodes: []\nextra: 1\n".to_string(), "unknown field"),
    ];
    for (yaml, expected) in cases {
        let error = Scenario::from_yaml(&yaml).expect_err(&yaml).to_string();
        assert!(
            error.contains(expected),
            "{error:?} should mention {expected:?}"
        );
    }
    let twice = format!(
        "{}{}",
        node("").replace(", hugepages-2Mi: 3Mi", ""),
        "- name: n\n  topologyManagerPolicy: none\n  zones: [{ cpus: 1, memory: 1Gi }]\n"
    );
    assert!(
        Scenario::from_yaml(&twice)
            .unwrap_err()
            .to_string()
            .contains("twice")
    );
}

#[test]
fn node_files_describe_the_machine() {
    let scenario = default_scenario();
    let spec = &scenario.nodes()[2];
    let dir = tempfile::tempdir().unwrap();
    write_node_files(dir.path(), &spec.machine, &spec.settings).unwrap();
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap();
    let nodes = sysfs_root(dir.path()).join("devices/system/node");
    assert_eq!(read(nodes.join("online")), "0-3\n");
    assert_eq!(read(nodes.join("node2/cpulist")), "8-11\n");
    assert_eq!(read(nodes.join("node1/distance")), "20 10 20 20\n");
    // 8 GiB of memory plus 2 GiB of 1 GiB pages, in kB.
    assert!(read(nodes.join("node0/meminfo")).starts_with("Node 0 MemTotal:       10485760 kB\n"));
    assert_eq!(
        read(nodes.join("node0/hugepages/hugepages-1048576kB/nr_hugepages")),
        "2\n"
    );
    assert_eq!(
        read(nodes.join("node3/hugepages/hugepages-2048kB/nr_hugepages")),
        "0\n"
    );
    let config = read(kubelet_config_path(dir.path()));
    for line in [
        "kind: KubeletConfiguration",
        "topologyManagerPolicy: single-numa-node",
        "topologyManagerScope: pod",
        "cpuManagerPolicy: static",
        "memoryManagerPolicy: Static",
    ] {
        assert!(config.contains(line), "{config}");
    }
    assert!(socket_path(dir.path()).parent().unwrap().is_dir());
}

/// Places every workload pod of `scenario`, in order, on nodes of the referee: on the
/// best-scoring node that fits the node's totals and, if `topology_aware`, whose kubelet
/// admits the pod (tried in score order: a rejected pod holds nothing). Returns the
/// outcome count by reason (`Admitted`, `TopologyAffinityError`, ..., `Pending` when no
/// node was chosen).
async fn schedule(
    referee: &Arc<Referee>,
    scenario: &Scenario,
    scoring: Scoring,
    topology_aware: bool,
) -> BTreeMap<String, usize> {
    let mut nodes = Vec::new();
    for spec in scenario.nodes() {
        let machine = with_cpu_reservation(&spec.machine, &spec.settings);
        let dir = tempfile::tempdir().unwrap();
        let node = SimNode::with_referee(
            referee.clone(),
            format!("{}-{scoring:?}-{topology_aware}", spec.name).to_lowercase(),
            &machine,
            spec.settings,
            spec.fake_node().labels,
            dir.path().to_owned(),
        )
        .await
        .unwrap();
        nodes.push((
            node,
            spec.machine.allocatable(),
            Vec::<PodRequest>::new(),
            dir,
        ));
    }
    let mut outcomes = BTreeMap::new();
    for (i, pod) in scenario.workload_pods("s", "ns").into_iter().enumerate() {
        let mut pod = pod;
        pod.metadata.uid = Some(format!("uid-{i}"));
        let request = PodRequest::from_pod(&pod).unwrap();
        let mut ranked: Vec<(u64, usize)> = nodes
            .iter()
            .enumerate()
            .filter_map(|(n, (_, allocatable, admitted, _))| {
                let free = least_allocated(allocatable, admitted, &request)?;
                let score = match scoring {
                    Scoring::LeastAllocated => free,
                    Scoring::MostAllocated => u64::MAX - free,
                };
                Some((score, n))
            })
            .collect();
        // Best score first, the first node on ties.
        ranked.sort_by_key(|&(score, n)| (std::cmp::Reverse(score), n));
        if !topology_aware {
            ranked.truncate(1);
        }
        let mut result = "Pending".to_string();
        for (_, n) in ranked {
            let (node, _, admitted, _) = &mut nodes[n];
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(node.name().to_owned());
            }
            let verdict = node.admit(&pod, &request.key).await;
            result = outcome(&verdict).to_string();
            if verdict == Admission::Admitted {
                admitted.push(request.clone());
                break;
            }
            if topology_aware {
                result = "Pending".to_string();
            }
        }
        *outcomes.entry(result).or_insert(0) += 1;
    }
    outcomes
}

/// Free share of cpu plus memory after placing `pod` beside `admitted`, in per-mille,
/// or `None` when the node totals do not fit it (the kube-scheduler's NodeResourcesFit
/// with LeastAllocated scoring).
fn least_allocated(
    allocatable: &BTreeMap<String, u64>,
    admitted: &[PodRequest],
    pod: &PodRequest,
) -> Option<u64> {
    let wanted = pod.effective_amounts();
    let mut used: BTreeMap<String, u64> = BTreeMap::new();
    for admitted in admitted {
        for (name, amount) in admitted.effective_amounts() {
            *used.entry(name).or_default() += amount;
        }
    }
    let after =
        |name: &str| used.get(name).copied().unwrap_or(0) + wanted.get(name).copied().unwrap_or(0);
    let capacity = |name: &str| allocatable.get(name).copied().unwrap_or(0);
    if wanted.keys().any(|name| after(name) > capacity(name))
        || admitted.len() as u64 >= capacity("pods")
    {
        return None;
    }
    let free =
        |name: &str| (capacity(name).saturating_sub(after(name))) * 1000 / capacity(name).max(1);
    Some(free("cpu") + free("memory"))
}

/// How a scheduler ranks the nodes that pass its filter.
#[derive(Debug, Clone, Copy)]
enum Scoring {
    /// Spread: the node with the most left free.
    LeastAllocated,
    /// Pack: the node with the least left free.
    MostAllocated,
}

/// Under either scoring, a topology-unaware scheduler gets pods rejected by the
/// kubelet; a topology-aware one never does, and admits everything when it spreads
/// (packing leaves at most two large pods Pending).
#[tokio::test]
async fn default_workload_needs_topology_aware_placement() {
    let Some(referee) = referee() else { return };
    let scenario = default_scenario();
    let total: usize = scenario.workload().iter().map(|t| t.count as usize).sum();
    for scoring in [Scoring::LeastAllocated, Scoring::MostAllocated] {
        let careless = schedule(&referee, &scenario, scoring, false).await;
        let rejected = careless.get("TopologyAffinityError").copied().unwrap_or(0);
        assert!(
            rejected >= 2,
            "{scoring:?}: careless placement should be rejected: {careless:?}"
        );

        let careful = schedule(&referee, &scenario, scoring, true).await;
        let admitted = careful.get("Admitted").copied().unwrap_or(0);
        let pending = careful.get("Pending").copied().unwrap_or(0);
        assert_eq!(
            admitted + pending,
            total,
            "{scoring:?}: careful placement is never rejected: {careful:?}"
        );
        let allowed_pending = match scoring {
            Scoring::LeastAllocated => 0,
            Scoring::MostAllocated => 2,
        };
        assert!(pending <= allowed_pending, "{scoring:?}: {careful:?}");
    }
}
