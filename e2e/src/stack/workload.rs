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
    loop {
        let observed = async {
            let list = pods.list(&ListParams::default()).await?.items;
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
                "the workload in {namespace} did not settle within {timeout:?}: {previous:?}"
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
