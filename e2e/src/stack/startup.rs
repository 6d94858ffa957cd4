//! Bringing the stack up: the scenario's nodes with the pod runner over them, and the
//! scheduler replicas the operator's Deployment asks for.

use super::{StackError, start_runner_with_services, start_simulator, wait_ready_pods};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use std::path::Path;
use std::time::Duration;
use tas_nodesim::runner::{HostService, Runner};
use tas_nodesim::{Scenario, Simulator};
use tas_testcluster::TestCluster;

/// The scenario's simulated nodes ([`start_simulator`]) and the pod runner over them
/// ([`start_runner_with_services`]), with `services` reachable by name from the pods.
pub async fn start_nodes(
    cluster: &TestCluster,
    client: &Client,
    scenario: &Scenario,
    work_dir: &Path,
    services: Vec<HostService>,
) -> Result<(Simulator, Runner), StackError> {
    let sim = start_simulator(client, scenario, work_dir).await?;
    let runner = start_runner_with_services(cluster, client, &sim, services).await?;
    Ok((sim, runner))
}

/// The node agents' pods of config/default's layout (in [`super::AGENTS_NAMESPACE`]),
/// one Ready pod with a process per node, `nodes` of them.
pub async fn wait_updater_pods(
    client: &Client,
    runner: &Runner,
    nodes: usize,
    timeout: Duration,
) -> Result<Vec<Pod>, StackError> {
    wait_ready_pods(
        client,
        runner,
        super::AGENTS_NAMESPACE,
        "tas-updater",
        nodes,
        timeout,
    )
    .await
}

/// The scheduler's pods in `namespace`, once its Deployment exists and as many of its
/// pods as the Deployment has replicas are Ready with a process each.
pub async fn wait_scheduler_pods(
    client: &Client,
    runner: &Runner,
    namespace: &str,
    timeout: Duration,
) -> Result<Vec<Pod>, StackError> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let replicas = tas_testcluster::wait_for("the scheduler Deployment", timeout, || async {
        Ok::<_, kube::Error>(
            deployments
                .get_opt("tas-scheduler")
                .await?
                .and_then(|d| d.spec?.replicas),
        )
    })
    .await
    .map_err(StackError::ctx("waiting for the scheduler Deployment"))?;
    let replicas = usize::try_from(replicas).unwrap_or(0);
    wait_ready_pods(
        client,
        runner,
        namespace,
        "tas-scheduler",
        replicas,
        timeout,
    )
    .await
}

/// The operator's Ready pods in `namespace`: config/default's Deployment and the chart's
/// both run two replicas.
pub async fn wait_operator_pods(
    client: &Client,
    runner: &Runner,
    namespace: &str,
    timeout: Duration,
) -> Result<Vec<Pod>, StackError> {
    wait_ready_pods(client, runner, namespace, "tas-operator", 2, timeout).await
}

/// The operands a TopologyAwareScheduling object asked for, once they run.
pub struct Operands {
    /// One Ready node agent pod per node.
    pub updaters: Vec<Pod>,
    /// The scheduler's Ready replicas.
    pub schedulers: Vec<Pod>,
}

/// After the object is applied: an updater per node ([`wait_updater_pods`]), the object
/// `Available` with `nodes` fresh NRTs ([`super::wait_available`]) and the scheduler's
/// replicas in `namespace` ([`wait_scheduler_pods`]).
pub async fn wait_operands(
    client: &Client,
    runner: &Runner,
    namespace: &str,
    nodes: usize,
    timeout: Duration,
) -> Result<Operands, StackError> {
    let updaters = wait_updater_pods(client, runner, nodes, timeout).await?;
    super::wait_available(client, nodes, timeout).await?;
    let schedulers = wait_scheduler_pods(client, runner, namespace, timeout).await?;
    Ok(Operands {
        updaters,
        schedulers,
    })
}
