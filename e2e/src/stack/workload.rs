//! Creating a scenario's workload and waiting until every pod has an outcome: running
//! on a node the simulated kubelet admitted, rejected by it, or pending with the
//! scheduler's explanation.

use super::StackError;
use super::report::{Placement, WorkloadOutcome};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tas_nodesim::request::PodKey;
use tas_nodesim::{Scenario, Simulator};

/// Two nodes of two 4-CPU, 8 GiB zones under `single-numa-node` and pod scope, named
/// `name-0` and `name-1`: room for a 2-CPU pod in one zone, none for a 6-CPU one.
pub fn two_zone_nodes(name: &str) -> Result<Scenario, StackError> {
    Scenario::from_yaml(&format!(
        "nodes:\n- name: {name}\n  count: 2\n  topologyManagerPolicy: single-numa-node\n  \
         topologyManagerScope: pod\n  zones:\n  - {{ cpus: 4, memory: 8Gi }}\n  - {{ cpus: 4, memory: 8Gi }}\n"
    ))
    .map_err(StackError::ctx("the two-zone scenario"))
}

/// A Guaranteed pod `name` for `scheduler` asking `cpus` CPUs and 1 GiB, on the
/// simulated nodes.
pub fn guaranteed_pod(name: &str, cpus: &str, scheduler: &str) -> Pod {
    let pod = serde_json::json!({
        "metadata": {"name": name, "labels": {tas_testcluster::NODE_SIM_LABEL: "true"}},
        "spec": {"schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "c", "resources": {
                     "requests": {"cpu": cpus, "memory": "1Gi"},
                     "limits": {"cpu": cpus, "memory": "1Gi"}}}]}
    });
    serde_json::from_value(pod).unwrap_or_default()
}

/// On [`two_zone_nodes`]: pod `fits` (2 CPUs, one zone holds it) and pod `no-zone`
/// (6 CPUs: a node's total, but no zone's), for `scheduler` in `namespace`.
pub async fn create_fits_and_no_zone(
    client: &Client,
    namespace: &str,
    scheduler: &str,
) -> Result<(), StackError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for (name, cpus) in [("fits", "2"), ("no-zone", "6")] {
        pods.create(
            &PostParams::default(),
            &guaranteed_pod(name, cpus, scheduler),
        )
        .await
        .map_err(StackError::ctx("creating a pod"))?;
    }
    Ok(())
}

/// Create the scenario's workload for `scheduler_name` in `namespace`; returns the pod
/// names in creation order.
pub async fn run_workload(
    client: &Client,
    scenario: &Scenario,
    scheduler_name: &str,
    namespace: &str,
) -> Result<Vec<String>, StackError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut names = Vec::new();
    for pod in scenario.workload_pods(scheduler_name, namespace) {
        let created = api
            .create(&PostParams::default(), &pod)
            .await
            .map_err(StackError::ctx("creating a workload pod"))?;
        names.push(created.name_any());
    }
    Ok(names)
}

/// Wait until every pod of `namespace` is Running, Failed, or Pending with a
/// `FailedScheduling` Event, and say which.
pub async fn wait_settled(
    client: &Client,
    namespace: &str,
    sim: &Simulator,
    timeout: Duration,
) -> Result<WorkloadOutcome, StackError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    let mut previous: Option<WorkloadOutcome> = None;
    let mut unchanged_since = Instant::now();
    // What the pods without an outcome look like, for the timeout's message.
    let mut undecided_pods = String::new();
    loop {
        let observed = async {
            let list = pods.list(&ListParams::default()).await?.items;
            undecided_pods = describe_undecided(&list);
            let explained: BTreeMap<String, String> = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
                .filter_map(|e| Some((e.regarding?.name?, e.note.unwrap_or_default())))
                .collect();
            Ok::<_, kube::Error>(classify(&list, &explained, sim))
        }
        .await;
        match observed {
            // Every pod ran or was rejected: nothing left that could still change.
            Ok(outcome) if outcome.undecided == 0 && outcome.pending.is_empty() => {
                return Ok(outcome);
            }
            // Settled and unchanged for longer than a pending pod's longest retry delay
            // plus a cache resync: pending pods had their chance to land.
            Ok(outcome) if outcome.undecided == 0 && previous.as_ref() == Some(&outcome) => {
                if unchanged_since.elapsed() >= STABLE_FOR {
                    return Ok(outcome);
                }
            }
            Ok(outcome) => {
                previous = Some(outcome);
                unchanged_since = Instant::now();
            }
            Err(e) => tracing::debug!(error = %e, "listing the workload"),
        }
        if Instant::now() > deadline {
            return Err(StackError(format!(
                "the workload in {namespace} did not settle within {timeout:?}: {previous:?}; \
                 without an outcome: {undecided_pods}"
            )));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Interval between observations of the workload.
const POLL: Duration = Duration::from_millis(1000);
/// How long an outcome must stay the same to count as final: the scheduler's longest
/// default retry delay (10 s) plus a cache resync (5 s).
const STABLE_FOR: Duration = Duration::from_secs(16);

fn classify(
    pods: &[Pod],
    explained: &BTreeMap<String, String>,
    sim: &Simulator,
) -> WorkloadOutcome {
    let mut out = WorkloadOutcome::default();
    for pod in pods {
        let name = pod.name_any();
        let status = pod.status.clone().unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        match (status.phase.as_deref(), &node) {
            (Some("Running"), Some(node)) => {
                let zones = zones_of(sim, node, pod);
                out.placements.push(Placement {
                    pod: name,
                    node: node.clone(),
                    zones,
                });
            }
            (Some("Failed"), Some(node))
                if status.reason.as_deref() == Some("TopologyAffinityError") =>
            {
                out.topology_affinity_errors.push((name, node.clone()));
            }
            (Some("Failed"), Some(node)) => out.other_failures.push((name, node.clone())),
            (_, None) => match explained.get(&name) {
                Some(msg) => {
                    out.pending.push((name, msg.clone()));
                }
                None => out.undecided += 1,
            },
            _ => out.undecided += 1,
        }
    }
    out.placements.sort();
    out.pending.sort();
    out.topology_affinity_errors.sort();
    out.other_failures.sort();
    out
}

/// Each pod that is neither Running, Failed nor unbound: its node, phase and
/// conditions (e.g. bound but never reported started).
fn describe_undecided(pods: &[Pod]) -> String {
    let described: Vec<String> = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Running" | "Failed")
            )
        })
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let conditions: Vec<String> = status
                .conditions
                .iter()
                .flatten()
                .map(|c| format!("{}={}", c.type_, c.status))
                .collect();
            format!(
                "{} on {} phase {} [{}]",
                p.name_any(),
                p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                status.phase.unwrap_or_default(),
                conditions.join(",")
            )
        })
        .collect();
    if described.is_empty() {
        "none bound".to_owned()
    } else {
        described.join("; ")
    }
}

fn zones_of(sim: &Simulator, node: &str, pod: &Pod) -> BTreeSet<u32> {
    let Some(sim_node) = sim.node(node) else {
        return BTreeSet::new();
    };
    let key = PodKey {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
    };
    sim_node.pod_zones(&key)
}
