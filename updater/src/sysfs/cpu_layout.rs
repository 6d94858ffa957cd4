//! The node's CPU layout from sysfs: threads per core and the socket of each NUMA zone
//! ([`tas_api::nrt::cpu_layout`]).
//!
//! For every CPU of the zones [`super::discover`] found, under the same root:
//! `devices/system/cpu/cpu<N>/topology/thread_siblings_list` (the CPUs of its core,
//! itself included, in list format) and `physical_package_id` (its socket). The layout
//! is an addition, never a reason not to publish: with no `devices/system/cpu` (the
//! DaemonSet the operator builds mounts only the NUMA nodes), a file that cannot be read
//! or parsed, cores of different sizes or a zone spread over sockets, the part it
//! would have told is left out, and the reason is returned for a warning.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tas_api::nrt::cpu_layout::CpuLayout;

use super::{Topology, parse_cpulist};
use crate::bounded::{self, SYSFS_LIMIT};

/// Where the CPUs live, relative to the sysfs root.
pub const CPU_DIR: &str = "devices/system/cpu";

/// The layout read, and why a part of it is missing (empty when nothing is, or when
/// the CPU directory is not there at all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuLayoutRead {
    /// What could be read.
    pub layout: CpuLayout,
    /// Why a part is missing, for a warning.
    pub warnings: Vec<String>,
}

/// Reads the layout of `topology`'s CPUs under `sysfs_root`.
pub fn read_cpu_layout(sysfs_root: &Path, topology: &Topology) -> CpuLayoutRead {
    let cpu_dir = sysfs_root.join(CPU_DIR);
    if !cpu_dir.is_dir() {
        return CpuLayoutRead::default();
    }
    let mut read = CpuLayoutRead::default();
    let mut threads: BTreeSet<usize> = BTreeSet::new();
    let mut threads_known = true;
    for zone in &topology.zones {
        let mut sockets: BTreeSet<u32> = BTreeSet::new();
        let mut sockets_known = !zone.cpus.is_empty();
        for &cpu in &zone.cpus {
            let dir = cpu_dir.join(format!("cpu{cpu}/topology"));
            match read_siblings(&dir.join("thread_siblings_list"), cpu) {
                Ok(n) => {
                    threads.insert(n);
                }
                Err(warning) => {
                    threads_known = false;
                    read.warnings.push(warning);
                }
            }
            match read_package(&dir.join("physical_package_id")) {
                Ok(socket) => {
                    sockets.insert(socket);
                }
                Err(warning) => {
                    sockets_known = false;
                    read.warnings.push(warning);
                }
            }
        }
        if let (true, 1, Some(&socket)) = (sockets_known, sockets.len(), sockets.first()) {
            read.layout.zone_sockets.insert(zone.id, socket);
        }
    }
    if threads_known && threads.len() == 1 {
        read.layout.threads_per_core = threads.first().and_then(|&n| u32::try_from(n).ok());
    } else if threads.len() > 1 {
        read.warnings
            .push(format!("cores with different thread counts: {threads:?}"));
    }
    read
}

/// How many CPUs the core of `cpu` has, itself included.
fn read_siblings(path: &Path, cpu: u32) -> Result<usize, String> {
    let text = bounded::read_file(path, SYSFS_LIMIT)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let siblings = parse_cpulist(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if !siblings.contains(&cpu) {
        return Err(format!(
            "{}: does not list CPU {cpu} itself",
            path.display()
        ));
    }
    Ok(siblings.len())
}

/// The socket a CPU's `physical_package_id` names.
fn read_package(path: &Path) -> Result<u32, String> {
    let text = bounded::read_file(path, SYSFS_LIMIT)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.trim()
        .parse()
        .map_err(|_| format!("{}: {:?} is not a socket id", path.display(), text.trim()))
}

/// The layout of a machine described core by core: per core, its zone's NUMA id, its
/// socket and how many CPUs it has. For writers that know the machine without a sysfs
/// tree (simulated nodes).
pub fn layout_of_cores(cores: impl IntoIterator<Item = (u32, u32, usize)>) -> CpuLayout {
    let mut threads: BTreeSet<usize> = BTreeSet::new();
    let mut zone_sockets: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    for (zone, socket, cpus) in cores {
        threads.insert(cpus);
        zone_sockets.entry(zone).or_default().insert(socket);
    }
    CpuLayout {
        threads_per_core: match (threads.len(), threads.first()) {
            (1, Some(&n)) => u32::try_from(n).ok(),
            _ => None,
        },
        zone_sockets: zone_sockets
            .into_iter()
            .filter_map(|(zone, s)| match (s.len(), s.first()) {
                (1, Some(&socket)) => Some((zone, socket)),
                _ => None,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use tempfile::TempDir;

    use super::*;
    use crate::sysfs::Zone;

    /// Zones 0 (CPUs 0-3) and 1 (CPUs 4-7).
    fn topology() -> Topology {
        let zone = |id: u32, cpus: std::ops::Range<u32>| Zone {
            id,
            cpus: cpus.collect(),
            ..Zone::default()
        };
        Topology {
            zones: vec![zone(0, 0..4), zone(1, 4..8)],
        }
    }

    /// Writes CPU `cpu`'s topology files (`None`: leaves the file as it is).
    fn write(root: &Path, cpu: u32, siblings: Option<&str>, package: Option<&str>) {
        let dir = root.join(format!("{CPU_DIR}/cpu{cpu}/topology"));
        fs::create_dir_all(&dir).unwrap();
        if let Some(s) = siblings {
            fs::write(dir.join("thread_siblings_list"), format!("{s}\n")).unwrap();
        }
        if let Some(p) = package {
            fs::write(dir.join("physical_package_id"), format!("{p}\n")).unwrap();
        }
    }

    /// Two threads per core (siblings `c`, `c + 1`), zone 0 on socket 0, zone 1 on 1.
    fn smt_two_sockets(root: &Path) {
        for cpu in 0..8 {
            let first = cpu & !1;
            let package = (cpu / 4).to_string();
            write(
                root,
                cpu,
                Some(&format!("{first}-{}", first + 1)),
                Some(&package),
            );
        }
    }

    #[test]
    fn reads_threads_per_core_and_each_zones_socket() {
        let dir = TempDir::new().unwrap();
        smt_two_sockets(dir.path());
        let read = read_cpu_layout(dir.path(), &topology());
        assert_eq!(read.warnings, Vec::<String>::new());
        assert_eq!(read.layout.threads_per_core, Some(2));
        assert_eq!(read.layout.zone_sockets, BTreeMap::from([(0, 0), (1, 1)]));
    }

    #[test]
    fn without_the_cpu_directory_nothing_is_known_and_nothing_is_odd() {
        let dir = TempDir::new().unwrap();
        assert_eq!(
            read_cpu_layout(dir.path(), &topology()),
            CpuLayoutRead::default()
        );
    }

    #[test]
    fn odd_files_leave_out_what_they_would_have_told() {
        // Cores of different sizes: no thread count; the sockets still stand.
        let dir = TempDir::new().unwrap();
        smt_two_sockets(dir.path());
        write(dir.path(), 7, Some("7"), Some("1"));
        let read = read_cpu_layout(dir.path(), &topology());
        assert_eq!(read.layout.threads_per_core, None);
        assert_eq!(read.layout.zone_sockets.len(), 2);
        assert!(
            read.warnings[0].contains("different thread counts"),
            "{read:?}"
        );

        // A zone over two sockets, a missing file, a list without the CPU itself, a
        // package that is not a number.
        let dir = TempDir::new().unwrap();
        smt_two_sockets(dir.path());
        write(dir.path(), 3, Some("2-3"), Some("1"));
        write(dir.path(), 5, None, Some("x"));
        fs::remove_file(
            dir.path()
                .join(format!("{CPU_DIR}/cpu5/topology/thread_siblings_list")),
        )
        .unwrap();
        let read = read_cpu_layout(dir.path(), &topology());
        assert_eq!(read.layout.threads_per_core, None);
        assert_eq!(read.layout.zone_sockets, BTreeMap::new());
        let all = read.warnings.join("\n");
        assert!(all.contains("cpu5/topology/thread_siblings_list"), "{all}");
        assert!(all.contains("\"x\" is not a socket id"), "{all}");

        let dir = TempDir::new().unwrap();
        smt_two_sockets(dir.path());
        write(dir.path(), 0, Some("1-2"), Some("0"));
        let read = read_cpu_layout(dir.path(), &topology());
        assert_eq!(read.layout.threads_per_core, None);
        assert!(read.warnings[0].contains("does not list CPU 0"), "{read:?}");
    }

    #[test]
    fn a_machine_told_core_by_core_has_the_same_layout() {
        let cores = [(0, 0, 2), (0, 0, 2), (1, 1, 2), (2, 1, 2), (2, 0, 2)];
        let layout = layout_of_cores(cores);
        assert_eq!(layout.threads_per_core, Some(2));
        assert_eq!(layout.zone_sockets, BTreeMap::from([(0, 0), (1, 1)]));
        assert_eq!(
            layout_of_cores([(0, 0, 1), (0, 0, 2)]).threads_per_core,
            None
        );
    }
}
