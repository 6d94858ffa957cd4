//! The host files a node agent reads, written for a simulated node.
//!
//! Under a node's directory (`<work-dir>/<node>/`, standing for both `/sys` and
//! `/var/lib/kubelet`):
//!
//! - `sys/devices/system/node/{online,possible}`: the zone ids as a CPU list (`0-3`);
//! - `sys/devices/system/node/node<N>/cpulist`, `meminfo` (`Node N MemTotal: … kB`,
//!   hugepage pools included as the kernel counts them), `distance` (10 to itself, 20
//!   to every other zone) and `hugepages/hugepages-<size>kB/{nr,free}_hugepages` for
//!   2 MiB and 1 GiB pages;
//! - `sys/devices/system/cpu/cpu<N>/topology/{thread_siblings_list,physical_package_id}`:
//!   every CPU a core of its own on socket 0, as the node's referee kubelet sees the
//!   machine (`referee::convert`), for an agent that has the host's CPU directory in
//!   view (its CPU layout attributes);
//! - `config.yaml`: a `KubeletConfiguration` with the node's Topology Manager policy and
//!   scope, CPU and memory manager policies and reserved CPUs;
//! - `pod-resources/`: where the podresources socket (`kubelet.sock`) is served.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use crate::machine::{KubeletSettings, Machine};
use crate::scenario::HUGEPAGE_SIZES;

/// The sysfs root of a node directory.
pub fn sysfs_root(node_dir: &Path) -> PathBuf {
    node_dir.join("sys")
}

/// The kubelet config file of a node directory.
pub fn kubelet_config_path(node_dir: &Path) -> PathBuf {
    node_dir.join("config.yaml")
}

/// The `/proc/<pid>/status` every container the pod runner starts on a node sees as
/// its own (see [`crate::runner`]): its `Cpus_allowed_list` is the node's shared CPU
/// pool, as the kubelet sets the cpuset of a container without exclusive CPUs. Written
/// by [`crate::node::SimNode`] under the CPU manager `static` only.
pub fn shared_pool_status_path(node_dir: &Path) -> PathBuf {
    node_dir.join("shared-pool.status")
}

/// The podresources socket of a node directory.
pub fn socket_path(node_dir: &Path) -> PathBuf {
    node_dir.join("pod-resources").join("kubelet.sock")
}

/// Removes the `node<N>` directories of zones `machine` does not have (left by an
/// earlier machine of the same node name).
fn remove_other_zones(nodes: &Path, machine: &Machine) -> io::Result<()> {
    let ids: BTreeSet<u32> = machine.zones.iter().map(|z| z.id).collect();
    for entry in std::fs::read_dir(nodes)? {
        let entry = entry?;
        let name = entry.file_name();
        let zone = name
            .to_str()
            .and_then(|n| n.strip_prefix("node"))
            .and_then(|id| id.parse::<u32>().ok());
        if zone.is_some_and(|id| !ids.contains(&id)) {
            std::fs::remove_dir_all(entry.path())?;
        }
    }
    Ok(())
}

/// Writes the sysfs tree and kubelet config of a node into `node_dir`, and creates its
/// `pod-resources` directory.
pub fn write_node_files(
    node_dir: &Path,
    machine: &Machine,
    settings: &KubeletSettings,
) -> io::Result<()> {
    let nodes = sysfs_root(node_dir).join("devices/system/node");
    std::fs::create_dir_all(&nodes)?;
    let ids = format_cpulist(machine.zones.iter().map(|z| z.id));
    std::fs::write(nodes.join("online"), format!("{ids}\n"))?;
    std::fs::write(nodes.join("possible"), format!("{ids}\n"))?;
    remove_other_zones(&nodes, machine)?;
    for zone in &machine.zones {
        let dir = nodes.join(format!("node{}", zone.id));
        std::fs::create_dir_all(&dir)?;
        let cpus = format_cpulist(zone.cpus.iter().copied());
        std::fs::write(dir.join("cpulist"), format!("{cpus}\n"))?;
        let hugepage_bytes: u64 = zone.hugepages.values().sum();
        let total_kb = (zone.memory + hugepage_bytes) / 1024;
        let id = zone.id;
        let meminfo = format!(
            "Node {id} MemTotal:       {total_kb} kB\nNode {id} MemFree:        {total_kb} kB\nNode {id} MemUsed:        0 kB\n"
        );
        std::fs::write(dir.join("meminfo"), meminfo)?;
        let distances: Vec<&str> = machine
            .zones
            .iter()
            .map(|other| if other.id == zone.id { "10" } else { "20" })
            .collect();
        std::fs::write(dir.join("distance"), format!("{}\n", distances.join(" ")))?;
        for (name, page) in HUGEPAGE_SIZES {
            let pool = dir.join(format!("hugepages/hugepages-{}kB", page / 1024));
            std::fs::create_dir_all(&pool)?;
            let pages = zone.hugepages.get(name).copied().unwrap_or(0) / page;
            std::fs::write(pool.join("nr_hugepages"), format!("{pages}\n"))?;
            std::fs::write(pool.join("free_hugepages"), format!("{pages}\n"))?;
        }
    }
    write_cpu_topology(&sysfs_root(node_dir), machine)?;
    std::fs::write(
        kubelet_config_path(node_dir),
        kubelet_config(machine, settings),
    )?;
    if let Some(sockets) = socket_path(node_dir).parent() {
        std::fs::create_dir_all(sockets)?;
    }
    Ok(())
}

/// Writes `devices/system/cpu` afresh (no CPU of an earlier machine left): each CPU
/// its own core, on socket 0.
fn write_cpu_topology(sys: &Path, machine: &Machine) -> io::Result<()> {
    let cpus = sys.join("devices/system/cpu");
    if cpus.exists() {
        std::fs::remove_dir_all(&cpus)?;
    }
    for cpu in machine.zones.iter().flat_map(|z| z.cpus.iter().copied()) {
        let dir = cpus.join(format!("cpu{cpu}/topology"));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("thread_siblings_list"), format!("{cpu}\n"))?;
        std::fs::write(dir.join("physical_package_id"), "0\n")?;
    }
    Ok(())
}

/// The node's `KubeletConfiguration` document: the one its referee kubelet runs with
/// (see [`crate::referee::convert::kubelet_config`]).
pub fn kubelet_config(machine: &Machine, settings: &KubeletSettings) -> String {
    let config = crate::referee::convert::kubelet_config(machine, settings);
    // A JSON value always has a YAML rendering.
    serde_norway::to_string(&config).unwrap_or_else(|_| config.to_string())
}

/// Formats ids in the kernel's list format: `0-3,8,10-11`.
pub fn format_cpulist(ids: impl IntoIterator<Item = u32>) -> String {
    let ids: BTreeSet<u32> = ids.into_iter().collect();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for id in ids {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == id => *end = id,
            _ => ranges.push((id, id)),
        }
    }
    let parts: Vec<String> = ranges
        .into_iter()
        .map(|(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            }
        })
        .collect();
    parts.join(",")
}

/// Parses the kernel's list format (`0-3,8`); an empty string is the empty set.
pub fn parse_cpulist(text: &str) -> Result<BTreeSet<u32>, String> {
    let mut ids = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("{part:?} is not a CPU list entry"))
        };
        match part.split_once('-') {
            Some((start, end)) => {
                let (start, end) = (number(start)?, number(end)?);
                if start > end {
                    return Err(format!("{part:?} is a decreasing range"));
                }
                ids.extend(start..=end);
            }
            None => {
                ids.insert(number(part)?);
            }
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_round_trip() {
        let ids = parse_cpulist("0-3,8,10-11").unwrap();
        assert_eq!(ids.len(), 7);
        assert_eq!(format_cpulist(ids), "0-3,8,10-11");
        assert!(parse_cpulist("").unwrap().is_empty());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }

    #[test]
    fn a_smaller_machine_under_the_same_directory_leaves_no_zone_of_the_old_one() {
        let node = |zones: &str| {
            let yaml = format!(
                "nodes:\n- name: n\n  topologyManagerPolicy: single-numa-node\n  zones: {zones}\n"
            );
            crate::scenario::Scenario::from_yaml(&yaml).unwrap().nodes()[0].clone()
        };
        let dir = tempfile::tempdir().unwrap();
        let nodes = sysfs_root(dir.path()).join("devices/system/node");
        let two = node("[{ count: 2, cpus: 4, memory: 8Gi }]");
        write_node_files(dir.path(), &two.machine, &two.settings).unwrap();
        assert!(nodes.join("node1/cpulist").is_file());
        let one = node("[{ cpus: 6, memory: 8Gi }]");
        write_node_files(dir.path(), &one.machine, &one.settings).unwrap();
        assert!(
            !nodes.join("node1").exists(),
            "zone 1 of the old machine is gone"
        );
        let online = std::fs::read_to_string(nodes.join("online")).unwrap();
        assert_eq!(online.trim(), "0");
        let cpus = std::fs::read_to_string(nodes.join("node0/cpulist")).unwrap();
        assert_eq!(cpus.trim(), "0-5");
        // The CPU layout: one thread per core, socket 0, only the new machine's CPUs.
        let cpu = sysfs_root(dir.path()).join("devices/system/cpu");
        let siblings = std::fs::read_to_string(cpu.join("cpu5/topology/thread_siblings_list"));
        assert_eq!(siblings.unwrap().trim(), "5");
        let package = std::fs::read_to_string(cpu.join("cpu0/topology/physical_package_id"));
        assert_eq!(package.unwrap().trim(), "0");
        assert!(
            !cpu.join("cpu6").exists(),
            "CPU 6 of the old machine is gone"
        );
    }
}
