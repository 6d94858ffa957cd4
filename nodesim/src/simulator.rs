//! A running simulator: every node of a scenario with its files, podresources socket and
//! Node object, and the controller admitting their pods.
//!
//! [`Simulator::start`] writes each node's files under `<work-dir>/<node>/` (see
//! [`sysfs`](crate::sysfs)), adds it to one [referee](crate::referee) process — the
//! kubelet's own managers judge its pods and serve its podresources API on
//! `<work-dir>/<node>/pod-resources/kubelet.sock` — creates its kwok Node (an existing
//! Node of that name is kept, so a restarted simulator takes its nodes back), starts the
//! [`Controller`] and returns once it has handled the pods that already exist.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::DeleteParams;
use kube::{Api, Client};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::info;

use crate::controller::{Controller, Nodes};
use crate::node::SimNode;
use crate::referee::convert::with_cpu_reservation;
use crate::referee::{Referee, RefereeError};
use crate::scenario::{NodeSpec, Scenario};
use crate::sysfs::{socket_path, write_node_files};
use tas_testcluster::create_fake_node;

/// How long [`Simulator::start`] waits for the controller's first pod list.
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimulatorError {
    /// A node's files could not be written.
    #[error("writing the files of node {node} under {}: {source}", dir.display())]
    Files {
        /// Node name.
        node: String,
        /// Its directory.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The referee could not be started.
    #[error("starting the referee: {0}")]
    StartReferee(RefereeError),
    /// The referee refused a node.
    #[error("adding node {node} to the referee: {source}")]
    AddNode {
        /// Node name.
        node: String,
        /// Why.
        source: RefereeError,
    },
    /// A Node object could not be created.
    #[error("creating Node {node}: {source}")]
    CreateNode {
        /// Node name.
        node: String,
        /// The API error.
        source: tas_testcluster::Error,
    },
    /// [`Simulator::add_node`] of a node the simulator has.
    #[error("node {0} is simulated already")]
    NodeExists(String),
    /// [`Simulator::remove_node`] of a node the simulator does not have.
    #[error("node {0} is not simulated")]
    UnknownNode(String),
    /// The referee could not drop a node.
    #[error("removing node {node} from the referee: {source}")]
    RemoveNode {
        /// Node name.
        node: String,
        /// Why.
        source: RefereeError,
    },
    /// A Node object could not be deleted.
    #[error("deleting Node {node}: {source}")]
    DeleteNode {
        /// Node name.
        node: String,
        /// The API error.
        source: kube::Error,
    },
    /// The controller did not list pods in time.
    #[error("the controller did not sync its pods within {0:?}")]
    NotSynced(Duration),
}

/// The running simulator. Dropping it stops the controller and the sockets.
pub struct Simulator {
    client: Client,
    work_dir: PathBuf,
    nodes: Nodes,
    /// Tells the controller about nodes added at run time.
    added: mpsc::UnboundedSender<String>,
    referee: Arc<Referee>,
    stop: Option<oneshot::Sender<()>>,
    controller: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("work_dir", &self.work_dir)
            .field("nodes", &self.nodes().keys().collect::<Vec<_>>())
            .field("referee", &self.referee)
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// Starts every node of `scenario` with its files under `work_dir`.
    pub async fn start(
        client: Client,
        scenario: &Scenario,
        work_dir: &Path,
    ) -> Result<Self, SimulatorError> {
        let referee = Arc::new(Referee::start().map_err(SimulatorError::StartReferee)?);
        let mut nodes = BTreeMap::new();
        for spec in scenario.nodes() {
            let node = prepare(&referee, work_dir, spec).await?;
            nodes.insert(spec.name.clone(), node);
        }
        for spec in scenario.nodes() {
            if let Some(node) = nodes.get(&spec.name) {
                register(&client, spec, node).await?;
            }
        }

        let (stop, stopped) = oneshot::channel::<()>();
        let (synced_tx, synced) = oneshot::channel();
        let (added, added_rx) = mpsc::unbounded_channel();
        let nodes: Nodes = Arc::new(RwLock::new(nodes));
        let controller = Controller::shared(client.clone(), nodes.clone(), Some(added_rx));
        let task = tokio::spawn(controller.run(synced_tx, async {
            let _ = stopped.await;
        }));
        let mut simulator = Self {
            client,
            work_dir: work_dir.to_path_buf(),
            nodes,
            added,
            referee,
            stop: Some(stop),
            controller: Some(task),
        };
        match tokio::time::timeout(SYNC_TIMEOUT, synced).await {
            Ok(Ok(())) => Ok(simulator),
            _ => {
                simulator.stop_now();
                Err(SimulatorError::NotSynced(SYNC_TIMEOUT))
            }
        }
    }

    /// Adds node `spec` while the simulator runs, as a machine joining the cluster: its
    /// files are (re)written under the work directory (a node of an earlier machine
    /// under that name leaves nothing behind), the referee starts its managers afresh,
    /// its Node is created (or an existing one taken over), and the pods already bound
    /// to it are handled, in creation order, as a registering kubelet does.
    pub async fn add_node(&self, spec: &NodeSpec) -> Result<Arc<SimNode>, SimulatorError> {
        if self.node(&spec.name).is_some() {
            return Err(SimulatorError::NodeExists(spec.name.clone()));
        }
        let node = prepare(&self.referee, &self.work_dir, spec).await?;
        // Known to the controller before the Node exists: no pod bound to it is missed.
        self.nodes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(spec.name.clone(), node.clone());
        register(&self.client, spec, &node).await?;
        let _ = self.added.send(spec.name.clone());
        Ok(node)
    }

    /// Removes node `name` as a machine that is gone for good: its kubelet stops (the
    /// referee drops its managers' state and closes its podresources socket) and its
    /// Node object is deleted. Pods bound to it are left to the cluster, as with a
    /// real node: kube-controller-manager's pod garbage collector deletes them once the
    /// Node has been gone for its quarantine period.
    pub async fn remove_node(&self, name: &str) -> Result<(), SimulatorError> {
        let removed = self
            .nodes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        if removed.is_none() {
            return Err(SimulatorError::UnknownNode(name.to_owned()));
        }
        self.referee
            .remove_node(name)
            .await
            .map_err(|source| SimulatorError::RemoveNode {
                node: name.to_owned(),
                source,
            })?;
        let api: Api<Node> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(SimulatorError::DeleteNode {
                node: name.to_owned(),
                source,
            }),
        }
    }

    /// The simulated nodes by name, as they are now.
    pub fn nodes(&self) -> BTreeMap<String, Arc<SimNode>> {
        self.nodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The simulated node `name`.
    pub fn node(&self, name: &str) -> Option<Arc<SimNode>> {
        self.nodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// The directory of node `name` (sysfs under `sys/`, `config.yaml`, `pod-resources/`).
    pub fn node_dir(&self, name: &str) -> PathBuf {
        self.work_dir.join(name)
    }

    /// The podresources socket of node `name`.
    pub fn socket_path(&self, name: &str) -> PathBuf {
        socket_path(&self.node_dir(name))
    }

    /// The referee judging every node.
    pub fn referee(&self) -> &Arc<Referee> {
        &self.referee
    }

    /// Stops the controller and the podresources servers, waiting for them.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.controller.take() {
            let _ = task.await;
        }
        for name in self.nodes().keys() {
            if let Err(error) = self.referee.remove_node(name).await {
                tracing::debug!(node = %name, %error, "referee: removeNode");
            }
        }
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.controller.take() {
            task.abort();
        }
    }
}

/// Writes the node's files (sysfs, kubelet config) and adds it to the referee.
async fn prepare(
    referee: &Arc<Referee>,
    work_dir: &Path,
    spec: &NodeSpec,
) -> Result<Arc<SimNode>, SimulatorError> {
    let dir = work_dir.join(&spec.name);
    let machine = with_cpu_reservation(&spec.machine, &spec.settings);
    write_node_files(&dir, &machine, &spec.settings).map_err(|source| SimulatorError::Files {
        node: spec.name.clone(),
        dir: dir.clone(),
        source,
    })?;
    let sockets = socket_path(&dir)
        .parent()
        .map_or_else(|| dir.clone(), Path::to_path_buf);
    let node = SimNode::with_referee(
        referee.clone(),
        &spec.name,
        &machine,
        spec.settings,
        spec.fake_node().labels,
        sockets,
    )
    .await
    .map_err(|source| SimulatorError::AddNode {
        node: spec.name.clone(),
        source,
    })?;
    let node = if spec.settings.cpu_manager_policy == crate::machine::CpuManagerPolicy::Static {
        node.with_shared_pool(crate::sysfs::shared_pool_status_path(&dir))
            .await
    } else {
        node
    };
    Ok(Arc::new(node))
}

/// Creates the node's Node object showing what the kubelet's managers report; an
/// existing Node of that name is taken over.
async fn register(client: &Client, spec: &NodeSpec, node: &SimNode) -> Result<(), SimulatorError> {
    let mut fake = spec.fake_node();
    let status = node.status();
    for (name, field) in [("cpu", &mut fake.cpu), ("memory", &mut fake.memory)] {
        if let Some(q) = status.allocatable.get(name) {
            field.clone_from(q);
        }
    }
    match create_fake_node(client, &fake).await {
        Ok(_) => Ok(()),
        Err(tas_testcluster::Error::Kube(kube::Error::Api(status))) if status.code == 409 => {
            info!(node = %spec.name, "Node exists already; taking it over");
            Ok(())
        }
        Err(source) => Err(SimulatorError::CreateNode {
            node: spec.name.clone(),
            source,
        }),
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.stop_now();
    }
}
