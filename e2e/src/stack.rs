//! The whole TAS stack on a real control plane with simulated NUMA nodes: what the
//! full-stack test and `make demo` run.
//!
//! Nothing runs in-process: `kubectl apply -k config/default` installs the operator, the
//! node simulator's pod runner starts the operator's pods as processes from that
//! Deployment, and the operator's own operands (an updater per simulated node from the
//! DaemonSet it renders, the scheduler from its Deployment) the same way, each under its
//! own ServiceAccount token (see [`processes`]). kwok keeps the nodes; the node
//! simulator plays the kubelet for the workload.

mod inspect;
mod processes;
mod report;
mod startup;
mod workload;

pub use inspect::{create_oversized_pod, kubectl_tas, wait_failed_scheduling};
pub use processes::{
    NAME_LABEL, cmdline, is_ready, process_identity, start_runner, start_runner_with,
    start_runner_with_services, wait_ready_pods,
};
pub use report::{Placement, Report, WorkloadOutcome};
pub use startup::{
    Operands, start_nodes, wait_operands, wait_operator_pods, wait_scheduler_pods,
    wait_updater_pods,
};
pub use workload::{
    create_fits_and_no_zone, guaranteed_pod, run_workload, two_zone_nodes, wait_settled,
};

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use std::path::Path;
use std::time::{Duration, Instant};
use tas_api::tas::TopologyAwareScheduling;
use tas_nodesim::{Scenario, Simulator};

/// The label every scenario node carries (node group selector of the stack's CR).
pub const NODE_LABEL: &str = "e2e.tas.dev/nodesim";

/// Errors of the stack (test-harness grade: a message saying what did not happen).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StackError(pub String);

impl StackError {
    /// Wrap any displayable error with context.
    pub fn ctx<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> StackError + '_ {
        move |e| StackError(format!("{what}: {e}"))
    }
}

/// The label the minimal sample CR selects its node group by.
/// The node agents' namespace of config/default (TAS_UPDATER_NAMESPACE of the operator).
pub const AGENTS_NAMESPACE: &str = "tas-node";

pub const SAMPLE_NODE_LABEL: &str = "tas.dev/numa";
/// Its value.
pub const SAMPLE_NODE_LABEL_VALUE: &str = "true";

/// `config/samples/tas_v1alpha1_topologyawarescheduling.yaml`, the object an admin
/// applies first (its node group selects nodes labelled [`SAMPLE_NODE_LABEL`]).
pub fn sample_cr() -> Result<TopologyAwareScheduling, StackError> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../config/samples/tas_v1alpha1_topologyawarescheduling.yaml");
    let text = std::fs::read_to_string(&path).map_err(StackError::ctx("reading the sample CR"))?;
    serde_norway::from_str(&text).map_err(StackError::ctx("parsing the sample CR"))
}

/// Apply `cr` with server-side apply.
pub async fn apply_cr(client: &Client, cr: &TopologyAwareScheduling) -> Result<(), StackError> {
    let api: Api<TopologyAwareScheduling> = Api::all(client.clone());
    api.patch(
        "default",
        &PatchParams::apply("tas-e2e").force(),
        &Patch::Apply(cr),
    )
    .await
    .map_err(|e| StackError(format!("applying the TopologyAwareScheduling object: {e}")))?;
    Ok(())
}

/// Wait until the CR reports `Available=True` and every scenario node has a fresh NRT;
/// returns how long it took.
pub async fn wait_available(
    client: &Client,
    nodes: usize,
    timeout: Duration,
) -> Result<Duration, StackError> {
    let api: Api<TopologyAwareScheduling> = Api::all(client.clone());
    let start = Instant::now();
    let last = std::sync::Mutex::new(String::new());
    let result = tas_testcluster::wait_for(
        "the stack to be Available with fresh NRTs",
        timeout,
        || async {
            let Some(cr) = api.get_opt("default").await? else {
                return Ok::<_, kube::Error>(None);
            };
            let status = cr.status.unwrap_or_default();
            let available = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True");
            let fresh = status.nodes_with_fresh_nrt.unwrap_or(0) as usize;
            if let Ok(mut l) = last.lock() {
                *l = serde_json::to_string(&status).unwrap_or_default();
            }
            Ok((available && fresh >= nodes).then_some(()))
        },
    )
    .await;
    match result {
        Ok(()) => Ok(start.elapsed()),
        Err(e) => Err(StackError(format!(
            "waiting for Available: {e}; last status: {}",
            last.lock().map(|l| l.clone()).unwrap_or_default()
        ))),
    }
}

/// Create the scenario's nodes and start the simulator (the "kubelets").
pub async fn start_simulator(
    client: &Client,
    scenario: &Scenario,
    work_dir: &Path,
) -> Result<Simulator, StackError> {
    let sim = Simulator::start(client.clone(), scenario, work_dir)
        .await
        .map_err(StackError::ctx("starting the node simulator"))?;
    for name in sim.nodes().keys() {
        tas_testcluster::wait_node_schedulable(client, name, Duration::from_secs(60))
            .await
            .map_err(StackError::ctx("waiting for a simulated node"))?;
    }
    Ok(sim)
}

/// `kubectl apply --server-side -k config/default`: install TAS as an admin would.
pub fn install_default(cluster: &tas_testcluster::TestCluster) -> Result<(), StackError> {
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(cluster.binaries_dir().join("kubectl"))
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig_path().display()
        ))
        .args(["apply", "--server-side", "-k"])
        .arg(repo.join("config/default"))
        .output()
        .map_err(StackError::ctx("running kubectl"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(StackError(format!(
            "kubectl apply -k config/default failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}
