//! The node's NUMA topology, read from sysfs.
//!
//! [`discover`] reads, under a configurable root (the host's `/sys` as seen from the
//! agent's container, where the DaemonSet mounts only its `devices/system/node`), everything the NRT object describes that the kubelet does not:
//!
//! - `devices/system/node/online`: the online NUMA node ids, in list format. Ids may be
//!   sparse (`0,2`); one [`Zone`] is built per online node, sorted by id.
//! - per online node `N`, under `devices/system/node/node<N>/`:
//!   - `cpulist`: the node's CPUs (empty for a CPU-less node). Required.
//!   - `meminfo`: the line `Node N MemTotal: <amount> kB`. A missing file or line means
//!     a memory-less node (0 bytes), not an error: such nodes exist (CXL, HBM, some
//!     virtual machines) and crashing on them helps no one. The amount is `MemTotal` as
//!     the kernel reports it; memory reserved as hugepages is part of it.
//!   - `distance`: one row of the kernel's NUMA distance table. The kernel writes one
//!     entry per *online* node, in ascending id order, so entry `i` is the distance to
//!     the `i`-th online node: with `online` = `0,2`, `node0/distance` = `10 20` means
//!     0→0 costs 10 and 0→2 costs 20. A row whose length differs from the number of
//!     online nodes is an error (the mapping would attach costs to the wrong zones); a
//!     missing file leaves the zone without distances.
//!   - `hugepages/hugepages-<size>kB/nr_hugepages`: see [`hugepages`].
//!
//! Errors name the file (its full path, root included) and what was wrong with it.
//!
//! [`cpu_layout::read_cpu_layout`] reads, under the same root, the threads per core and
//! the socket of each zone (`devices/system/cpu/cpu<N>/topology/`), when mounted; it
//! never fails, odd files are warnings.
//!
//! [`pcie::read_pcie_roots`] reads, under the same root, which PCIe root complexes
//! each NUMA node holds (`devices/pci<domain>:<bus>/*/numa_node`), for DRA devices
//! that name their root; it never fails, odd files are warnings.

pub mod cpu_layout;
mod cpulist;
pub mod hugepages;
pub mod pcie;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::bounded::{self, SYSFS_LIMIT};

pub use cpu_layout::{CpuLayoutRead, read_cpu_layout};
pub use cpulist::{CpuListError, format_cpulist, parse_cpulist};
pub use hugepages::{hugepage_resource_name, parse_pool_bytes, parse_pool_dir};
pub use pcie::{PcieRoots, read_pcie_roots};

/// Where NUMA nodes live, relative to the sysfs root.
pub const NODE_DIR: &str = "devices/system/node";

/// The NUMA zones of a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// One zone per online NUMA node, sorted by id.
    pub zones: Vec<Zone>,
}

/// One NUMA node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Zone {
    /// The NUMA node id (`N` in `node<N>`).
    pub id: u32,
    /// Its logical CPUs; empty for a CPU-less node.
    pub cpus: BTreeSet<u32>,
    /// Its memory (`MemTotal`) in bytes; 0 for a memory-less node.
    pub memory_bytes: u64,
    /// Its hugepage pools: resource name (`hugepages-2Mi`) → total bytes.
    pub hugepages: BTreeMap<String, u64>,
    /// Distance to each online node (itself included): destination id → distance.
    pub distances: BTreeMap<u32, u32>,
}

impl Topology {
    /// The zone holding `cpu`, if any.
    pub fn zone_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.zones
            .iter()
            .find(|zone| zone.cpus.contains(&cpu))
            .map(|zone| zone.id)
    }

    /// The zone with NUMA id `id`, if it is online.
    pub fn zone(&self, id: u32) -> Option<&Zone> {
        self.zones.iter().find(|zone| zone.id == id)
    }
}

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    /// The list of online NUMA nodes does not exist: the sysfs root is wrong (not the
    /// host's `/sys`, or not mounted) or the kernel was built without NUMA support.
    #[error(
        "{} not found: is the sysfs root right (the host's /sys mounted into the container)?",
        path.display()
    )]
    NodeListMissing {
        /// The missing `online` file.
        path: PathBuf,
    },
    /// A file or directory exists (or must exist) but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A CPU or node list is not in list format.
    #[error("{}: {source}", path.display())]
    CpuList {
        /// The file.
        path: PathBuf,
        /// What is wrong with the list.
        source: CpuListError,
    },
    /// A file's content is not what the kernel writes there.
    #[error("{}: {reason}", path.display())]
    Malformed {
        /// The file (or directory, for a badly named hugepages directory).
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// Reads the NUMA topology under `sysfs_root` (the directory holding `devices/`).
pub fn discover(sysfs_root: &Path) -> Result<Topology, SysfsError> {
    let node_dir = sysfs_root.join(NODE_DIR);
    let online_path = node_dir.join("online");
    let Some(online_text) = read_optional(&online_path)? else {
        return Err(SysfsError::NodeListMissing { path: online_path });
    };
    let online = parse_online(&online_path, &online_text)?;
    let zones = online
        .iter()
        .map(|&id| read_zone(&node_dir.join(format!("node{id}")), id, &online))
        .collect::<Result<_, _>>()?;
    Ok(Topology { zones })
}

/// The text of one online node's files, as [`discover`] reads them; `None` for a file
/// that is absent.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeFiles<'a> {
    /// `cpulist` (required).
    pub cpulist: &'a str,
    /// `meminfo`.
    pub meminfo: Option<&'a str>,
    /// `distance`.
    pub distance: Option<&'a str>,
}

/// Parses the `online` file at `path`: the ids of the online NUMA nodes, at least one.
///
/// [`discover`] reads the files and calls this and [`parse_zone`]; they are public so
/// that what the kernel (or whatever is mounted in its place) writes can be checked
/// without a directory tree, as the fuzz targets do.
pub fn parse_online(path: &Path, text: &str) -> Result<BTreeSet<u32>, SysfsError> {
    let online = parse_list_file(path, text)?;
    if online.is_empty() {
        return Err(SysfsError::Malformed {
            path: path.to_owned(),
            reason: "no NUMA node is online".into(),
        });
    }
    Ok(online)
}

/// Parses the files of online node `id`, whose directory `dir` names them in errors;
/// `online` are the ids [`parse_online`] returned (the columns of `distance`). The zone
/// has no hugepage pools: those are directories ([`hugepages`]).
pub fn parse_zone(
    dir: &Path,
    id: u32,
    online: &BTreeSet<u32>,
    files: NodeFiles<'_>,
) -> Result<Zone, SysfsError> {
    let cpus = parse_list_file(&dir.join("cpulist"), files.cpulist)?;
    let memory_bytes = match files.meminfo {
        Some(text) => parse_mem_total(&dir.join("meminfo"), text)?,
        None => 0,
    };
    let distances = match files.distance {
        Some(text) => parse_distances(&dir.join("distance"), text, online)?,
        None => BTreeMap::new(),
    };
    Ok(Zone {
        id,
        cpus,
        memory_bytes,
        hugepages: BTreeMap::new(),
        distances,
    })
}

/// Reads one online node's directory.
fn read_zone(dir: &Path, id: u32, online: &BTreeSet<u32>) -> Result<Zone, SysfsError> {
    let cpulist = read_file(&dir.join("cpulist"))?;
    let meminfo = read_optional(&dir.join("meminfo"))?;
    let distance = read_optional(&dir.join("distance"))?;
    let files = NodeFiles {
        cpulist: &cpulist,
        meminfo: meminfo.as_deref(),
        distance: distance.as_deref(),
    };
    let zone = parse_zone(dir, id, online, files)?;
    Ok(Zone {
        hugepages: hugepages::read_hugepages(dir)?,
        ..zone
    })
}

/// `MemTotal` of a node's `meminfo` in bytes; 0 when the line is absent.
fn parse_mem_total(path: &Path, text: &str) -> Result<u64, SysfsError> {
    let malformed = |reason: String| SysfsError::Malformed {
        path: path.to_owned(),
        reason,
    };
    for line in text.lines() {
        // `Node 0 MemTotal:       32768 kB`
        let mut fields = line.split_whitespace().skip_while(|&f| f != "MemTotal:");
        if fields.next().is_none() {
            continue;
        }
        let amount = fields
            .next()
            .filter(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u64>().ok())
            .ok_or_else(|| malformed(format!("expected an amount in {line:?}")))?;
        return match fields.next() {
            Some("kB") => amount
                .checked_mul(1024)
                .ok_or_else(|| malformed(format!("{amount} kB overflows a byte count"))),
            None => Ok(amount),
            Some(unit) => Err(malformed(format!(
                "unknown unit {unit:?} in {line:?}; expected kB"
            ))),
        };
    }
    Ok(0)
}

/// A `distance` row, keyed by the online node each entry belongs to.
fn parse_distances(
    path: &Path,
    text: &str,
    online: &BTreeSet<u32>,
) -> Result<BTreeMap<u32, u32>, SysfsError> {
    let malformed = |reason: String| SysfsError::Malformed {
        path: path.to_owned(),
        reason,
    };
    let row = text
        .split_whitespace()
        .map(|entry| {
            entry
                .parse::<u32>()
                .map_err(|_| malformed(format!("{entry:?} is not a distance")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if row.len() != online.len() {
        return Err(malformed(format!(
            "{} distances for {} online nodes; expected one per online node",
            row.len(),
            online.len()
        )));
    }
    Ok(online.iter().copied().zip(row).collect())
}

/// Parses a list-format file, naming the file in the error.
fn parse_list_file(path: &Path, text: &str) -> Result<BTreeSet<u32>, SysfsError> {
    parse_cpulist(text).map_err(|source| SysfsError::CpuList {
        path: path.to_owned(),
        source,
    })
}

/// Reads a file that must exist (refused past [`SYSFS_LIMIT`]).
fn read_file(path: &Path) -> Result<String, SysfsError> {
    bounded::read_file(path, SYSFS_LIMIT).map_err(|source| SysfsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Reads a file that may be absent (refused past [`SYSFS_LIMIT`]).
fn read_optional(path: &Path) -> Result<Option<String>, SysfsError> {
    match bounded::read_file(path, SYSFS_LIMIT) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SysfsError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}
