//! The kubelet's CPU and memory manager policies and the policy options that change
//! where the Topology Manager and the CPU manager place a pod, as a node publishes them.
//!
//! A scheduler needs them to agree with the kubelet: a CPU manager `none` gives no pod
//! exclusive CPUs (so nothing CPU-related is aligned), a memory manager `Static` pins
//! Guaranteed pods' memory to NUMA nodes and can refuse a pod under every Topology
//! Manager policy, `prefer-closest-numa-nodes` changes which zone set the Topology Manager
//! picks. TAS's updater publishes them as top-level attributes:
//!
//! | attribute | value |
//! |---|---|
//! | `cpuManagerPolicy` | `none` or `static` |
//! | `cpuManagerPolicyOptions` | the kubelet's flag format, `name=value,...` sorted by name |
//! | `memoryManagerPolicy` | `None`, `Static` or `BestEffort` |
//! | `topologyManagerPolicyOptions` | the kubelet's flag format, `name=value,...` sorted by name |
//!
//! [`ResourceManagersConfig::from_nrt`] reads them. A node whose object lacks a policy
//! attribute (another writer, or an older updater) keeps the assumption schedulers made
//! before these attributes existed: static CPU and memory managers, no options.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::attributes::AttributeError;
use super::v1alpha2::NodeResourceTopology;

/// Attribute holding the kubelet CPU manager policy.
pub const CPU_MANAGER_POLICY: &str = "cpuManagerPolicy";
/// Attribute holding the CPU manager policy options (`name=value,...`).
pub const CPU_MANAGER_POLICY_OPTIONS: &str = "cpuManagerPolicyOptions";
/// Attribute holding the kubelet memory manager policy.
pub const MEMORY_MANAGER_POLICY: &str = "memoryManagerPolicy";
/// Attribute holding the Topology Manager policy options (`name=value,...`).
pub const TOPOLOGY_MANAGER_POLICY_OPTIONS: &str = "topologyManagerPolicyOptions";

/// Topology Manager option: among equally wide NUMA sets, pick the closest.
pub const PREFER_CLOSEST_NUMA_NODES: &str = "prefer-closest-numa-nodes";
/// CPU manager option: allocate whole physical cores only.
pub const FULL_PCPUS_ONLY: &str = "full-pcpus-only";
/// CPU manager option: spread multi-NUMA allocations evenly over the NUMA nodes.
pub const DISTRIBUTE_CPUS_ACROSS_NUMA: &str = "distribute-cpus-across-numa";
/// CPU manager option: align CPUs to sockets rather than NUMA nodes.
pub const ALIGN_BY_SOCKET: &str = "align-by-socket";

/// The kubelet CPU manager policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CpuManagerPolicy {
    /// CPUs are shared; nothing is exclusive or NUMA-aligned (the kubelet's default).
    #[default]
    None,
    /// Guaranteed pods with integer CPU requests get exclusive, NUMA-aligned CPUs.
    Static,
}

impl CpuManagerPolicy {
    /// The kubelet's name for the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Static => "static",
        }
    }
}

impl FromStr for CpuManagerPolicy {
    type Err = AttributeError;

    fn from_str(value: &str) -> Result<Self, AttributeError> {
        match value {
            "none" => Ok(Self::None),
            "static" => Ok(Self::Static),
            _ => Err(AttributeError::UnknownValue {
                attribute: CPU_MANAGER_POLICY,
                value: value.to_owned(),
                expected: "none, static",
            }),
        }
    }
}

impl fmt::Display for CpuManagerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kubelet memory manager policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum MemoryManagerPolicy {
    /// No NUMA-pinned memory (the kubelet's default).
    #[default]
    None,
    /// Guaranteed pods get memory and hugepages pinned to NUMA nodes.
    Static,
    /// Best-effort NUMA affinity (Windows nodes).
    BestEffort,
}

impl MemoryManagerPolicy {
    /// The kubelet's name for the policy.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Static => "Static",
            Self::BestEffort => "BestEffort",
        }
    }
}

impl FromStr for MemoryManagerPolicy {
    type Err = AttributeError;

    fn from_str(value: &str) -> Result<Self, AttributeError> {
        match value {
            "None" => Ok(Self::None),
            "Static" => Ok(Self::Static),
            "BestEffort" => Ok(Self::BestEffort),
            _ => Err(AttributeError::UnknownValue {
                attribute: MEMORY_MANAGER_POLICY,
                value: value.to_owned(),
                expected: "None, Static, BestEffort",
            }),
        }
    }
}

impl fmt::Display for MemoryManagerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's resource manager settings; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceManagersConfig {
    /// The CPU manager policy.
    pub cpu_manager_policy: CpuManagerPolicy,
    /// The CPU manager policy options, values as written.
    pub cpu_manager_options: BTreeMap<String, String>,
    /// The memory manager policy.
    pub memory_manager_policy: MemoryManagerPolicy,
    /// The Topology Manager policy options, values as written.
    pub topology_manager_options: BTreeMap<String, String>,
}

impl Default for ResourceManagersConfig {
    /// What a reader assumes when nothing is published: static managers, no options.
    fn default() -> Self {
        Self {
            cpu_manager_policy: CpuManagerPolicy::Static,
            cpu_manager_options: BTreeMap::new(),
            memory_manager_policy: MemoryManagerPolicy::Static,
            topology_manager_options: BTreeMap::new(),
        }
    }
}

impl ResourceManagersConfig {
    /// Reads the four attributes; absent ones keep their [`Default`] value.
    pub fn from_nrt(nrt: &NodeResourceTopology) -> Result<Self, AttributeError> {
        let mut config = Self::default();
        if let Some(policy) = nrt.attribute(CPU_MANAGER_POLICY) {
            config.cpu_manager_policy = policy.parse()?;
        }
        if let Some(policy) = nrt.attribute(MEMORY_MANAGER_POLICY) {
            config.memory_manager_policy = policy.parse()?;
        }
        if let Some(options) = nrt.attribute(CPU_MANAGER_POLICY_OPTIONS) {
            config.cpu_manager_options = parse_options(CPU_MANAGER_POLICY_OPTIONS, options)?;
        }
        if let Some(options) = nrt.attribute(TOPOLOGY_MANAGER_POLICY_OPTIONS) {
            config.topology_manager_options =
                parse_options(TOPOLOGY_MANAGER_POLICY_OPTIONS, options)?;
        }
        Ok(config)
    }

    /// Whether the Topology Manager option `prefer-closest-numa-nodes` is on.
    pub fn prefer_closest_numa_nodes(&self) -> bool {
        flag(&self.topology_manager_options, PREFER_CLOSEST_NUMA_NODES)
    }

    /// Whether the CPU manager option `name` (a boolean option) is on.
    pub fn cpu_option(&self, name: &str) -> bool {
        flag(&self.cpu_manager_options, name)
    }

    /// Whether the CPU manager gives exclusive, NUMA-aligned CPUs.
    pub fn static_cpus(&self) -> bool {
        self.cpu_manager_policy == CpuManagerPolicy::Static
    }

    /// Whether the memory manager pins Guaranteed pods' memory to NUMA nodes.
    pub fn static_memory(&self) -> bool {
        self.memory_manager_policy == MemoryManagerPolicy::Static
    }
}

/// Renders options in the kubelet's flag format: `name=value,...`, sorted by name.
pub fn format_options(options: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (i, (name, value)) in options.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
    out
}

/// Parses the kubelet's flag format for options; an empty value is no options.
pub fn parse_options(
    attribute: &'static str,
    value: &str,
) -> Result<BTreeMap<String, String>, AttributeError> {
    let mut options = BTreeMap::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, option) = pair
            .split_once('=')
            .filter(|(name, _)| !name.trim().is_empty())
            .ok_or_else(|| AttributeError::UnknownValue {
                attribute,
                value: value.to_owned(),
                expected: "comma-separated name=value pairs",
            })?;
        options.insert(name.trim().to_owned(), option.trim().to_owned());
    }
    Ok(options)
}

/// A boolean option as Go's `strconv.ParseBool` reads it (what the kubelet uses);
/// anything else counts as off.
fn flag(options: &BTreeMap<String, String>, name: &str) -> bool {
    matches!(
        options.get(name).map(String::as_str),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nrt::attributes::tests::nrt;

    #[test]
    fn absent_attributes_keep_static_managers() {
        let config = ResourceManagersConfig::from_nrt(&nrt(&[], &[])).unwrap();
        assert_eq!(config, ResourceManagersConfig::default());
        assert!(config.static_cpus() && config.static_memory());
        assert!(!config.prefer_closest_numa_nodes());
    }

    #[test]
    fn attributes_are_read() {
        let node = nrt(
            &[],
            &[
                (CPU_MANAGER_POLICY, "none"),
                (MEMORY_MANAGER_POLICY, "None"),
                (
                    CPU_MANAGER_POLICY_OPTIONS,
                    "distribute-cpus-across-numa=true,full-pcpus-only=false",
                ),
                (
                    TOPOLOGY_MANAGER_POLICY_OPTIONS,
                    "max-allowable-numa-nodes=16,prefer-closest-numa-nodes=True",
                ),
            ],
        );
        let config = ResourceManagersConfig::from_nrt(&node).unwrap();
        assert_eq!(config.cpu_manager_policy, CpuManagerPolicy::None);
        assert_eq!(config.memory_manager_policy, MemoryManagerPolicy::None);
        assert!(config.cpu_option(DISTRIBUTE_CPUS_ACROSS_NUMA));
        assert!(!config.cpu_option(FULL_PCPUS_ONLY));
        assert!(!config.cpu_option(ALIGN_BY_SOCKET));
        assert!(config.prefer_closest_numa_nodes());
        assert_eq!(
            format_options(&config.topology_manager_options),
            "max-allowable-numa-nodes=16,prefer-closest-numa-nodes=True"
        );
    }

    #[test]
    fn bad_values_name_the_attribute() {
        for (name, value) in [
            (CPU_MANAGER_POLICY, "Static"),
            (MEMORY_MANAGER_POLICY, "static"),
            (CPU_MANAGER_POLICY_OPTIONS, "full-pcpus-only"),
            (TOPOLOGY_MANAGER_POLICY_OPTIONS, "=true"),
        ] {
            let err = ResourceManagersConfig::from_nrt(&nrt(&[], &[(name, value)])).unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains(name) && message.contains(value),
                "{message}"
            );
        }
        assert_eq!(
            parse_options(CPU_MANAGER_POLICY_OPTIONS, ""),
            Ok(BTreeMap::new())
        );
    }
}
