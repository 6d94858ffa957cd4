//! The CPU manager's shared pool, as the agent's own container sees it.
//!
//! Under the `static` CPU manager every container without exclusive CPUs runs on the
//! shared pool (the CPU manager's default set), the agent's own container included: the
//! `Cpus_allowed_list` of its `/proc/self/status` is that pool. An allocatable CPU that
//! is neither in the pool nor exclusive to a container the podresources `List` reports
//! is kept for a regular init container, which `List` never reports
//! ([`crate::accounting`] counts it, [`tas_api::nrt::init_cpus`] publishes it).
//!
//! The kubelet rewrites the cpusets of running shared containers only in its reconcile
//! loop (`cpuManagerReconcilePeriod`, 10 s by default): right after a pod is admitted
//! or removed the pool the agent sees is stale. [`Freshness`] trusts it only once the
//! `List` answer has stayed the same for longer than that period, and the accounting
//! refuses a pool holding a CPU `List` reports as exclusive (stale, or the agent's
//! container is not on the shared pool at all, e.g. a Guaranteed agent).

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::podresources::v1;
use crate::sysfs::{CpuListError, parse_cpulist};

/// Where the agent reads its own cpuset by default.
pub const DEFAULT_STATUS_PATH: &str = "/proc/self/status";

/// How long after the kubelet's reconcile period the pool is trusted: the loop's own
/// run time and the container runtime's update.
pub const MARGIN: Duration = Duration::from_secs(2);

/// Why the pool could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The status file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The status file has no `Cpus_allowed_list` line.
    #[error("{path} has no Cpus_allowed_list line")]
    Missing {
        /// The file.
        path: String,
    },
    /// The line is not a CPU list.
    #[error("{path}: Cpus_allowed_list: {source}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong with it.
        source: CpuListError,
    },
}

/// The CPUs of the `Cpus_allowed_list` line of a `/proc/<pid>/status` text; `None`
/// when there is no such line.
pub fn parse_status(text: &str) -> Option<Result<BTreeSet<u32>, CpuListError>> {
    text.lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(parse_cpulist)
}

/// Reads the pool from the status file at `path` (bounded like sysfs files).
pub fn read(path: &Path) -> Result<BTreeSet<u32>, PoolError> {
    let name = || path.display().to_string();
    let text = crate::bounded::read_file(path, crate::bounded::SYSFS_LIMIT).map_err(|source| {
        PoolError::Read {
            path: name(),
            source,
        }
    })?;
    match parse_status(&text) {
        None => Err(PoolError::Missing { path: name() }),
        Some(result) => result.map_err(|source| PoolError::Parse {
            path: name(),
            source,
        }),
    }
}

/// Whether the pool can be trusted for the pods `List` reports: they have not
/// changed for longer than the kubelet's reconcile period.
#[derive(Debug, Clone, Default)]
pub struct Freshness {
    /// A digest of the latest `List` answer and when it was first seen.
    seen: Option<(u64, Instant)>,
}

impl Freshness {
    /// Records `pods` as `List` answered them at `now`; returns when the pool reflects
    /// them (at or before `now`: trusted now), given the kubelet's `reconcile` period.
    pub fn observe(
        &mut self,
        pods: &[v1::PodResources],
        now: Instant,
        reconcile: Duration,
    ) -> Instant {
        let digest = digest(pods);
        let since = match self.seen {
            Some((seen, since)) if seen == digest => since,
            _ => {
                self.seen = Some((digest, now));
                now
            }
        };
        since + reconcile + MARGIN
    }
}

/// A digest of what `List` says about exclusive CPUs, independent of its order.
fn digest(pods: &[v1::PodResources]) -> u64 {
    let mut entries: Vec<(&str, &str, &str, Vec<i64>)> = pods
        .iter()
        .flat_map(|p| {
            p.containers.iter().map(move |c| {
                let mut cpus = c.cpu_ids.clone();
                cpus.sort_unstable();
                (p.namespace.as_str(), p.name.as_str(), c.name.as_str(), cpus)
            })
        })
        .collect();
    entries.sort();
    let mut hasher = DefaultHasher::new();
    entries.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, cpus: &[i64]) -> v1::PodResources {
        v1::PodResources {
            name: name.into(),
            namespace: "default".into(),
            containers: vec![v1::ContainerResources {
                name: "c".into(),
                cpu_ids: cpus.to_vec(),
                ..Default::default()
            }],
        }
    }

    #[test]
    fn the_allowed_list_is_read_from_a_status_text() {
        let text = "Name:\ttas-updater\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8\nMems_allowed_list:\t0\n";
        assert_eq!(
            parse_status(text).unwrap().unwrap(),
            BTreeSet::from([0, 1, 2, 3, 8])
        );
        assert!(parse_status("Name:\tx\n").is_none());
        assert!(parse_status("Cpus_allowed_list:\tzero\n").unwrap().is_err());
    }

    #[test]
    fn a_missing_or_broken_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status");
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("status"), "{error}");
        std::fs::write(&path, "Name:\tx\n").unwrap();
        assert!(matches!(read(&path), Err(PoolError::Missing { .. })));
        std::fs::write(&path, "Cpus_allowed_list:\t3-1\n").unwrap();
        assert!(matches!(read(&path), Err(PoolError::Parse { .. })));
        std::fs::write(&path, "Cpus_allowed_list:\t1,3\n").unwrap();
        assert_eq!(read(&path).unwrap(), BTreeSet::from([1, 3]));
    }

    #[test]
    fn the_pool_is_trusted_a_reconcile_period_after_the_pods_last_changed() {
        let period = Duration::from_secs(10);
        let t0 = Instant::now();
        let mut fresh = Freshness::default();
        let a = [pod("a", &[1, 2])];
        assert_eq!(fresh.observe(&a, t0, period), t0 + period + MARGIN);
        // The same answer, in another order of CPUs: still counted from t0.
        let same = [pod("a", &[2, 1])];
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(fresh.observe(&same, t1, period), t0 + period + MARGIN);
        // A change restarts the wait.
        let b = [pod("a", &[1, 2]), pod("b", &[3])];
        let t2 = t0 + Duration::from_secs(20);
        assert_eq!(fresh.observe(&b, t2, period), t2 + period + MARGIN);
    }
}
