//! What the real-node stack test reads besides the API: the kubelet's CPU-manager
//! checkpoint, the NRT's CPU figures, and the processes of a container in `/proc`; and
//! the test pods.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;
use tas_api::nrt::v1alpha2::NodeResourceTopology;

/// The CPUs of a kubelet cpulist (`0-2,5`).
pub fn cpu_list(list: &str) -> BTreeSet<u32> {
    let mut cpus = BTreeSet::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.parse().expect("a CPU id"), b.parse().expect("a CPU id"));
        cpus.extend(a..=b);
    }
    cpus
}

/// The kubelet's own checkpoint, `cpu_manager_state`: the shared pool and each
/// container's exclusive CPUs by pod UID.
#[derive(Debug)]
pub struct CpuState {
    pub raw: String,
    pub default_set: BTreeSet<u32>,
    pub entries: BTreeMap<String, BTreeSet<u32>>,
}

impl CpuState {
    pub fn read(kubelet_root: &Path) -> Result<Self, String> {
        let raw = std::fs::read_to_string(kubelet_root.join("cpu_manager_state"))
            .map_err(|e| format!("cpu_manager_state: {e}"))?;
        let v: Value = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
        let entries = v["entries"]
            .as_object()
            .map(|pods| {
                pods.iter()
                    .map(|(uid, containers)| {
                        let cpus = containers
                            .as_object()
                            .into_iter()
                            .flatten()
                            .flat_map(|(_, l)| cpu_list(l.as_str().unwrap_or_default()))
                            .collect();
                        (uid.clone(), cpus)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            default_set: cpu_list(v["defaultCpuSet"].as_str().unwrap_or_default()),
            entries,
            raw,
        })
    }
}

/// A CPU quantity as whole CPUs (`1`, `1000m`).
fn cpus(q: &str) -> i64 {
    match q.strip_suffix('m') {
        Some(milli) => milli.parse::<i64>().unwrap_or(-1000) / 1000,
        None => q.parse().unwrap_or(-1),
    }
}

/// Per zone name: (allocatable, available) CPUs of the NRT.
pub fn nrt_cpus(nrt: &NodeResourceTopology) -> BTreeMap<String, (i64, i64)> {
    nrt.zones
        .iter()
        .map(|z| {
            let cpu = z.resources.iter().find(|r| r.name == "cpu");
            let figures = cpu
                .map(|r| (cpus(&r.allocatable.0), cpus(&r.available.0)))
                .unwrap_or((0, 0));
            (z.name.clone(), figures)
        })
        .collect()
}

/// What the NRT must say per zone given the kubelet's checkpoint: allocatable = the
/// zone's CPUs but the reserved ones; available = those still in the shared pool (the
/// kubelet's `defaultCpuSet`), i.e. not given to any container.
pub fn expected_cpus(
    zones: &BTreeMap<String, BTreeSet<u32>>,
    reserved: &BTreeSet<u32>,
    state: &CpuState,
) -> BTreeMap<String, (i64, i64)> {
    zones
        .iter()
        .map(|(name, cpus)| {
            let allocatable: BTreeSet<u32> = cpus.difference(reserved).copied().collect();
            let free = allocatable.intersection(&state.default_set).count();
            (name.clone(), (allocatable.len() as i64, free as i64))
        })
        .collect()
}

/// What `/proc` says of the processes of a container (cgroup path names the pod UID
/// and the container id): the `Cpus_allowed_list`, `Uid`, `CapEff` and `NoNewPrivs`
/// lines of each.
pub fn container_processes(pod_uid: &str, container_id: &str) -> Vec<BTreeMap<String, String>> {
    let id = container_id
        .rsplit("://")
        .next()
        .unwrap_or(container_id)
        .to_owned();
    let uid_path = pod_uid.replace('-', "_");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let dir = entry.path();
        let Ok(cgroup) = std::fs::read_to_string(dir.join("cgroup")) else {
            continue;
        };
        if !cgroup.contains(&id) || !(cgroup.contains(pod_uid) || cgroup.contains(&uid_path)) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue;
        };
        found.push(
            status
                .lines()
                .filter_map(|l| l.split_once(':'))
                .filter(|(k, _)| ["Cpus_allowed_list", "Uid", "CapEff", "NoNewPrivs"].contains(k))
                .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
                .collect(),
        );
    }
    found
}
