//! A DRA driver on a real node: the tests' driver (`tas-dradriver`, built from
//! `testcluster/tools/dradriver` with the kubelet's own
//! `k8s.io/dynamic-resource-allocation/kubeletplugin`) and the containerd that injects
//! the CDI devices it prepares.
//!
//! The driver runs in the node's namespaces, beside the kubelet, and registers as a
//! DaemonSet driver does: its registration socket in the kubelet's
//! `/var/lib/kubelet/plugins_registry`, its DRA service in
//! `/var/lib/kubelet/plugins/<driver>/dra.sock`. It publishes one ResourceSlice for the
//! node: `gpus_per_numa_node` fake GPUs (`gpu-0`, `gpu-1`, ... in NUMA-node order) on
//! each NUMA node of the node's sysfs (the fake layout: node 0 = CPU 0, node 1 = CPU 1),
//! each with `resource.kubernetes.io/numaNode`. Preparing a claim writes a CDI spec to
//! [`RealNode::cdi_dir`] whose device sets `TAS_DRA_<DEVICE>=<device>` and
//! `TAS_DRA_<DEVICE>_NUMA_NODE=<n>` in the container (`TAS_DRA_GPU_1` for `gpu-1`).
//!
//! Debian's containerd 1.6 ignores the CDI devices the kubelet passes, so such a node
//! runs the tools' containerd 2 (`tas-containerd`, its shim and `tas-ctr`) instead.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{RealNode, RealNodeError, TAIL_LINES, host_err};
use crate::tail_lines;

/// The DRA driver a real node runs.
#[derive(Debug, Clone)]
pub struct DraOptions {
    /// The driver's name (a DeviceClass selects its devices by it), e.g. `gpu.tas.dev`.
    pub driver: String,
    /// Fake GPUs on each NUMA node.
    pub gpus_per_numa_node: u32,
}

/// The programs of a node with a DRA driver, among the test binaries.
pub(super) struct DraPrograms {
    pub driver: PathBuf,
    pub containerd: PathBuf,
    pub shim: PathBuf,
    pub ctr: PathBuf,
}

impl DraPrograms {
    /// Finds them in `tools_dir` (`TAS_TOOLS_ONLY=kubelet testcluster/tools/build.sh`
    /// builds them with the kubelet).
    pub fn locate(tools_dir: &Path) -> Result<Self, RealNodeError> {
        let find = |program: &'static str| {
            let path = tools_dir.join(program);
            if path.is_file() {
                Ok(path)
            } else {
                Err(RealNodeError::ToolMissing {
                    program,
                    dir: tools_dir.into(),
                })
            }
        };
        Ok(Self {
            driver: find("tas-dradriver")?,
            containerd: find("tas-containerd")?,
            shim: find("tas-containerd-shim-runc-v2")?,
            ctr: find("tas-ctr")?,
        })
    }
}

impl RealNode {
    /// Where the node's containerd reads CDI specs and its DRA driver writes them.
    pub fn cdi_dir(&self) -> PathBuf {
        self.dir.join("cdi")
    }

    /// The node's fake `/sys/devices/system` as its kubelet and containers see it:
    /// `node/node<N>/cpulist` says which CPUs NUMA node N has.
    pub fn system_dir(&self) -> PathBuf {
        self.dir.join("sys")
    }

    /// The DRA driver's log.
    pub fn dra_driver_log(&self) -> PathBuf {
        self.dir.join("dradriver.log")
    }

    /// Waits until the kubelet has registered the node's DRA driver (the driver writes
    /// `dradriver.ready` once the kubelet accepted it); `Err` with the driver's log if it
    /// exits first or takes longer than `timeout`.
    pub(super) async fn wait_for_dra_driver(
        &mut self,
        timeout: Duration,
    ) -> Result<(), RealNodeError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.check_alive("DRA driver")?;
            if self.dir.join("dradriver.ready").is_file() {
                return Ok(());
            }
            let reason = match std::fs::read_to_string(self.dir.join("dradriver.exited")) {
                Ok(status) => format!("the DRA driver exited with status {}", status.trim()),
                Err(_) if Instant::now() > deadline => {
                    format!("the kubelet did not register the DRA driver in {timeout:?}")
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            return Err(RealNodeError::Startup {
                component: "DRA driver",
                node: self.name.clone(),
                reason,
                log: self.dra_driver_log(),
                log_tail: tail_lines(&self.dra_driver_log(), TAIL_LINES),
            });
        }
    }

    /// Stops the DRA driver (SIGTERM), as deleting its DaemonSet pod would: it stops
    /// serving the kubelet and deletes its ResourceSlices. Returns its exit status.
    pub async fn stop_dra_driver(&mut self) -> Result<String, RealNodeError> {
        let exited = self.dir.join("dradriver.exited");
        let _ = std::fs::remove_file(&exited);
        self.signal_node_script("stop-dradriver", "stop the DRA driver")
            .await?;
        std::fs::read_to_string(&exited)
            .map(|s| s.trim().to_owned())
            .map_err(host_err(format!("reading {}", exited.display())))
    }

    /// Creates the CDI spec directory before containerd starts (it watches it).
    pub(super) fn create_cdi_dir(dir: &Path) -> Result<(), RealNodeError> {
        let cdi = dir.join("cdi");
        std::fs::create_dir_all(&cdi).map_err(host_err(format!("creating {}", cdi.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_named_and_skips() {
        let e = DraPrograms::locate(Path::new("/nonexistent"))
            .err()
            .expect("nothing is there");
        assert!(e.is_missing_prerequisite());
        let text = e.to_string();
        assert!(
            text.starts_with("tas-dradriver is not in /nonexistent")
                && text.contains("testcluster/tools/build.sh"),
            "{text}"
        );
    }
}
