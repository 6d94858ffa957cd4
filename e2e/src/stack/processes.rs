//! The operator and its operands as processes: the node simulator's pod runner starts
//! every pod of TAS's images that lands on a simulated node from its pod spec — the
//! operator from `config/default`'s Deployment, the updaters from the DaemonSet the
//! operator rendered, the scheduler from its Deployment — each under its own
//! ServiceAccount token. This module starts the runner and finds those pods.

use super::StackError;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use std::time::Duration;
use tas_nodesim::Simulator;
use tas_nodesim::runner::images::TAS_IMAGES;
use tas_nodesim::runner::{ApiRoute, HostService, Images, Runner, RunnerConfig};
use tas_testcluster::TestCluster;

/// The pod label of each TAS component.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// Starts the pod runner on every simulated node, with the binaries cargo built next to
/// the running executable (`cargo build -p tas-operator -p tas-scheduler -p tas-updater`
/// first; `make test` and `make demo` do).
pub async fn start_runner(
    cluster: &TestCluster,
    client: &Client,
    sim: &Simulator,
) -> Result<Runner, StackError> {
    start_runner_with_services(cluster, client, sim, Vec::new()).await
}

/// [`start_runner`], with servers on this host that the pods reach by name (an
/// OpenTelemetry collector, say).
pub async fn start_runner_with_services(
    cluster: &TestCluster,
    client: &Client,
    sim: &Simulator,
    services: Vec<HostService>,
) -> Result<Runner, StackError> {
    start_runner_with(cluster, client, sim, services, Vec::new()).await
}

/// [`start_runner_with_services`], with the pods `api_routes` match reaching the API
/// server elsewhere (a fault proxy in front of it, for the scheduler's pods, say).
pub async fn start_runner_with(
    cluster: &TestCluster,
    client: &Client,
    sim: &Simulator,
    services: Vec<HostService>,
    api_routes: Vec<ApiRoute>,
) -> Result<Runner, StackError> {
    let images = Images::from_target_dir();
    let missing: Vec<&str> = TAS_IMAGES
        .into_iter()
        .filter(|n| !images.names().any(|m| m == *n))
        .collect();
    if !missing.is_empty() {
        return Err(StackError(format!(
            "the pod runner needs the binaries {missing:?} next to this executable: run `cargo build -p tas-operator -p tas-scheduler -p tas-updater` first"
        )));
    }
    let config = RunnerConfig {
        api_server: cluster
            .api_server_addr()
            .map_err(StackError::ctx("the API server address"))?,
        images,
        pids_file: Some(cluster.watchdog_pids_file()),
        nodes: sim
            .nodes()
            .keys()
            .map(|n| (n.clone(), sim.node_dir(n)))
            .collect(),
        services,
        api_routes,
    };
    Runner::start(client.clone(), config)
        .await
        .map_err(StackError::ctx("starting the pod runner"))
}

/// The running pods of component `name` (`tas-operator`, `tas-scheduler`, `tas-updater`)
/// in `namespace`, once there are `count` of them Ready and each has a process.
pub async fn wait_ready_pods(
    client: &Client,
    runner: &Runner,
    namespace: &str,
    name: &str,
    count: usize,
    timeout: Duration,
) -> Result<Vec<Pod>, StackError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(&format!("{NAME_LABEL}={name}"));
    tas_testcluster::wait_for(
        format!("{count} Ready {name} pods with processes"),
        timeout,
        || async {
            let pods: Vec<Pod> = api
                .list(&lp)
                .await?
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| is_ready(p) && runner.pid(namespace, &p.name_any()).is_some())
                .collect();
            Ok::<_, kube::Error>((pods.len() == count).then_some(pods))
        },
    )
    .await
    .map_err(StackError::ctx("waiting for pods"))
}

/// Whether the pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The command line of process `pid` (from /proc).
pub fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Who the API server says process `pid` is: the user of the ServiceAccount token it
/// reads at the in-cluster path (through `/proc/<pid>/root`, its own root).
pub async fn process_identity(client: &Client, pid: u32) -> Result<String, StackError> {
    let path = format!("/proc/{pid}/root/var/run/secrets/kubernetes.io/serviceaccount/token");
    let token = std::fs::read_to_string(&path).map_err(StackError::ctx("reading the token"))?;
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.trim().to_owned()),
            ..TokenReviewSpec::default()
        },
        ..TokenReview::default()
    };
    let api: Api<TokenReview> = Api::all(client.clone());
    let reviewed = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(StackError::ctx("TokenReview"))?;
    reviewed
        .status
        .and_then(|s| s.user)
        .and_then(|u| u.username)
        .ok_or_else(|| StackError(format!("the token of process {pid} is not valid")))
}
