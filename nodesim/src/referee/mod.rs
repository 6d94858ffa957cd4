//! A client for the referee: the kubelet's own admission code (`nodesim/referee`, Go) run
//! as one child process that serves every simulated node.
//!
//! Requests go to its stdin as JSON lines, each with a fresh numeric id; one reader task
//! reads its stdout and hands every response to the waiter registered under that id, so
//! requests for different nodes may be answered out of order. The child is killed when
//! the [`Referee`] is dropped (`kill_on_drop`), and it exits on its own when its stdin
//! closes, so it cannot outlive the process that started it.
//!
//! The binary is found through [`BIN_ENV`]; `nodesim/referee/build.sh` builds it and
//! prints its path last (the Makefile sets the variable that way).

pub mod convert;
mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use types::{
    AddNode, Admission, Affinity, ContainerAllocation, Core, Device, DeviceAllocation,
    DevicePlugins, DeviceState, Machine, MemoryBlock, MemoryState, NodeState, NodeStatus, Zone,
    ZoneState,
};

/// The environment variable naming the referee binary.
pub const BIN_ENV: &str = "TAS_REFEREE_BIN";

const HOW_TO_BUILD: &str = "build it with nodesim/referee/build.sh or set TAS_REFEREE_BIN";

/// What can go wrong talking to the referee.
#[derive(Debug, thiserror::Error)]
pub enum RefereeError {
    /// [`BIN_ENV`] is not set.
    #[error("{BIN_ENV} is not set: {HOW_TO_BUILD}")]
    NotConfigured,
    /// [`BIN_ENV`] names no file.
    #[error("the referee binary {0} does not exist: {HOW_TO_BUILD}")]
    Missing(PathBuf),
    /// The process could not be started.
    #[error("starting the referee {path}: {source}")]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Writing a request failed or the process is gone.
    #[error("the referee process is gone ({0})")]
    Gone(String),
    /// The referee refused the request itself (not a kubelet refusal).
    #[error("referee {op} on node {node:?}: {message}")]
    Request {
        /// The operation.
        op: &'static str,
        /// The node.
        node: String,
        /// The referee's error.
        message: String,
    },
    /// A result that does not have the documented shape.
    #[error("referee {op}: unexpected result: {source}")]
    Decode {
        /// The operation.
        op: &'static str,
        /// Why.
        source: serde_json::Error,
    },
}

type Waiters = Arc<Mutex<Option<HashMap<u64, oneshot::Sender<Response>>>>>;

#[derive(Debug, Deserialize)]
struct Response {
    id: Value,
    ok: bool,
    #[serde(default)]
    error: String,
    #[serde(default)]
    result: Value,
}

/// A running referee process. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Referee {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    waiters: Waiters,
    next_id: AtomicU64,
    child: Mutex<Option<Child>>,
    reader: JoinHandle<()>,
}

impl Referee {
    /// The binary named by [`BIN_ENV`].
    pub fn binary() -> Result<PathBuf, RefereeError> {
        let path = std::env::var_os(BIN_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .ok_or(RefereeError::NotConfigured)?;
        if path.is_file() {
            Ok(path)
        } else {
            Err(RefereeError::Missing(path))
        }
    }

    /// Starts the binary named by [`BIN_ENV`].
    pub fn start() -> Result<Self, RefereeError> {
        Self::spawn(&Self::binary()?, &[])
    }

    /// Starts `binary` with extra `args` (e.g. `--feature-gates`). Its stderr is
    /// inherited so its logs show with the test's.
    pub fn spawn(binary: &Path, args: &[&str]) -> Result<Self, RefereeError> {
        let mut child = Command::new(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| RefereeError::Spawn {
                path: binary.to_owned(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(RefereeError::Gone("no stdio pipes".into()));
        };
        let waiters: Waiters = Arc::new(Mutex::new(Some(HashMap::new())));
        let reader = tokio::spawn(read_responses(stdout, waiters.clone()));
        Ok(Self {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            waiters,
            next_id: AtomicU64::new(1),
            child: Mutex::new(Some(child)),
            reader,
        })
    }

    /// The process id of the referee, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(Child::id)
    }

    /// Adds a node; returns what its kubelet would publish in the Node status.
    pub async fn add_node(&self, request: &AddNode) -> Result<NodeStatus, RefereeError> {
        let mut fields = serde_json::to_value(request).map_err(|source| RefereeError::Decode {
            op: "addNode",
            source,
        })?;
        if let Some(map) = fields.as_object_mut() {
            map.remove("node");
        }
        self.call("addNode", &request.node, fields).await
    }

    /// Runs `pod` through the node's admit handlers; a refusal is an `Ok` result.
    pub async fn admit(&self, node: &str, pod: &Pod) -> Result<Admission, RefereeError> {
        self.call("admit", node, json!({ "pod": pod })).await
    }

    /// Removes a pod and frees what it held; false when the node has no such pod.
    pub async fn remove(&self, node: &str, pod_uid: &str) -> Result<bool, RefereeError> {
        #[derive(Deserialize)]
        struct Removed {
            removed: bool,
        }
        let r: Removed = self
            .call("remove", node, json!({ "podUID": pod_uid }))
            .await?;
        Ok(r.removed)
    }

    /// The managers' true state of the node.
    pub async fn state(&self, node: &str) -> Result<NodeState, RefereeError> {
        self.call("state", node, json!({})).await
    }

    /// Stops the node's servers and deletes its state.
    pub async fn remove_node(&self, node: &str) -> Result<(), RefereeError> {
        let _: Value = self.call("removeNode", node, json!({})).await?;
        Ok(())
    }

    /// How many nodes the referee serves.
    pub async fn ping(&self) -> Result<usize, RefereeError> {
        #[derive(Deserialize)]
        struct Pong {
            nodes: usize,
        }
        let p: Pong = self.call("ping", "", json!({})).await?;
        Ok(p.nodes)
    }

    /// Closes stdin and waits for the referee to answer what is pending and exit.
    pub async fn shutdown(self) -> Result<(), RefereeError> {
        self.stdin.lock().await.take();
        let child = self
            .child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut child) = child else {
            return Ok(());
        };
        let status = child
            .wait()
            .await
            .map_err(|e| RefereeError::Gone(e.to_string()))?;
        if status.success() {
            Ok(())
        } else {
            Err(RefereeError::Gone(format!("exited with {status}")))
        }
    }

    async fn call<R: DeserializeOwned>(
        &self,
        op: &'static str,
        node: &str,
        fields: Value,
    ) -> Result<R, RefereeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut request = match fields {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        request.insert("id".into(), id.into());
        request.insert("op".into(), op.into());
        if !node.is_empty() {
            request.insert("node".into(), node.into());
        }
        let mut line =
            serde_json::to_vec(&request).map_err(|source| RefereeError::Decode { op, source })?;
        line.push(b'\n');

        let (tx, rx) = oneshot::channel();
        match self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            Some(waiters) => waiters.insert(id, tx),
            None => return Err(RefereeError::Gone("its output closed".into())),
        };
        let written = {
            let mut stdin = self.stdin.lock().await;
            match stdin.as_mut() {
                Some(stdin) => stdin.write_all(&line).await,
                None => Err(std::io::Error::other("stdin closed")),
            }
        };
        if let Err(e) = written {
            self.forget(id);
            return Err(RefereeError::Gone(e.to_string()));
        }
        let response = rx
            .await
            .map_err(|_| RefereeError::Gone("it exited before answering".into()))?;
        if !response.ok {
            return Err(RefereeError::Request {
                op,
                node: node.to_owned(),
                message: response.error,
            });
        }
        serde_json::from_value(response.result)
            .map_err(|source| RefereeError::Decode { op, source })
    }

    fn forget(&self, id: u64) {
        if let Some(waiters) = self
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            waiters.remove(&id);
        }
    }
}

impl Drop for Referee {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Routes every response line to the waiter of its id; at end of output, drops every
/// waiter (they see the process as gone) and refuses new ones.
async fn read_responses(stdout: ChildStdout, waiters: Waiters) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let response: Response = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, line, "referee: unreadable response line");
                continue;
            }
        };
        let Some(id) = response.id.as_u64() else {
            tracing::warn!(line, "referee: response without a numeric id");
            continue;
        };
        let waiter = waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .and_then(|w| w.remove(&id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(response);
        }
    }
    waiters
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
}

#[cfg(test)]
mod tests;
