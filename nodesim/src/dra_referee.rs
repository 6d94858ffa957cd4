//! A client for the DRA referee: kube-scheduler's own structured-parameters allocator
//! (`nodesim/dra-referee`, Go) run as one child process that answers any number of cases.
//!
//! A [`Case`] (a node, the cluster's ResourceSlices and DeviceClasses, the claims of one
//! pod and the claims already allocated) goes to the child's stdin as one JSON line with
//! a fresh id; the child answers with one line carrying that id, which becomes a
//! [`Verdict`]. Requests are answered in order, one at a time, so the client is driven
//! through `&mut self`. The child exits when its stdin closes and is killed when the
//! [`DraReferee`] is dropped, so it cannot outlive the process that started it.
//!
//! The binary is found through [`BIN_ENV`]; `nodesim/dra-referee/build.sh` builds it and
//! prints its path last (the Makefile sets the variable that way).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde::{Deserialize, Serialize};

/// The environment variable naming the DRA referee binary.
pub const BIN_ENV: &str = "TAS_DRA_REFEREE_BIN";

const HOW_TO_BUILD: &str = "build it with nodesim/dra-referee/build.sh or set TAS_DRA_REFEREE_BIN";

/// What can go wrong talking to the DRA referee. A refusal by the allocator is not an
/// error but a [`Verdict`].
#[derive(Debug, thiserror::Error)]
pub enum DraRefereeError {
    /// [`BIN_ENV`] is not set.
    #[error("{BIN_ENV} is not set: {HOW_TO_BUILD}")]
    NotConfigured,
    /// [`BIN_ENV`] names no file.
    #[error("the DRA referee binary {0} does not exist: {HOW_TO_BUILD}")]
    Missing(PathBuf),
    /// The process could not be started.
    #[error("starting the DRA referee {path}: {source}")]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Writing the request or reading the answer failed, or the process is gone.
    #[error("the DRA referee process is gone ({0})")]
    Gone(String),
    /// The case could not be encoded as JSON.
    #[error("encoding a DRA referee request: {0}")]
    Encode(serde_json::Error),
    /// An answer that does not have the documented shape, or is not the request's.
    #[error("unexpected DRA referee answer {line:?}: {reason}")]
    Answer {
        /// The line read.
        line: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One question for the allocator: can `claims` be allocated together on `node`?
#[derive(Debug, Clone, Default, Serialize)]
pub struct Case {
    /// The node to allocate for; its name and labels select the slices local to it.
    pub node: Node,
    /// Every ResourceSlice of the cluster.
    pub slices: Vec<ResourceSlice>,
    /// Every DeviceClass.
    pub classes: Vec<DeviceClass>,
    /// The claims to allocate together (as for one pod), unallocated.
    pub claims: Vec<ResourceClaim>,
    /// Claims already allocated, whose devices are in use.
    pub allocated: Vec<ResourceClaim>,
}

/// The allocator's answer to a [`Case`].
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// One allocation per claim, in the order of [`Case::claims`].
    Allocated(Vec<AllocationResult>),
    /// No allocation exists (kube-scheduler: the node is unschedulable for the pod).
    Unschedulable,
    /// The allocator failed, with its message: a CEL runtime error, an invalid pool,
    /// the time limit, or a request the referee refused (`bad request: ...`).
    Failed(String),
}

#[derive(Serialize)]
struct Request<'a> {
    id: u64,
    #[serde(flatten)]
    case: &'a Case,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    id: Option<u64>,
    ok: bool,
    #[serde(default)]
    allocations: Option<Vec<AllocationResult>>,
    #[serde(default)]
    unschedulable: bool,
    #[serde(default)]
    error: String,
}

/// A running DRA referee process.
#[derive(Debug)]
pub struct DraReferee {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl DraReferee {
    /// The binary named by [`BIN_ENV`].
    pub fn binary() -> Result<PathBuf, DraRefereeError> {
        let path = std::env::var_os(BIN_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .ok_or(DraRefereeError::NotConfigured)?;
        if path.is_file() {
            Ok(path)
        } else {
            Err(DraRefereeError::Missing(path))
        }
    }

    /// Starts the binary named by [`BIN_ENV`].
    pub fn start() -> Result<Self, DraRefereeError> {
        Self::spawn(&Self::binary()?, &[])
    }

    /// Starts `binary` with extra `args` (e.g. `--timeout 1s`). Its stderr is inherited
    /// so its logs show with the test's.
    pub fn spawn(binary: &Path, args: &[&str]) -> Result<Self, DraRefereeError> {
        let mut child = Command::new(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| DraRefereeError::Spawn {
                path: binary.to_owned(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(DraRefereeError::Gone("no stdio pipes".into()));
        };
        Ok(Self {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
            next_id: 1,
            line: String::new(),
        })
    }

    /// Asks the allocator about `case` and waits for its answer.
    pub fn allocate(&mut self, case: &Case) -> Result<Verdict, DraRefereeError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request =
            serde_json::to_vec(&Request { id, case }).map_err(DraRefereeError::Encode)?;
        request.push(b'\n');
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| DraRefereeError::Gone("stdin closed".into()))?;
        stdin
            .write_all(&request)
            .and_then(|()| stdin.flush())
            .map_err(|e| DraRefereeError::Gone(e.to_string()))?;

        self.line.clear();
        let read = self
            .stdout
            .read_line(&mut self.line)
            .map_err(|e| DraRefereeError::Gone(e.to_string()))?;
        if read == 0 {
            return Err(DraRefereeError::Gone("it exited before answering".into()));
        }
        let answer = |reason: String| DraRefereeError::Answer {
            line: self.line.trim_end().to_owned(),
            reason,
        };
        let response: Response =
            serde_json::from_str(&self.line).map_err(|e| answer(e.to_string()))?;
        if response.id != Some(id) {
            return Err(answer(format!("expected the answer to request {id}")));
        }
        Ok(match response {
            Response {
                ok: true,
                allocations,
                ..
            } => Verdict::Allocated(allocations.unwrap_or_default()),
            Response {
                unschedulable: true,
                ..
            } => Verdict::Unschedulable,
            Response { error, .. } => Verdict::Failed(error),
        })
    }

    /// Closes stdin and waits for the referee to exit; an error unless it exits 0.
    pub fn shutdown(mut self) -> Result<(), DraRefereeError> {
        self.stdin.take();
        let status = self
            .child
            .wait()
            .map_err(|e| DraRefereeError::Gone(e.to_string()))?;
        if status.success() {
            Ok(())
        } else {
            Err(DraRefereeError::Gone(format!("exited with {status}")))
        }
    }
}

impl Drop for DraReferee {
    fn drop(&mut self) {
        // Nothing to flush in the child: stop it rather than wait for it.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
