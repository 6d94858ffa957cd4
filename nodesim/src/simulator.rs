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
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::info;

use crate::controller::Controller;
use crate::node::SimNode;
use crate::referee::convert::with_cpu_reservation;
use crate::referee::{Referee, RefereeError};
use crate::scenario::Scenario;
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
    /// The controller did not list pods in time.
    #[error("the controller did not sync its pods within {0:?}")]
    NotSynced(Duration),
}

/// The running simulator. Dropping it stops the controller and the sockets.
#[derive(Debug)]
pub struct Simulator {
    work_dir: PathBuf,
    nodes: BTreeMap<String, Arc<SimNode>>,
    referee: Arc<Referee>,
    stop: Option<oneshot::Sender<()>>,
    controller: Option<JoinHandle<()>>,
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
            let dir = work_dir.join(&spec.name);
            let machine = with_cpu_reservation(&spec.machine, &spec.settings);
            write_node_files(&dir, &machine, &spec.settings).map_err(|source| {
                SimulatorError::Files {
                    node: spec.name.clone(),
                    dir: dir.clone(),
                    source,
                }
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
            nodes.insert(spec.name.clone(), Arc::new(node));
        }
        for spec in scenario.nodes() {
            let mut fake = spec.fake_node();
            // The Node shows what the kubelet's managers report.
            if let Some(status) = nodes.get(&spec.name).map(|n| n.status()) {
                for (name, field) in [("cpu", &mut fake.cpu), ("memory", &mut fake.memory)] {
                    if let Some(q) = status.allocatable.get(name) {
                        field.clone_from(q);
                    }
                }
            }
            match create_fake_node(&client, &fake).await {
                Ok(_) => {}
                Err(tas_testcluster::Error::Kube(kube::Error::Api(status)))
                    if status.code == 409 =>
                {
                    info!(node = %spec.name, "Node exists already; taking it over");
                }
                Err(source) => {
                    return Err(SimulatorError::CreateNode {
                        node: spec.name.clone(),
                        source,
                    });
                }
            }
        }

        let (stop, stopped) = oneshot::channel::<()>();
        let (synced_tx, synced) = oneshot::channel();
        let controller = Controller::new(client, nodes.values().cloned());
        let task = tokio::spawn(controller.run(synced_tx, async {
            let _ = stopped.await;
        }));
        let mut simulator = Self {
            work_dir: work_dir.to_path_buf(),
            nodes,
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

    /// The simulated nodes by name.
    pub fn nodes(&self) -> &BTreeMap<String, Arc<SimNode>> {
        &self.nodes
    }

    /// The simulated node `name`.
    pub fn node(&self, name: &str) -> Option<&Arc<SimNode>> {
        self.nodes.get(name)
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
        for name in self.nodes.keys() {
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

impl Drop for Simulator {
    fn drop(&mut self) {
        self.stop_now();
    }
}
