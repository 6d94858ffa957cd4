//! The kubelets of the benchmark nodes: the referee's.
//!
//! During a run every benchmark node that is bound a pod becomes a node of the referee
//! (the kubelet's own Topology, CPU, memory and device managers from `k8s.io/kubernetes`),
//! named `<run>-<node>`, added on its first bind and removed when the run is over
//! ([`Kubelets::finish`]). Nodes nothing is bound to never reach the referee (at 5,000
//! nodes that is most of them in a short run).
//!
//! A bind the runner's watch sees goes to its node's queue ([`Kubelets::submit`], which
//! never waits); one task per node hands the queued pods to the referee in the order the
//! watch saw the binds, so each node admits in bind order while the nodes are judged side
//! by side, at most [`REFEREE_CALLS`] calls in flight. The verdicts are the run's kubelet
//! rejections ([`AdmissionTally`]); each admission is reported to the node agent
//! ([`crate::agent`]), which asks the node's task for what the node holds
//! ([`Kubelets::view`]) when it publishes — answered after the admissions queued before,
//! as a node agent reading a real kubelet sees them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use tas_nodesim::TOPOLOGY_AFFINITY_ERROR;
use tas_nodesim::machine::{KubeletSettings, Machine};
use tas_nodesim::referee::convert::{self, with_cpu_reservation};
use tas_nodesim::referee::{AddNode, NodeState, Referee, RefereeError};
use tas_nodesim::request::{ContainerKind, PodRequest};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::rejections::{Rejection, SchedulerZones};

/// Referee calls in flight at most, over every node of a run.
pub const REFEREE_CALLS: usize = 32;

/// Admission outcomes of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmissionTally {
    /// Pods admitted.
    pub admitted: usize,
    /// Pods rejected, by reason (`TopologyAffinityError`, `OutOfcpu`, ...).
    pub rejected: BTreeMap<String, usize>,
    /// Pods bound to a node the benchmark does not know.
    pub unknown_node: usize,
    /// Millicores the admitted pods request (app and sidecar containers).
    pub admitted_millicpus: u64,
    /// Admitted pods by the whole CPUs they request (rounded up).
    pub admitted_by_cpus: BTreeMap<u64, usize>,
    /// The NUMA zones of the exclusive CPUs the CPU manager gave each admitted pod (its
    /// containers together), by pod name; pods without exclusive CPUs are left out.
    pub cpu_zones: BTreeMap<String, BTreeSet<u32>>,
    /// Every rejected pod, in the order the verdicts came.
    pub rejections: Vec<Rejection>,
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

/// Millicores `pod` requests while it runs: its app and sidecar containers (init
/// containers have finished).
pub fn running_millicpus(pod: &PodRequest) -> u64 {
    pod.containers
        .iter()
        .filter(|c| c.kind != ContainerKind::Init)
        .map(|c| c.get("cpu"))
        .sum()
}

/// What a node holds, for its NRT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    /// The managers' state; `None`: nothing was admitted, everything is free.
    pub state: Option<NodeState>,
    /// The admitted pods (namespace, name), in admission order.
    pub pods: Vec<(String, String)>,
}

/// A node that was admitted a pod, with when (sent to the node agent).
pub type Admitted = (String, Instant);

enum Request {
    /// A pod, and when the runner's watch saw it bound.
    Admit(Box<Pod>, SystemTime),
    View(oneshot::Sender<Result<NodeView, RefereeError>>),
    /// Answered once every pod queued before is judged.
    Flush(oneshot::Sender<()>),
}

/// What every node's task needs.
struct Shared {
    referee: Arc<Referee>,
    /// The zone of every CPU of the machine.
    cpu_zone: HashMap<u32, u32>,
    run: String,
    add: AddNode,
    calls: Semaphore,
    tally: Mutex<AdmissionTally>,
    admitted: Option<mpsc::UnboundedSender<Admitted>>,
    /// Each rejection as it is judged (the run's lookup of the scheduler's decision).
    rejected: Mutex<Option<mpsc::UnboundedSender<Rejection>>>,
}

/// The kubelets of every node of one run.
pub struct Kubelets {
    shared: Arc<Shared>,
    names: BTreeSet<String>,
    queues: Mutex<HashMap<String, mpsc::UnboundedSender<Request>>>,
    tasks: Mutex<JoinSet<Result<Option<String>, RefereeError>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Kubelets {
    /// Nodes `names`, all with `machine` and `settings`, judged by `referee` under the
    /// names `<run>-<node>`; every admission is sent to `admitted` (the node agent).
    pub fn new(
        referee: Arc<Referee>,
        run: &str,
        names: &[String],
        machine: &Machine,
        settings: KubeletSettings,
        admitted: Option<mpsc::UnboundedSender<Admitted>>,
    ) -> Self {
        let cpu_zone = machine
            .zones
            .iter()
            .flat_map(|z| z.cpus.iter().map(|&cpu| (cpu, z.id)))
            .collect();
        let machine = with_cpu_reservation(machine, &settings);
        let add = AddNode {
            machine: convert::machine(&machine),
            kubelet: convert::kubelet_config(&machine, &settings),
            ..AddNode::default()
        };
        Self {
            shared: Arc::new(Shared {
                referee,
                cpu_zone,
                run: run.to_owned(),
                add,
                calls: Semaphore::new(REFEREE_CALLS),
                tally: Mutex::default(),
                admitted,
                rejected: Mutex::default(),
            }),
            names: names.iter().cloned().collect(),
            queues: Mutex::default(),
            tasks: Mutex::new(JoinSet::new()),
        }
    }

    /// Queues `pod`, just seen bound to `node`, for that node's kubelet. Must run inside
    /// a Tokio runtime (the node's task starts on its first pod).
    pub fn submit(&self, node: &str, pod: &Pod) {
        if !self.names.contains(node) {
            lock(&self.shared.tally).unknown_node += 1;
            return;
        }
        let mut queues = lock(&self.queues);
        let queue = queues.entry(node.to_owned()).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let shared = self.shared.clone();
            lock(&self.tasks).spawn(node_task(shared, node.to_owned(), rx));
            tx
        });
        // A closed queue means the node's task failed; `finish` reports why.
        let _ = queue.send(Request::Admit(Box::new(pod.clone()), SystemTime::now()));
    }

    /// Sends every rejection, as it is judged, to `to` as well.
    pub fn report_rejections(&self, to: mpsc::UnboundedSender<Rejection>) {
        *lock(&self.shared.rejected) = Some(to);
    }

    /// Waits until every pod queued so far is judged, and stops sending rejections.
    pub async fn flush(&self) {
        let queues: Vec<_> = lock(&self.queues).values().cloned().collect();
        let mut answers = Vec::with_capacity(queues.len());
        for queue in queues {
            let (tx, rx) = oneshot::channel();
            if queue.send(Request::Flush(tx)).is_ok() {
                answers.push(rx);
            }
        }
        for answer in answers {
            // A dropped answer means the node's task failed; `finish` reports why.
            let _ = answer.await;
        }
        lock(&self.shared.rejected).take();
    }

    /// What `node` holds once its queued pods are judged.
    pub async fn view(&self, node: &str) -> Result<NodeView, RefereeError> {
        let queue = lock(&self.queues).get(node).cloned();
        let Some(queue) = queue else {
            return Ok(NodeView::default());
        };
        let (tx, rx) = oneshot::channel();
        let gone = || RefereeError::Gone(format!("the kubelet task of {node} ended"));
        queue.send(Request::View(tx)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// Judges what is still queued, removes the run's nodes from the referee, and returns
    /// the verdicts and the nodes that hold pods (those whose NRT changed).
    pub async fn finish(&self) -> Result<(AdmissionTally, BTreeSet<String>), RefereeError> {
        lock(&self.queues).clear();
        let mut tasks = std::mem::take(&mut *lock(&self.tasks));
        let mut changed = BTreeSet::new();
        let mut failed = None;
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(Ok(node)) => changed.extend(node),
                Ok(Err(e)) => failed = failed.or(Some(e)),
                Err(e) => failed = failed.or(Some(RefereeError::Gone(e.to_string()))),
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok((lock(&self.shared.tally).clone(), changed)),
        }
    }
}

/// One node's kubelet: adds the node to the referee, judges its pods in order, answers
/// views, and removes the node when its queue closes. Returns the node's name when it
/// holds pods.
async fn node_task(
    shared: Arc<Shared>,
    node: String,
    mut queue: mpsc::UnboundedReceiver<Request>,
) -> Result<Option<String>, RefereeError> {
    let name = format!("{}-{node}", shared.run);
    let add = AddNode {
        node: name.clone(),
        ..shared.add.clone()
    };
    {
        let _call = shared.calls.acquire().await;
        shared.referee.add_node(&add).await?;
    }
    let mut pods: Vec<(String, String)> = Vec::new();
    // The admitted pods with the zones of their exclusive CPUs, for a rejection's report.
    let mut admitted: Vec<(String, BTreeSet<u32>)> = Vec::new();
    let judged = async {
        while let Some(request) = queue.recv().await {
            match request {
                Request::Flush(reply) => {
                    let _ = reply.send(());
                }
                Request::Admit(mut pod, bound_at) => {
                    // The referee's node has its own name; the kubelet checks the pod's.
                    if let Some(spec) = pod.spec.as_mut() {
                        spec.node_name = Some(name.clone());
                    }
                    let verdict = {
                        let _call = shared.calls.acquire().await;
                        shared.referee.admit(&name, &pod).await?
                    };
                    if verdict.admit {
                        let millicpus =
                            PodRequest::from_pod(&pod).map_or(0, |r| running_millicpus(&r));
                        let zones: BTreeSet<u32> = verdict
                            .containers
                            .iter()
                            .flat_map(|c| &c.cpus)
                            .filter_map(|cpu| shared.cpu_zone.get(cpu).copied())
                            .collect();
                        let meta = &pod.metadata;
                        let pod_name = meta.name.clone().unwrap_or_default();
                        admitted.push((pod_name.clone(), zones.clone()));
                        let mut tally = lock(&shared.tally);
                        tally.admit(millicpus);
                        if !zones.is_empty() {
                            tally.cpu_zones.insert(pod_name, zones);
                        }
                        drop(tally);
                        pods.push((
                            meta.namespace.clone().unwrap_or_default(),
                            meta.name.clone().unwrap_or_default(),
                        ));
                        if let Some(admitted) = &shared.admitted {
                            let _ = admitted.send((node.clone(), Instant::now()));
                        }
                    } else {
                        let meta = &pod.metadata;
                        let rejection = Rejection {
                            namespace: meta.namespace.clone().unwrap_or_default(),
                            pod: meta.name.clone().unwrap_or_default(),
                            node: node.clone(),
                            reason: verdict.reason.clone(),
                            message: verdict.message,
                            bound_at,
                            admitted_before: admitted.clone(),
                            scheduler: SchedulerZones::NotAsked,
                            last_nrt: None,
                        };
                        if let Some(to) = lock(&shared.rejected).as_ref() {
                            let _ = to.send(rejection.clone());
                        }
                        let mut tally = lock(&shared.tally);
                        *tally.rejected.entry(verdict.reason).or_default() += 1;
                        tally.rejections.push(rejection);
                    }
                }
                Request::View(reply) => {
                    let state = if pods.is_empty() {
                        Ok(None)
                    } else {
                        let _call = shared.calls.acquire().await;
                        shared.referee.state(&name).await.map(Some)
                    };
                    let view = state.map(|state| NodeView {
                        state,
                        pods: pods.clone(),
                    });
                    let _ = reply.send(view);
                }
            }
        }
        Ok::<_, RefereeError>(())
    }
    .await;
    let removed = {
        let _call = shared.calls.acquire().await;
        shared.referee.remove_node(&name).await
    };
    judged.and(removed)?;
    Ok((!pods.is_empty()).then_some(node))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{ClusterShape, guaranteed_pod};

    /// A pod as the watch sees it once bound.
    fn bound(name: &str, cpus: u32, node: &str) -> Pod {
        let mut pod = guaranteed_pod(name, "s", "r", &cpus.to_string(), &format!("{cpus}Gi"));
        pod.metadata.uid = Some(format!("uid-{name}"));
        pod.metadata.namespace = Some("ns".into());
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(node.into());
        }
        pod
    }

    fn shape(nodes: usize, zones: u32, max_pods: u32) -> ClusterShape {
        ClusterShape {
            nodes,
            zones,
            zone_cpus: 4,
            zone_memory_gib: 8,
            max_pods,
            devices_per_zone: 0,
            hugepages_gib_per_zone: 0,
        }
    }

    fn start(referee: &Arc<Referee>, run: &str, shape: &ClusterShape) -> Kubelets {
        let names = shape.node_names();
        Kubelets::new(
            referee.clone(),
            run,
            &names,
            &shape.machine(),
            ClusterShape::kubelet(),
            None,
        )
    }

    /// Node-level fit is not NUMA fit: on two zones × 4 CPUs, 3 + 3 CPUs leave 1 + 1
    /// free, which 8 CPUs of node capacity would take a 2-CPU pod into and no single
    /// zone can; the kubelet's managers reject it, and the pod over the node's pod limit.
    #[tokio::test]
    async fn the_kubelets_managers_judge_each_node_in_bind_order() {
        let referee = Arc::new(Referee::start().unwrap_or_else(|e| panic!("{e}")));
        let two = shape(2, 2, 110);
        let names = two.node_names();
        let (n0, n1) = (names[0].as_str(), names[1].as_str());
        let kubelets = start(&referee, "r0", &two);
        for (node, pod) in [
            (n0, bound("a", 3, n0)),
            (n0, bound("b", 3, n0)),
            (n0, bound("c", 2, n0)),
            (n1, bound("d", 2, n1)),
            (n1, bound("e", 4, n1)),
            ("elsewhere", bound("f", 2, "elsewhere")),
        ] {
            kubelets.submit(node, &pod);
        }
        let view = kubelets.view(n0).await.expect("view");
        assert_eq!(
            view.pods,
            [("ns".into(), "a".into()), ("ns".into(), "b".into())]
        );
        let (tally, changed) = kubelets.finish().await.expect("finish");
        assert_eq!(tally.admitted, 4, "{tally:?}");
        assert_eq!(tally.admitted_millicpus, 12_000, "{tally:?}");
        assert_eq!(
            tally.admitted_by_cpus,
            BTreeMap::from([(2, 1), (3, 2), (4, 1)])
        );
        assert_eq!(tally.topology_errors(), 1, "{tally:?}");
        assert_eq!(tally.other_rejections(), 0, "{tally:?}");
        assert_eq!(tally.unknown_node, 1);
        // Where the CPU manager put each admitted pod's CPUs: 3 + 3 on one zone each.
        let zones = |pod: &str| tally.cpu_zones.get(pod).cloned().unwrap_or_default();
        assert_eq!(zones("a"), BTreeSet::from([0]), "{tally:?}");
        assert_eq!(zones("b"), BTreeSet::from([1]), "{tally:?}");
        assert_eq!(zones("e"), BTreeSet::from([1]), "{tally:?}");
        assert_eq!(tally.cpu_zones.len(), 4, "rejected pods have no CPUs");
        // The rejection names the pod, its node, the kubelet's reason, and what the node
        // had admitted before it, on which zones.
        let [rejection] = tally.rejections.as_slice() else {
            panic!("one rejection: {:?}", tally.rejections);
        };
        assert_eq!((rejection.pod.as_str(), rejection.node.as_str()), ("c", n0));
        assert_eq!(rejection.reason, TOPOLOGY_AFFINITY_ERROR);
        assert_eq!(
            rejection.admitted_before,
            [
                ("a".to_owned(), BTreeSet::from([0])),
                ("b".to_owned(), BTreeSet::from([1]))
            ]
        );
        assert_eq!(changed, BTreeSet::from([n0.to_owned(), n1.to_owned()]));
        assert_eq!(referee.ping().await.unwrap(), 0, "the run's nodes are gone");

        let one = shape(1, 1, 1);
        let node = one.node_name(0);
        let kubelets = start(&referee, "r1", &one);
        kubelets.submit(&node, &bound("g", 1, &node));
        kubelets.submit(&node, &bound("h", 1, &node));
        let (tally, _) = kubelets.finish().await.expect("finish");
        assert_eq!(tally.admitted, 1, "{tally:?}");
        assert_eq!(tally.rejected.get("OutOfpods"), Some(&1), "{tally:?}");
    }
}
