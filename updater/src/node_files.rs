//! The node's files behind every publish: the NUMA topology and the PCIe roots of
//! each zone from sysfs, and the kubelet's config file.
//!
//! They are read afresh at every publish, so hot-added hugepages or CPUs and an edited
//! kubelet config show up without a restart, and they are read on tokio's blocking pool,
//! never on the agent's one async thread: a slow or hung filesystem then delays only
//! the publish waiting for it, not pod events, watches or `/healthz`.

use std::path::{Path, PathBuf};

use crate::kubelet_source::{Loaded, Problem, SourceConfig};
use crate::sysfs::{self, CpuLayoutRead, PcieRoots, SysfsError, Topology};

/// What the node's files say.
#[derive(Debug, Clone)]
pub struct NodeFiles {
    /// NUMA zones, CPUs, memory, hugepages and distances.
    pub topology: Topology,
    /// The PCIe root complexes of each zone (none when the host's PCI devices are not
    /// in view), with what looked odd.
    pub pcie_roots: PcieRoots,
    /// Threads per core and each zone's socket, as far as sysfs shows them, with what
    /// looked odd.
    pub cpu_layout: CpuLayoutRead,
    /// The kubelet's settings from its config file and drop-ins, or why they could not
    /// be read; `None` when they come from elsewhere (`/configz`).
    pub kubelet: Option<Result<Loaded, Problem>>,
}

/// Why the node's files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NodeFilesError {
    /// sysfs could not be read.
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    /// The read was cancelled because the runtime is shutting down.
    #[error("reading sysfs and the kubelet config was cancelled")]
    Cancelled,
}

impl NodeFiles {
    /// Reads sysfs under `sysfs_root` and, when `kubelet` is given, the kubelet's
    /// configuration files, on the blocking pool; log lines of the read belong to the
    /// caller's span.
    pub async fn read(
        sysfs_root: &Path,
        kubelet: Option<&SourceConfig>,
    ) -> Result<Self, NodeFilesError> {
        let sysfs_root: PathBuf = sysfs_root.to_owned();
        let kubelet = kubelet.cloned();
        let span = tracing::Span::current();
        let read = tokio::task::spawn_blocking(move || {
            span.in_scope(|| Self::read_blocking(&sysfs_root, kubelet.as_ref()))
        });
        match read.await {
            Ok(files) => files,
            // A panic in the read is a bug: it surfaces as if the read had run here.
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(_) => Err(NodeFilesError::Cancelled),
            },
        }
    }

    /// The same read on the calling thread, which it blocks.
    pub fn read_blocking(
        sysfs_root: &Path,
        kubelet: Option<&SourceConfig>,
    ) -> Result<Self, NodeFilesError> {
        let topology = sysfs::discover(sysfs_root)?;
        let online = topology.zones.iter().map(|z| z.id).collect();
        let pcie_roots = sysfs::read_pcie_roots(sysfs_root, &online);
        let cpu_layout = sysfs::read_cpu_layout(sysfs_root, &topology);
        let kubelet = kubelet.map(SourceConfig::read_files);
        Ok(Self {
            topology,
            pcie_roots,
            cpu_layout,
            kubelet,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use tas_api::nrt::TopologyManagerPolicy;
    use tempfile::TempDir;

    use super::*;

    /// A node directory: a one-zone sysfs tree under `sys/`, the kubelet config at
    /// `config.yaml` (not written).
    fn node_dir() -> TempDir {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/devices/system/node");
        std::fs::create_dir_all(node.join("node0")).unwrap();
        std::fs::write(node.join("online"), "0\n").unwrap();
        std::fs::write(node.join("node0/cpulist"), "0-3\n").unwrap();
        std::fs::write(node.join("node0/distance"), "10\n").unwrap();
        std::fs::write(
            node.join("node0/meminfo"),
            "Node 0 MemTotal:       4194304 kB\n",
        )
        .unwrap();
        dir
    }

    fn config_with_policy(policy: &str) -> String {
        format!("kind: KubeletConfiguration\ntopologyManagerPolicy: {policy}\n")
    }

    fn source(dir: &TempDir) -> SourceConfig {
        SourceConfig {
            file: dir.path().join("config.yaml"),
            ..SourceConfig::default()
        }
    }

    async fn read(dir: &TempDir) -> Result<NodeFiles, NodeFilesError> {
        NodeFiles::read(&dir.path().join("sys"), Some(&source(dir))).await
    }

    fn policy(files: &NodeFiles) -> TopologyManagerPolicy {
        let loaded = files.kubelet.clone().unwrap().expect("settings read");
        loaded.config.topology_manager_policy
    }

    #[tokio::test]
    async fn an_edited_kubelet_config_is_read_at_the_next_publish() {
        let dir = node_dir();
        let files = read(&dir).await.unwrap();
        assert_eq!(files.topology.zones.len(), 1);
        let missing = files.kubelet.unwrap().unwrap_err();
        assert!(missing.message.contains("not found"), "no file: a problem");

        let config = dir.path().join("config.yaml");
        std::fs::write(&config, config_with_policy("single-numa-node")).unwrap();
        let files = read(&dir).await.unwrap();
        assert_eq!(policy(&files), TopologyManagerPolicy::SingleNumaNode);

        std::fs::write(&config, config_with_policy("restricted")).unwrap();
        let files = read(&dir).await.unwrap();
        assert_eq!(policy(&files), TopologyManagerPolicy::Restricted);
    }

    #[tokio::test]
    async fn a_malformed_kubelet_config_or_sysfs_tree_is_an_error() {
        let dir = node_dir();
        std::fs::write(dir.path().join("config.yaml"), "topologyManagerPolicy: [").unwrap();
        let files = read(&dir).await.unwrap();
        assert!(matches!(files.kubelet, Some(Err(_))));
        std::fs::remove_dir_all(dir.path().join("sys")).unwrap();
        assert!(matches!(read(&dir).await, Err(NodeFilesError::Sysfs(_))));
    }

    /// The kubelet config is a FIFO: reading it blocks until someone writes it, as on a
    /// hung filesystem. The agent's single async thread must keep running meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_hung_read_does_not_stop_the_async_thread() {
        let dir = node_dir();
        let config = dir.path().join("config.yaml");
        let made = std::process::Command::new("mkfifo")
            .arg(&config)
            .status()
            .unwrap();
        assert!(made.success());

        // Writes the config once the async side says it still runs, or after 10 s so
        // that a blocked thread fails the test instead of hanging it.
        let (alive_tx, alive_rx) = mpsc::channel::<()>();
        let fifo = config.clone();
        let writer = std::thread::spawn(move || {
            let signalled = alive_rx.recv_timeout(Duration::from_secs(10)).is_ok();
            std::fs::write(&fifo, config_with_policy("best-effort")).unwrap();
            signalled
        });

        let sysfs_root = dir.path().join("sys");
        let kubelet = SourceConfig {
            file: config,
            ..SourceConfig::default()
        };
        let reading =
            tokio::spawn(async move { NodeFiles::read(&sysfs_root, Some(&kubelet)).await });
        // Let the read start, then show this thread still serves timers and tasks.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !reading.is_finished(),
            "the read waits for the FIFO, unless it blocked this thread until the writer gave up"
        );
        let _ = alive_tx.send(());

        let files = reading.await.unwrap().unwrap();
        assert!(
            writer.join().unwrap(),
            "the async thread was blocked by the read"
        );
        assert_eq!(policy(&files), TopologyManagerPolicy::BestEffort);
    }
}
