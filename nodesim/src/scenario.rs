//! Scenario files: the simulated nodes of a test cluster and the workload to run on them.
//!
//! A scenario is YAML (format in the crate README, examples under `nodesim/scenarios/`):
//! `nodes` is a list of node groups, each expanded into `count` nodes (`name` when
//! `count` is 1, else `name-0`, `name-1`, ...) with NUMA `zones` (each zone entry may
//! stand for `count` identical zones), kubelet settings and labels; `workload` is a list
//! of pod templates ([`WorkloadTemplate`]). [`Scenario::from_yaml`] parses and
//! validates, and turns every node into a [`NodeSpec`]: its [`Machine`] (CPU ids are
//! numbered zone after zone; device ids are `<name>-<zone>-<i>` with `<name>` the part of
//! the resource after its `/`) and [`KubeletSettings`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tas_api::quantity::parse_value;

use crate::machine::{
    CpuManagerPolicy, KubeletSettings, MAX_NUMA_NODES, Machine, MemoryManagerPolicy, Zone,
};
use crate::sysfs::parse_cpulist;
use crate::workload::WorkloadTemplate;
use tas_testcluster::FakeNode;

/// Bytes of the hugepage sizes a scenario may use.
pub const HUGEPAGE_SIZES: [(&str, u64); 2] =
    [("hugepages-2Mi", 2 << 20), ("hugepages-1Gi", 1 << 30)];

pub(super) fn one() -> u32 {
    1
}

fn default_scope() -> String {
    "container".into()
}

fn default_max_pods() -> u32 {
    110
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    #[serde(default)]
    nodes: Vec<NodeGroup>,
    #[serde(default)]
    workload: Vec<WorkloadTemplate>,
}

/// A group of identical nodes, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NodeGroup {
    name: String,
    #[serde(default = "one")]
    count: u32,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    topology_manager_policy: String,
    #[serde(default = "default_scope")]
    topology_manager_scope: String,
    #[serde(default)]
    cpu_manager_policy: Option<String>,
    #[serde(default)]
    memory_manager_policy: Option<String>,
    #[serde(default, rename = "reservedSystemCPUs")]
    reserved_system_cpus: Option<String>,
    #[serde(default = "default_max_pods")]
    max_pods: u32,
    zones: Vec<ZoneGroup>,
}

/// `count` identical zones, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ZoneGroup {
    #[serde(default = "one")]
    count: u32,
    cpus: u32,
    memory: String,
    #[serde(default, rename = "hugepages-2Mi")]
    hugepages_2mi: Option<String>,
    #[serde(default, rename = "hugepages-1Gi")]
    hugepages_1gi: Option<String>,
    #[serde(default)]
    devices: BTreeMap<String, u32>,
}

/// One simulated node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Labels besides the fake-node ones.
    pub labels: BTreeMap<String, String>,
    /// The hardware.
    pub machine: Machine,
    /// The kubelet settings.
    pub settings: KubeletSettings,
}

impl NodeSpec {
    /// The Node object to create: capacity = allocatable = the sum of the zones
    /// (reserved CPUs left out; memory without hugepages).
    pub fn fake_node(&self) -> FakeNode {
        let mut allocatable = self.machine.allocatable();
        let mut node = FakeNode::new(&self.name);
        let mut take = |name: &str| allocatable.remove(name).unwrap_or(0);
        node.cpu = (take("cpu") / 1000).to_string();
        node.memory = take("memory").to_string();
        node.pods = take("pods") as u32;
        node.hugepages_2mi = Some(take("hugepages-2Mi"))
            .filter(|&b| b > 0)
            .map(|b| b.to_string());
        node.hugepages_1gi = Some(take("hugepages-1Gi"))
            .filter(|&b| b > 0)
            .map(|b| b.to_string());
        node.extended = allocatable
            .into_iter()
            .map(|(name, amount)| (name, amount.to_string()))
            .collect();
        node.labels = self.labels.clone();
        node
    }
}

/// Why a scenario cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("cannot read scenario {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not YAML of the expected shape.
    #[error("invalid scenario: {0}")]
    Yaml(#[from] serde_norway::Error),
    /// Well-formed but inconsistent.
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    nodes: Vec<NodeSpec>,
    workload: Vec<WorkloadTemplate>,
}

impl Scenario {
    /// Parses and validates a scenario document.
    pub fn from_yaml(text: &str) -> Result<Self, ScenarioError> {
        let file: ScenarioFile = serde_norway::from_str(text)?;
        let mut nodes = Vec::new();
        for group in &file.nodes {
            expand(group, &mut nodes).map_err(ScenarioError::Invalid)?;
        }
        let mut names = BTreeSet::new();
        if let Some(dup) = nodes.iter().find(|n| !names.insert(n.name.clone())) {
            return Err(ScenarioError::Invalid(format!(
                "node {} appears twice",
                dup.name
            )));
        }
        let mut templates = BTreeSet::new();
        for template in &file.workload {
            if !templates.insert(template.name.clone()) {
                return Err(ScenarioError::Invalid(format!(
                    "workload {} appears twice",
                    template.name
                )));
            }
            template
                .validate()
                .map_err(|e| ScenarioError::Invalid(format!("workload {}: {e}", template.name)))?;
        }
        Ok(Self {
            nodes,
            workload: file.workload,
        })
    }

    /// Reads and validates the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// The nodes, groups expanded.
    pub fn nodes(&self) -> &[NodeSpec] {
        &self.nodes
    }

    /// The pod templates, in file order.
    pub fn workload(&self) -> &[WorkloadTemplate] {
        &self.workload
    }

    /// Prefixes every node name with `prefix-` (to run a scenario twice on one cluster).
    pub fn with_node_prefix(mut self, prefix: &str) -> Self {
        for node in &mut self.nodes {
            node.name = format!("{prefix}-{}", node.name);
        }
        self
    }

    /// Adds `key=value` to every node's labels.
    pub fn with_node_label(mut self, key: &str, value: &str) -> Self {
        for node in &mut self.nodes {
            node.labels.insert(key.into(), value.into());
        }
        self
    }
}

fn expand(group: &NodeGroup, nodes: &mut Vec<NodeSpec>) -> Result<(), String> {
    let context = |e: String| format!("node {}: {e}", group.name);
    let settings = settings(group).map_err(context)?;
    let machine = machine(group).map_err(context)?;
    for i in 0..group.count {
        let name = if group.count == 1 {
            group.name.clone()
        } else {
            format!("{}-{i}", group.name)
        };
        nodes.push(NodeSpec {
            name,
            labels: group.labels.clone(),
            machine: machine.clone(),
            settings,
        });
    }
    Ok(())
}

fn settings(group: &NodeGroup) -> Result<KubeletSettings, String> {
    let cpu_manager_policy = match group.cpu_manager_policy.as_deref() {
        None | Some("static") => CpuManagerPolicy::Static,
        Some("none") => CpuManagerPolicy::None,
        Some(other) => {
            return Err(format!(
                "cpuManagerPolicy {other:?}: expected none or static"
            ));
        }
    };
    let memory_manager_policy = match group.memory_manager_policy.as_deref() {
        None | Some("Static") => MemoryManagerPolicy::Static,
        Some("None") => MemoryManagerPolicy::None,
        Some(other) => {
            return Err(format!(
                "memoryManagerPolicy {other:?}: expected None or Static"
            ));
        }
    };
    Ok(KubeletSettings {
        topology_manager_policy: group
            .topology_manager_policy
            .parse()
            .map_err(|e| format!("{e}"))?,
        topology_manager_scope: group
            .topology_manager_scope
            .parse()
            .map_err(|e| format!("{e}"))?,
        cpu_manager_policy,
        memory_manager_policy,
    })
}

fn bytes(what: &str, text: &str) -> Result<u64, String> {
    let value = parse_value(text).map_err(|e| format!("{what}: {e}"))?;
    u64::try_from(value).map_err(|_| format!("{what}: {text} is negative"))
}

fn machine(group: &NodeGroup) -> Result<Machine, String> {
    let mut zones = Vec::new();
    let mut next_cpu = 0;
    for zone_group in &group.zones {
        for _ in 0..zone_group.count {
            let id = zones.len() as u32;
            let mut hugepages = BTreeMap::new();
            let pools = [&zone_group.hugepages_2mi, &zone_group.hugepages_1gi];
            for ((name, page), amount) in HUGEPAGE_SIZES.iter().zip(pools) {
                let Some(amount) = amount else { continue };
                let amount = bytes(name, amount)?;
                if !amount.is_multiple_of(*page) {
                    return Err(format!("{name} {amount} is not a whole number of pages"));
                }
                hugepages.insert(name.to_string(), amount);
            }
            let mut devices = BTreeMap::new();
            for (resource, &count) in &zone_group.devices {
                let Some((_, short)) = resource.rsplit_once('/') else {
                    return Err(format!("device resource {resource:?} has no vendor domain"));
                };
                let ids = (0..count).map(|i| format!("{short}-{id}-{i}")).collect();
                devices.insert(resource.clone(), ids);
            }
            zones.push(Zone {
                id,
                cpus: (next_cpu..next_cpu + zone_group.cpus).collect(),
                memory: bytes("memory", &zone_group.memory)?,
                hugepages,
                devices,
            });
            next_cpu += zone_group.cpus;
        }
    }
    if zones.is_empty() || zones.len() as u32 > MAX_NUMA_NODES {
        return Err(format!(
            "has {} zones, expected 1 to {MAX_NUMA_NODES}",
            zones.len()
        ));
    }
    let reserved_cpus = match &group.reserved_system_cpus {
        None => BTreeSet::new(),
        Some(list) => parse_cpulist(list).map_err(|e| format!("reservedSystemCPUs: {e}"))?,
    };
    if let Some(cpu) = reserved_cpus.iter().find(|&&cpu| cpu >= next_cpu) {
        return Err(format!("reserved CPU {cpu} does not exist"));
    }
    if next_cpu as usize <= reserved_cpus.len() {
        return Err("has no allocatable CPU".into());
    }
    Ok(Machine {
        zones,
        reserved_cpus,
        max_pods: group.max_pods,
    })
}
