//! The parts of the kubelet's configuration file that shape the NRT object.
//!
//! The kubelet reads a `KubeletConfiguration` (YAML or JSON, camelCase keys) from its
//! config file. The node agent needs only the resource managers' settings from it: the
//! Topology Manager policy, scope and options, the CPU manager policy and options and the
//! memory manager policy (all published as NRT attributes, see
//! [`tas_api::nrt::resource_managers`]), and `reservedSystemCPUs` (which
//! [`accounting`](crate::accounting) removes from the allocatable CPUs when the CPU
//! manager is `none`). Unknown keys are ignored; absent keys take the kubelet's defaults.
//! A value the kubelet would reject is an error naming the field and the value: guessing a
//! policy could make schedulers admit pods the kubelet then rejects.
//!
//! A missing file is its own error variant, [`KubeletConfigError::NotFound`], so a caller
//! can fall back to defaults and command-line flags.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tas_api::nrt::attributes::DEFAULT_MAX_NUMA_NODES;
use tas_api::nrt::{
    AttributeError, ResourceManagersConfig, TopologyManagerConfig, TopologyManagerPolicy,
    TopologyManagerScope,
};
pub use tas_api::nrt::{CpuManagerPolicy, MemoryManagerPolicy};

use crate::sysfs::{CpuListError, parse_cpulist};

/// Where the kubelet's config file usually lives on the host.
pub const DEFAULT_PATH: &str = "/var/lib/kubelet/config.yaml";

/// The Topology Manager policy option limiting how many NUMA nodes it considers.
pub const MAX_ALLOWABLE_NUMA_NODES: &str = "max-allowable-numa-nodes";

/// The kubelet settings the node agent uses. [`Default`] holds the kubelet's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletConfig {
    /// `topologyManagerPolicy` (default `none`).
    pub topology_manager_policy: TopologyManagerPolicy,
    /// `topologyManagerScope` (default `container`).
    pub topology_manager_scope: TopologyManagerScope,
    /// `topologyManagerPolicyOptions`, values as written (scalars turned into strings).
    pub topology_manager_policy_options: BTreeMap<String, String>,
    /// The `max-allowable-numa-nodes` policy option, or 8 when it is not set.
    pub topology_manager_max_numa_nodes: u32,
    /// `cpuManagerPolicy` (default `none`).
    pub cpu_manager_policy: CpuManagerPolicy,
    /// `cpuManagerPolicyOptions`, values as written (scalars turned into strings).
    pub cpu_manager_policy_options: BTreeMap<String, String>,
    /// `memoryManagerPolicy` (default `None`).
    pub memory_manager_policy: MemoryManagerPolicy,
    /// `reservedSystemCPUs` (default none).
    pub reserved_system_cpus: BTreeSet<u32>,
    /// `cpuManagerReconcilePeriod` (default 10 s): how long the cpusets of running
    /// shared-pool containers may lag the CPU manager ([`crate::shared_pool`]).
    pub cpu_manager_reconcile_period: std::time::Duration,
}

/// The kubelet's default `cpuManagerReconcilePeriod`.
pub const DEFAULT_CPU_MANAGER_RECONCILE_PERIOD: std::time::Duration =
    std::time::Duration::from_secs(10);

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            topology_manager_policy: TopologyManagerPolicy::default(),
            topology_manager_scope: TopologyManagerScope::default(),
            topology_manager_policy_options: BTreeMap::new(),
            topology_manager_max_numa_nodes: DEFAULT_MAX_NUMA_NODES,
            cpu_manager_policy: CpuManagerPolicy::default(),
            cpu_manager_policy_options: BTreeMap::new(),
            memory_manager_policy: MemoryManagerPolicy::default(),
            reserved_system_cpus: BTreeSet::new(),
            cpu_manager_reconcile_period: DEFAULT_CPU_MANAGER_RECONCILE_PERIOD,
        }
    }
}

/// Why a kubelet configuration document is not usable.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not YAML, or a key holds the wrong type of value.
    #[error("not a valid kubelet configuration: {0}")]
    Yaml(#[from] serde_norway::Error),
    /// A merged (file, drop-ins, overrides) or `/configz` document holds the wrong type
    /// of value for a key.
    #[error("not a valid kubelet configuration: {0}")]
    Json(#[from] serde_json::Error),
    /// The document declares a kind other than `KubeletConfiguration`.
    #[error("kind is {0:?}, expected KubeletConfiguration")]
    WrongKind(String),
    /// A Topology Manager, CPU manager or memory manager policy or scope is unknown.
    #[error(transparent)]
    TopologyManager(#[from] AttributeError),
    /// A field holds a value the kubelet would reject.
    #[error("{field} has invalid value {value:?}: {reason}")]
    InvalidValue {
        /// The field (or policy option) name.
        field: &'static str,
        /// The value found.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `reservedSystemCPUs` is not a CPU list.
    #[error("reservedSystemCPUs: {0}")]
    ReservedSystemCpus(#[from] CpuListError),
}

/// Why the kubelet's config file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KubeletConfigError {
    /// The file does not exist; callers may fall back to defaults and flags.
    #[error("kubelet config file {} not found", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
    },
    /// The file exists but cannot be read.
    #[error("cannot read kubelet config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The file's content is not a usable kubelet configuration.
    #[error("kubelet config file {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: ParseError,
    },
}

/// The document as written: every field optional, unknown keys ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RawConfig {
    kind: Option<String>,
    topology_manager_policy: Option<String>,
    topology_manager_scope: Option<String>,
    topology_manager_policy_options: Option<BTreeMap<String, serde_norway::Value>>,
    cpu_manager_policy: Option<String>,
    cpu_manager_policy_options: Option<BTreeMap<String, serde_norway::Value>>,
    memory_manager_policy: Option<String>,
    #[serde(rename = "reservedSystemCPUs")]
    reserved_system_cpus: Option<String>,
    cpu_manager_reconcile_period: Option<String>,
}

impl KubeletConfig {
    /// Parses a `KubeletConfiguration` document (YAML or JSON). An empty document yields
    /// the defaults.
    pub fn from_yaml(text: &str) -> Result<Self, ParseError> {
        let raw: Option<RawConfig> = serde_norway::from_str(text)?;
        Self::from_raw(raw.unwrap_or_default())
    }

    /// Parses a `KubeletConfiguration` already read into JSON (a merge of the config file
    /// and its drop-ins, or the `kubeletconfig` of a `/configz` answer). `null` yields
    /// the defaults.
    pub fn from_value(value: serde_json::Value) -> Result<Self, ParseError> {
        let raw: Option<RawConfig> = serde_json::from_value(value)?;
        Self::from_raw(raw.unwrap_or_default())
    }

    fn from_raw(raw: RawConfig) -> Result<Self, ParseError> {
        if let Some(kind) = raw.kind.filter(|kind| kind != "KubeletConfiguration") {
            return Err(ParseError::WrongKind(kind));
        }
        // The kubelet treats an empty string like an absent field.
        let set = |value: Option<String>| value.filter(|v| !v.is_empty());
        let mut config = Self::default();
        if let Some(policy) = set(raw.topology_manager_policy) {
            config.topology_manager_policy = policy.parse()?;
        }
        if let Some(scope) = set(raw.topology_manager_scope) {
            config.topology_manager_scope = scope.parse()?;
        }
        if let Some(policy) = set(raw.cpu_manager_policy) {
            config.cpu_manager_policy = policy.parse()?;
        }
        if let Some(policy) = set(raw.memory_manager_policy) {
            config.memory_manager_policy = policy.parse()?;
        }
        if let Some(cpus) = raw.reserved_system_cpus {
            config.reserved_system_cpus = parse_cpulist(&cpus)?;
        }
        if let Some(period) = set(raw.cpu_manager_reconcile_period) {
            config.cpu_manager_reconcile_period =
                tas_api::duration::parse(&period).map_err(|e| ParseError::InvalidValue {
                    field: "cpuManagerReconcilePeriod",
                    value: period.clone(),
                    reason: e.to_string(),
                })?;
        }
        config.topology_manager_policy_options = options(
            "topologyManagerPolicyOptions",
            raw.topology_manager_policy_options,
        )?;
        config.cpu_manager_policy_options =
            options("cpuManagerPolicyOptions", raw.cpu_manager_policy_options)?;
        if let Some(max) = config
            .topology_manager_policy_options
            .get(MAX_ALLOWABLE_NUMA_NODES)
        {
            config.topology_manager_max_numa_nodes =
                max.parse().ok().filter(|&n: &u32| n > 0).ok_or_else(|| {
                    ParseError::InvalidValue {
                        field: MAX_ALLOWABLE_NUMA_NODES,
                        value: max.clone(),
                        reason: "expected a positive integer".into(),
                    }
                })?;
        }
        Ok(config)
    }

    /// Reads and parses the config file at `path` (refused past
    /// [`CONFIG_LIMIT`](crate::bounded::CONFIG_LIMIT)).
    pub fn load(path: &Path) -> Result<Self, KubeletConfigError> {
        let text =
            crate::bounded::read_file(path, crate::bounded::CONFIG_LIMIT).map_err(|source| {
                if source.kind() == io::ErrorKind::NotFound {
                    KubeletConfigError::NotFound {
                        path: path.to_owned(),
                    }
                } else {
                    KubeletConfigError::Read {
                        path: path.to_owned(),
                        source,
                    }
                }
            })?;
        Self::from_yaml(&text).map_err(|source| KubeletConfigError::Parse {
            path: path.to_owned(),
            source,
        })
    }

    /// The Topology Manager configuration to publish as NRT attributes.
    pub fn topology_manager_config(&self) -> TopologyManagerConfig {
        TopologyManagerConfig {
            policy: self.topology_manager_policy,
            scope: self.topology_manager_scope,
            max_numa_nodes: self.topology_manager_max_numa_nodes,
        }
    }

    /// The CPU and memory manager settings and the placement-changing policy options to
    /// publish as NRT attributes.
    pub fn resource_managers_config(&self) -> ResourceManagersConfig {
        ResourceManagersConfig {
            cpu_manager_policy: self.cpu_manager_policy,
            cpu_manager_options: self.cpu_manager_policy_options.clone(),
            memory_manager_policy: self.memory_manager_policy,
            topology_manager_options: self.topology_manager_policy_options.clone(),
        }
    }
}

/// A policy options map with every value as a string.
fn options(
    field: &'static str,
    raw: Option<BTreeMap<String, serde_norway::Value>>,
) -> Result<BTreeMap<String, String>, ParseError> {
    let mut options = BTreeMap::new();
    for (name, value) in raw.unwrap_or_default() {
        let value = option_value(&value).map_err(|kind| ParseError::InvalidValue {
            field,
            value: name.clone(),
            reason: format!("the option's value is a {kind}, expected a string"),
        })?;
        options.insert(name, value);
    }
    Ok(options)
}

/// A policy option's value as a string, or what kind of value it is instead. The
/// kubelet declares options as strings, but an unquoted `16` or `true` in YAML means the
/// same to whoever wrote it, and an empty value reads as an empty string.
fn option_value(value: &serde_norway::Value) -> Result<String, &'static str> {
    use serde_norway::Value;
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Number(number) => Ok(number.to_string()),
        Value::Bool(flag) => Ok(flag.to_string()),
        Value::Null => Ok(String::new()),
        Value::Sequence(_) => Err("sequence"),
        Value::Mapping(_) => Err("mapping"),
        Value::Tagged(_) => Err("tagged value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kubeadm-style config with the resource managers turned on.
    const REALISTIC: &str = include_str!("../tests/fixtures/kubelet-config.yaml");

    #[test]
    fn realistic_config() {
        let config = KubeletConfig::from_yaml(REALISTIC).unwrap();
        assert_eq!(
            config,
            KubeletConfig {
                topology_manager_policy: TopologyManagerPolicy::SingleNumaNode,
                topology_manager_scope: TopologyManagerScope::Pod,
                topology_manager_policy_options: BTreeMap::from([
                    (MAX_ALLOWABLE_NUMA_NODES.to_owned(), "16".to_owned()),
                    ("prefer-closest-numa-nodes".to_owned(), "true".to_owned()),
                ]),
                topology_manager_max_numa_nodes: 16,
                cpu_manager_policy: CpuManagerPolicy::Static,
                cpu_manager_policy_options: BTreeMap::from([(
                    "full-pcpus-only".to_owned(),
                    "true".to_owned()
                )]),
                memory_manager_policy: MemoryManagerPolicy::Static,
                reserved_system_cpus: BTreeSet::from([0, 16]),
                cpu_manager_reconcile_period: std::time::Duration::from_secs(5),
            }
        );
        assert_eq!(
            config.topology_manager_config(),
            TopologyManagerConfig {
                policy: TopologyManagerPolicy::SingleNumaNode,
                scope: TopologyManagerScope::Pod,
                max_numa_nodes: 16,
            }
        );
        let managers = config.resource_managers_config();
        assert!(managers.static_cpus() && managers.static_memory());
        assert!(managers.cpu_option("full-pcpus-only"));
        assert!(managers.prefer_closest_numa_nodes());
    }

    #[test]
    fn absent_or_empty_fields_take_kubelet_defaults() {
        for text in [
            "",
            "\n",
            "kind: KubeletConfiguration\n",
            "{}",
            "cpuManagerPolicy: \"\"\ntopologyManagerPolicyOptions: null\n",
            r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "staticPodPath": "/etc"}"#,
        ] {
            assert_eq!(
                KubeletConfig::from_yaml(text).unwrap(),
                KubeletConfig::default(),
                "{text:?}"
            );
        }
        let defaults = KubeletConfig::default();
        assert_eq!(defaults.topology_manager_policy.as_str(), "none");
        assert_eq!(defaults.topology_manager_scope.as_str(), "container");
        assert_eq!(defaults.cpu_manager_policy.as_str(), "none");
        assert_eq!(defaults.memory_manager_policy.as_str(), "None");
        assert_eq!(defaults.topology_manager_max_numa_nodes, 8);
    }

    #[test]
    fn unquoted_option_values_are_read_as_strings() {
        let config = KubeletConfig::from_yaml(
            "topologyManagerPolicyOptions:\n  max-allowable-numa-nodes: 12\n  prefer-closest-numa-nodes: true\n",
        )
        .unwrap();
        assert_eq!(config.topology_manager_max_numa_nodes, 12);
        assert_eq!(
            config.topology_manager_policy_options["prefer-closest-numa-nodes"],
            "true"
        );
    }

    #[test]
    fn bad_values_name_the_field_and_value() {
        let top_level = [
            ("topologyManagerPolicy", "Single-NUMA-Node"),
            ("topologyManagerScope", "node"),
            ("cpuManagerPolicy", "Static"),
            ("memoryManagerPolicy", "static"),
            ("reservedSystemCPUs", "3-1"),
            ("kind", "KubeProxyConfiguration"),
        ];
        let cases = top_level.map(|(field, value)| (format!("{field}: {value}"), field, value));
        const MAX: &str = MAX_ALLOWABLE_NUMA_NODES;
        let option_cases = [
            ("max-allowable-numa-nodes: \"0\"", MAX, "0"),
            ("max-allowable-numa-nodes: many", MAX, "many"),
            ("max-allowable-numa-nodes: ~", MAX, "\"\""),
            (
                "prefer-closest-numa-nodes: [1]",
                "prefer-closest",
                "sequence",
            ),
        ]
        .map(|(option, field, value)| {
            let text = format!("topologyManagerPolicyOptions: {{{option}}}");
            (text, field, value)
        });
        for (text, field, value) in cases.into_iter().chain(option_cases) {
            let message = KubeletConfig::from_yaml(&text).unwrap_err().to_string();
            assert!(
                message.contains(field) && message.contains(value),
                "{text:?}: {message}"
            );
        }
    }

    #[test]
    fn garbage_is_a_yaml_error() {
        for text in [
            "topologyManagerPolicy: [unterminated",
            "just a string",
            "- a\n- list\n",
            "cpuManagerPolicy: {nested: map}",
            "\u{0}\u{1}binary",
        ] {
            let err = KubeletConfig::from_yaml(text).unwrap_err();
            assert!(matches!(err, ParseError::Yaml(_)), "{text:?}: {err:?}");
        }
    }

    #[test]
    fn load_names_the_file_and_tells_missing_apart() {
        let dir = tempfile::TempDir::new().unwrap();

        let missing = dir.path().join("absent.yaml");
        let err = KubeletConfig::load(&missing).unwrap_err();
        assert!(matches!(&err, KubeletConfigError::NotFound { path } if *path == missing));
        assert!(err.to_string().contains("absent.yaml"), "{err}");

        let bad = dir.path().join("config.yaml");
        std::fs::write(&bad, "topologyManagerScope: node\n").unwrap();
        let err = KubeletConfig::load(&bad).unwrap_err();
        assert!(matches!(err, KubeletConfigError::Parse { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.contains("config.yaml") && message.contains("\"node\""),
            "{message}"
        );

        // A directory where the file should be is unreadable, not missing.
        let err = KubeletConfig::load(dir.path()).unwrap_err();
        assert!(matches!(err, KubeletConfigError::Read { .. }), "{err:?}");

        std::fs::write(&bad, REALISTIC).unwrap();
        let config = KubeletConfig::load(&bad).unwrap();
        assert_eq!(config.reserved_system_cpus, BTreeSet::from([0, 16]));
    }
}
