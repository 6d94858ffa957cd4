//! The kubelets of the benchmark nodes.
//!
//! During a run, one nodesim admission model per node ([`Kubelets`]), fed every
//! placement in the order the runner's watch saw the binds, is the source of what the
//! node agent publishes (free CPUs and memory per zone, and the admitted pods'
//! fingerprint), as a node agent reading a real kubelet would: in-process and
//! synchronous, so publishing keeps up with hundreds of binds a second.
//!
//! The correctness columns come from the referee when there is one
//! ([`referee_replay`]): after the run every placement is replayed, in bind order per
//! node, through the kubelet's own Topology, CPU, memory and device managers; a pod it
//! rejects is a pod a real kubelet would have failed. Without the referee the model's
//! own tally stands in.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use tas_nodesim::machine::{KubeletSettings, Machine};
use tas_nodesim::referee::convert::{self, with_cpu_reservation};
use tas_nodesim::referee::{AddNode, Referee, RefereeError};
use tas_nodesim::request::{ContainerKind, PodRequest};
use tas_nodesim::{Admission, NodeState, TOPOLOGY_AFFINITY_ERROR};

/// Nodes the referee replays side by side (its nodes run in parallel).
const REPLAY_PARALLEL_NODES: usize = 8;

/// Admission outcomes of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmissionTally {
    /// Pods admitted.
    pub admitted: usize,
    /// Pods rejected, by reason (`TopologyAffinityError`, `OutOfcpu`, ...).
    pub rejected: BTreeMap<String, usize>,
    /// Pods bound to a node the model does not know.
    pub unknown_node: usize,
    /// Millicores the admitted pods request (app and sidecar containers).
    pub admitted_millicpus: u64,
    /// Admitted pods by the whole CPUs they request (rounded up).
    pub admitted_by_cpus: BTreeMap<u64, usize>,
}

impl AdmissionTally {
    /// Counts one admitted pod requesting `millicpus`.
    pub fn admit(&mut self, millicpus: u64) {
        self.admitted += 1;
        self.admitted_millicpus += millicpus;
        *self
            .admitted_by_cpus
            .entry(millicpus.div_ceil(1000))
            .or_default() += 1;
    }

    /// Admitted pods requesting `cpus` whole CPUs.
    pub fn admitted_of(&self, cpus: u64) -> usize {
        self.admitted_by_cpus.get(&cpus).copied().unwrap_or(0)
    }

    /// Rejections by the Topology Manager.
    pub fn topology_errors(&self) -> usize {
        self.rejected
            .get(TOPOLOGY_AFFINITY_ERROR)
            .copied()
            .unwrap_or(0)
    }

    /// Every other rejection (node-level resource fit, allocation failures).
    pub fn other_rejections(&self) -> usize {
        self.rejected.values().sum::<usize>() - self.topology_errors()
    }
}

/// Admission state of every node.
#[derive(Debug, Clone)]
pub struct Kubelets {
    nodes: BTreeMap<String, NodeState>,
    tally: AdmissionTally,
}

impl Kubelets {
    /// Nodes `names`, all with `machine` and `settings`, nothing admitted.
    pub fn new(names: &[String], machine: &Machine, settings: KubeletSettings) -> Self {
        let empty = NodeState::new(machine, settings);
        Self {
            nodes: names.iter().map(|n| (n.clone(), empty.clone())).collect(),
            tally: AdmissionTally::default(),
        }
    }

    /// Admits `pod`, just bound to `node`, as that node's kubelet would; `None` for a
    /// node the model does not know.
    pub fn admit(&mut self, node: &str, pod: &PodRequest) -> Option<Admission> {
        let Some(state) = self.nodes.get_mut(node) else {
            self.tally.unknown_node += 1;
            return None;
        };
        let admission = state.admit(pod);
        match &admission {
            Admission::Admitted => self.tally.admit(running_millicpus(pod)),
            Admission::Rejected(r) => {
                *self.tally.rejected.entry(r.reason.clone()).or_default() += 1
            }
        }
        Some(admission)
    }

    /// The admission state of `node`.
    pub fn node(&self, node: &str) -> Option<&NodeState> {
        self.nodes.get(node)
    }

    /// Every node name, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// The nodes holding at least one admitted pod: those whose NRT no longer shows
    /// full availability.
    pub fn changed(&self) -> BTreeSet<String> {
        self.names()
            .filter(|n| self.node(n).is_some_and(|s| s.admitted().next().is_some()))
            .map(str::to_owned)
            .collect()
    }

    /// Outcomes so far.
    pub fn tally(&self) -> &AdmissionTally {
        &self.tally
    }
}

/// Millicores `pod` requests while it runs: its app and sidecar containers (init
/// containers have finished).
pub fn running_millicpus(pod: &PodRequest) -> u64 {
    pod.containers
        .iter()
        .filter(|c| c.kind != ContainerKind::Init)
        .map(|c| c.get("cpu"))
        .sum()
}

/// Replays `placements` (node, pod), in bind order, on fresh nodes and tallies the
/// outcomes.
pub fn replay<'a>(
    names: &[String],
    machine: &Machine,
    settings: KubeletSettings,
    placements: impl IntoIterator<Item = (&'a str, &'a PodRequest)>,
) -> AdmissionTally {
    let mut kubelets = Kubelets::new(names, machine, settings);
    for (node, pod) in placements {
        kubelets.admit(node, pod);
    }
    kubelets.tally
}

/// Replays `placements` (node, pod as bound), in bind order per node, through the
/// referee on fresh nodes named `<run>-<node>` (removed afterwards), and tallies the
/// kubelet's verdicts.
pub async fn referee_replay(
    referee: &Referee,
    run: &str,
    names: &[String],
    machine: &Machine,
    settings: KubeletSettings,
    placements: &[(String, Pod)],
) -> Result<AdmissionTally, RefereeError> {
    let machine = with_cpu_reservation(machine, &settings);
    let mut tally = AdmissionTally::default();
    let mut per_node: BTreeMap<&str, Vec<&Pod>> =
        names.iter().map(|n| (n.as_str(), Vec::new())).collect();
    for (node, pod) in placements {
        match per_node.get_mut(node.as_str()) {
            Some(pods) => pods.push(pod),
            None => tally.unknown_node += 1,
        }
    }
    // A node nothing was bound to has nothing to judge: it is not added to the referee
    // (at 5,000 nodes that is most of them).
    per_node.retain(|_, pods| !pods.is_empty());
    let verdicts: Vec<Vec<Result<u64, String>>> = futures::stream::iter(per_node)
        .map(|(node, pods)| {
            let name = format!("{run}-{node}");
            let add = AddNode {
                node: name.clone(),
                machine: convert::machine(&machine),
                kubelet: convert::kubelet_config(&machine, &settings),
                ..AddNode::default()
            };
            async move {
                referee.add_node(&add).await?;
                let mut out = Vec::with_capacity(pods.len());
                for pod in pods {
                    // The replay's node has its own name; the kubelet checks the pod's.
                    let mut pod = pod.clone();
                    if let Some(spec) = pod.spec.as_mut() {
                        spec.node_name = Some(name.clone());
                    }
                    let verdict = referee.admit(&name, &pod).await?;
                    out.push(if verdict.admit {
                        Ok(PodRequest::from_pod(&pod).map_or(0, |r| running_millicpus(&r)))
                    } else {
                        Err(verdict.reason)
                    });
                }
                referee.remove_node(&name).await?;
                Ok::<_, RefereeError>(out)
            }
        })
        .buffer_unordered(REPLAY_PARALLEL_NODES)
        .try_collect()
        .await?;
    for verdict in verdicts.into_iter().flatten() {
        match verdict {
            Ok(millicpus) => tally.admit(millicpus),
            Err(reason) => *tally.rejected.entry(reason).or_default() += 1,
        }
    }
    Ok(tally)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ClusterShape, guaranteed_pod};

    fn request(name: &str, cpus: u32) -> PodRequest {
        let memory = format!("{cpus}Gi");
        PodRequest::from_pod(&guaranteed_pod(name, "s", "r", &cpus.to_string(), &memory)).unwrap()
    }

    #[test]
    fn node_level_fit_is_not_numa_fit() {
        // Two nodes of 2 zones × 4 CPUs. On n0, 3 + 3 CPUs leave 1 + 1 free: 8 CPUs of
        // node capacity would take a 2-CPU pod, no single zone can.
        let shape = ClusterShape {
            nodes: 2,
            zones: 2,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        };
        let names = shape.node_names();
        let pods = [
            request("a", 3),
            request("b", 3),
            request("c", 2),
            request("d", 2),
            request("e", 4),
        ];
        let (n0, n1) = (names[0].as_str(), names[1].as_str());
        let placements = [
            (n0, &pods[0]),
            (n0, &pods[1]),
            (n0, &pods[2]),
            (n1, &pods[3]),
            (n1, &pods[4]),
            ("elsewhere", &pods[2]),
        ];
        let tally = replay(
            &names,
            &shape.machine(),
            ClusterShape::kubelet(),
            placements,
        );
        assert_eq!(tally.admitted, 4);
        assert_eq!(tally.topology_errors(), 1);
        assert_eq!(tally.other_rejections(), 0);
        assert_eq!(tally.unknown_node, 1);
        // a (3) and b (3) on n0, d (2) and e (4) on n1; c found no zone.
        assert_eq!(tally.admitted_millicpus, 12_000);
        assert_eq!(
            tally.admitted_by_cpus,
            BTreeMap::from([(2, 1), (3, 2), (4, 1)])
        );
    }

    #[test]
    fn over_capacity_is_another_rejection() {
        let shape = ClusterShape {
            nodes: 1,
            zones: 1,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods: 1,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        };
        let names = shape.node_names();
        let (a, b) = (request("a", 1), request("b", 1));
        let placements = [(names[0].as_str(), &a), (names[0].as_str(), &b)];
        let tally = replay(
            &names,
            &shape.machine(),
            ClusterShape::kubelet(),
            placements,
        );
        assert_eq!(tally.admitted, 1);
        assert_eq!(tally.topology_errors(), 0);
        assert_eq!(tally.rejected.get("OutOfpods"), Some(&1));
    }

    /// A pod as the watch sees it once bound (to the real node, not the replay's).
    fn bound(name: &str, cpus: u32) -> Pod {
        let mut pod = guaranteed_pod(name, "s", "r", &cpus.to_string(), &format!("{cpus}Gi"));
        pod.metadata.uid = Some(format!("uid-{name}"));
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some("bench-node-0000".into());
        }
        pod
    }

    /// The referee's replay gives the verdicts of the model's tests above: the
    /// kubelet's own managers reject the 2-CPU pod no zone can hold, and the pod over
    /// the node's pod limit.
    #[tokio::test]
    async fn referee_replay_judges_with_the_kubelets_managers() {
        let referee = Referee::start().unwrap_or_else(|e| panic!("{e}"));
        let shape = ClusterShape {
            nodes: 2,
            zones: 2,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods: 110,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        };
        let names = shape.node_names();
        let placements: Vec<(String, Pod)> = [
            (&names[0], bound("a", 3)),
            (&names[0], bound("b", 3)),
            (&names[0], bound("c", 2)),
            (&names[1], bound("d", 2)),
            (&names[1], bound("e", 4)),
            (&"elsewhere".to_owned(), bound("f", 2)),
        ]
        .into_iter()
        .map(|(n, p)| (n.clone(), p))
        .collect();
        let tally = referee_replay(
            &referee,
            "r0",
            &names,
            &shape.machine(),
            ClusterShape::kubelet(),
            &placements,
        )
        .await
        .expect("replay");
        assert_eq!(tally.admitted, 4, "{tally:?}");
        assert_eq!(tally.admitted_millicpus, 12_000, "{tally:?}");
        assert_eq!(tally.admitted_of(4), 1, "{tally:?}");
        assert_eq!(tally.topology_errors(), 1, "{tally:?}");
        assert_eq!(tally.other_rejections(), 0, "{tally:?}");
        assert_eq!(tally.unknown_node, 1);

        let one = ClusterShape {
            max_pods: 1,
            nodes: 1,
            zones: 1,
            ..shape
        };
        let names = one.node_names();
        let placements = vec![
            (names[0].clone(), bound("g", 1)),
            (names[0].clone(), bound("h", 1)),
        ];
        let tally = referee_replay(
            &referee,
            "r1",
            &names,
            &one.machine(),
            ClusterShape::kubelet(),
            &placements,
        )
        .await
        .expect("replay");
        assert_eq!(tally.admitted, 1, "{tally:?}");
        assert_eq!(tally.rejected.get("OutOfpods"), Some(&1), "{tally:?}");
    }
}
