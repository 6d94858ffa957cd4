//! The kubelet Topology Manager configuration a node publishes.
//!
//! It decides how the scheduler must fit a pod: whole pod or each container in one
//! NUMA zone, or not at all. Writers publish it in two ways: the deprecated
//! `topologyPolicies[0]` (policy and scope folded into one name) and the newer
//! `topologyManager*` attributes. [`TopologyManagerConfig::from_nrt`] reads the old field
//! first and lets attributes override it. Unknown values are errors naming the field and
//! the value: guessing a policy could admit pods the kubelet then rejects.

use std::fmt;
use std::str::FromStr;

use super::attributes::{
    AttributeError, DEFAULT_MAX_NUMA_NODES, TOPOLOGY_MANAGER_MAX_NUMA_NODES,
    TOPOLOGY_MANAGER_POLICY, TOPOLOGY_MANAGER_SCOPE, TOPOLOGY_POLICIES_FIRST,
};
use super::v1alpha2::NodeResourceTopology;

/// The kubelet Topology Manager policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TopologyManagerPolicy {
    /// No NUMA alignment.
    #[default]
    None,
    /// Prefer NUMA alignment, admit anyway.
    BestEffort,
    /// Admit only with preferred NUMA alignment.
    Restricted,
    /// Admit only if everything fits in a single NUMA node.
    SingleNumaNode,
}

impl TopologyManagerPolicy {
    /// The kubelet's name for the policy, e.g. `single-numa-node`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::BestEffort => "best-effort",
            Self::Restricted => "restricted",
            Self::SingleNumaNode => "single-numa-node",
        }
    }
}

impl FromStr for TopologyManagerPolicy {
    type Err = AttributeError;

    fn from_str(value: &str) -> Result<Self, AttributeError> {
        match value {
            "none" => Ok(Self::None),
            "best-effort" => Ok(Self::BestEffort),
            "restricted" => Ok(Self::Restricted),
            "single-numa-node" => Ok(Self::SingleNumaNode),
            _ => Err(AttributeError::UnknownValue {
                attribute: TOPOLOGY_MANAGER_POLICY,
                value: value.to_owned(),
                expected: "none, best-effort, restricted, single-numa-node",
            }),
        }
    }
}

impl fmt::Display for TopologyManagerPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The kubelet Topology Manager scope: what must be aligned as a unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TopologyManagerScope {
    /// Each container separately.
    #[default]
    Container,
    /// All containers of a pod together.
    Pod,
}

impl TopologyManagerScope {
    /// The kubelet's name for the scope, `container` or `pod`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Container => "container",
            Self::Pod => "pod",
        }
    }
}

impl FromStr for TopologyManagerScope {
    type Err = AttributeError;

    fn from_str(value: &str) -> Result<Self, AttributeError> {
        match value {
            "container" => Ok(Self::Container),
            "pod" => Ok(Self::Pod),
            _ => Err(AttributeError::UnknownValue {
                attribute: TOPOLOGY_MANAGER_SCOPE,
                value: value.to_owned(),
                expected: "container, pod",
            }),
        }
    }
}

impl fmt::Display for TopologyManagerScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's Topology Manager configuration as published in its NRT object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TopologyManagerConfig {
    /// The policy.
    pub policy: TopologyManagerPolicy,
    /// The scope.
    pub scope: TopologyManagerScope,
    /// The most NUMA nodes the Topology Manager considers.
    pub max_numa_nodes: u32,
}

impl Default for TopologyManagerConfig {
    /// `none`, `container`, 8 NUMA nodes: what a reader assumes when nothing is published.
    fn default() -> Self {
        Self {
            policy: TopologyManagerPolicy::default(),
            scope: TopologyManagerScope::default(),
            max_numa_nodes: DEFAULT_MAX_NUMA_NODES,
        }
    }
}

impl TopologyManagerConfig {
    /// Reads the configuration: `topologyPolicies[0]` first, then the
    /// `topologyManagerPolicy`, `topologyManagerScope` and `topologyManagerMaxNUMANodes`
    /// attributes override it. Anything absent keeps its [`Default`] value.
    pub fn from_nrt(nrt: &NodeResourceTopology) -> Result<Self, AttributeError> {
        let mut config = Self::default();
        if let Some(legacy) = nrt.topology_policies.first() {
            (config.policy, config.scope) = legacy_policy(legacy)?;
        }
        if let Some(policy) = nrt.attribute(TOPOLOGY_MANAGER_POLICY) {
            config.policy = policy.parse()?;
        }
        if let Some(scope) = nrt.attribute(TOPOLOGY_MANAGER_SCOPE) {
            config.scope = scope.parse()?;
        }
        if let Some(max) = nrt.attribute(TOPOLOGY_MANAGER_MAX_NUMA_NODES) {
            config.max_numa_nodes = max.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                AttributeError::NotPositiveInteger {
                    attribute: TOPOLOGY_MANAGER_MAX_NUMA_NODES,
                    value: max.to_owned(),
                }
            })?;
        }
        Ok(config)
    }
}

/// Maps a deprecated `topologyPolicies` name to the policy and scope it stands for.
pub fn legacy_policy(
    value: &str,
) -> Result<(TopologyManagerPolicy, TopologyManagerScope), AttributeError> {
    use TopologyManagerPolicy as P;
    use TopologyManagerScope as S;
    match value {
        "SingleNUMANodeContainerLevel" => Ok((P::SingleNumaNode, S::Container)),
        "SingleNUMANodePodLevel" => Ok((P::SingleNumaNode, S::Pod)),
        "Restricted" | "RestrictedContainerLevel" => Ok((P::Restricted, S::Container)),
        "RestrictedPodLevel" => Ok((P::Restricted, S::Pod)),
        "BestEffort" | "BestEffortContainerLevel" => Ok((P::BestEffort, S::Container)),
        "BestEffortPodLevel" => Ok((P::BestEffort, S::Pod)),
        "None" => Ok((P::None, S::Container)),
        _ => Err(AttributeError::UnknownValue {
            attribute: TOPOLOGY_POLICIES_FIRST,
            value: value.to_owned(),
            expected: "SingleNUMANodeContainerLevel, SingleNUMANodePodLevel, Restricted, \
                       RestrictedContainerLevel, RestrictedPodLevel, BestEffort, \
                       BestEffortContainerLevel, BestEffortPodLevel, None",
        }),
    }
}

impl NodeResourceTopology {
    /// The node's Topology Manager configuration; see [`TopologyManagerConfig::from_nrt`].
    pub fn topology_manager_config(&self) -> Result<TopologyManagerConfig, AttributeError> {
        TopologyManagerConfig::from_nrt(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nrt::attributes::tests::nrt;

    fn config(policy: TopologyManagerPolicy, scope: TopologyManagerScope) -> TopologyManagerConfig {
        TopologyManagerConfig {
            policy,
            scope,
            max_numa_nodes: DEFAULT_MAX_NUMA_NODES,
        }
    }

    #[test]
    fn legacy_policies_map_to_policy_and_scope() {
        use TopologyManagerPolicy as P;
        use TopologyManagerScope as S;
        let cases = [
            (
                "SingleNUMANodeContainerLevel",
                P::SingleNumaNode,
                S::Container,
            ),
            ("SingleNUMANodePodLevel", P::SingleNumaNode, S::Pod),
            ("Restricted", P::Restricted, S::Container),
            ("RestrictedContainerLevel", P::Restricted, S::Container),
            ("RestrictedPodLevel", P::Restricted, S::Pod),
            ("BestEffort", P::BestEffort, S::Container),
            ("BestEffortContainerLevel", P::BestEffort, S::Container),
            ("BestEffortPodLevel", P::BestEffort, S::Pod),
            ("None", P::None, S::Container),
        ];
        for (legacy, policy, scope) in cases {
            assert_eq!(
                nrt(&[legacy], &[]).topology_manager_config(),
                Ok(config(policy, scope))
            );
        }
    }

    #[test]
    fn attributes_override_the_legacy_field() {
        let node = nrt(
            &["BestEffortContainerLevel"],
            &[
                (TOPOLOGY_MANAGER_POLICY, "single-numa-node"),
                (TOPOLOGY_MANAGER_SCOPE, "pod"),
                (TOPOLOGY_MANAGER_MAX_NUMA_NODES, "16"),
            ],
        );
        let got = node.topology_manager_config().unwrap();
        assert_eq!(got.policy, TopologyManagerPolicy::SingleNumaNode);
        assert_eq!(got.scope, TopologyManagerScope::Pod);
        assert_eq!(got.max_numa_nodes, 16);
        // A partial override keeps the rest of the legacy value.
        let node = nrt(
            &["RestrictedPodLevel"],
            &[(TOPOLOGY_MANAGER_POLICY, "best-effort")],
        );
        assert_eq!(
            node.topology_manager_config(),
            Ok(config(
                TopologyManagerPolicy::BestEffort,
                TopologyManagerScope::Pod
            ))
        );
        assert_eq!(
            nrt(&[], &[]).topology_manager_config(),
            Ok(TopologyManagerConfig::default())
        );
    }

    #[test]
    fn unknown_values_name_attribute_and_value() {
        // (topologyPolicies, attributes, field named in the error, value named in it)
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case] = &[
            (
                &["SingleNUMANode"],
                &[],
                TOPOLOGY_POLICIES_FIRST,
                "SingleNUMANode",
            ),
            (
                &[],
                &[(TOPOLOGY_MANAGER_POLICY, "Single-NUMA-Node")],
                TOPOLOGY_MANAGER_POLICY,
                "Single-NUMA-Node",
            ),
            (
                &[],
                &[(TOPOLOGY_MANAGER_SCOPE, "node")],
                TOPOLOGY_MANAGER_SCOPE,
                "node",
            ),
            (
                &[],
                &[(TOPOLOGY_MANAGER_MAX_NUMA_NODES, "0")],
                TOPOLOGY_MANAGER_MAX_NUMA_NODES,
                "0",
            ),
            (
                &[],
                &[(TOPOLOGY_MANAGER_MAX_NUMA_NODES, "eight")],
                TOPOLOGY_MANAGER_MAX_NUMA_NODES,
                "eight",
            ),
        ];
        for &(policies, attributes, attribute, value) in cases {
            let err = nrt(policies, attributes)
                .topology_manager_config()
                .unwrap_err();
            let message = err.to_string();
            assert!(
                message.contains(attribute) && message.contains(&format!("{value:?}")),
                "{message}"
            );
        }
    }

    #[test]
    fn kubelet_names_round_trip() {
        use TopologyManagerPolicy as P;
        for policy in [P::None, P::BestEffort, P::Restricted, P::SingleNumaNode] {
            assert_eq!(policy.as_str().parse(), Ok(policy));
            assert_eq!(policy.to_string(), policy.as_str());
        }
        for scope in [TopologyManagerScope::Container, TopologyManagerScope::Pod] {
            assert_eq!(scope.as_str().parse(), Ok(scope));
        }
    }
}
