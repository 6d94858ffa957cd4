//! Well-known top-level NRT attributes and typed readers for them.
//!
//! Writers publish node-wide facts as name/value attributes: the Topology Manager
//! configuration (read by [`super::topology_manager`]) and the pod-set fingerprint with
//! the method that produced it (read here). The fingerprint is looked up in its
//! attribute first and in the legacy annotation second. Unknown values are errors that
//! name the attribute and the value.

use super::v1alpha2::NodeResourceTopology;
use crate::fingerprint::Method;

/// Attribute holding the kubelet Topology Manager policy.
pub const TOPOLOGY_MANAGER_POLICY: &str = "topologyManagerPolicy";
/// Attribute holding the kubelet Topology Manager scope.
pub const TOPOLOGY_MANAGER_SCOPE: &str = "topologyManagerScope";
/// Attribute holding the most NUMA nodes the Topology Manager considers.
pub const TOPOLOGY_MANAGER_MAX_NUMA_NODES: &str = "topologyManagerMaxNUMANodes";
/// Attribute holding the pod-set fingerprint.
pub const NODE_TOPOLOGY_PODS_FINGERPRINT: &str = "nodeTopologyPodsFingerprint";
/// Attribute naming which pods the fingerprint covers.
pub const NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD: &str = "nodeTopologyPodsFingerprintMethod";
/// Attribute listing the `namespace/name` globs of the pods the fingerprint leaves out,
/// separated by spaces (written only when there are some).
pub const NODE_TOPOLOGY_PODS_FINGERPRINT_EXCLUDE: &str = "nodeTopologyPodsFingerprintExclude";
/// Legacy annotation holding the pod-set fingerprint, read when the attribute is absent.
pub const FINGERPRINT_ANNOTATION: &str = "topology.node.k8s.io/fingerprint";
/// How [`TopologyManagerConfig::from_nrt`](super::topology_manager::TopologyManagerConfig::from_nrt)
/// names the deprecated `topologyPolicies` field in errors.
pub const TOPOLOGY_POLICIES_FIRST: &str = "topologyPolicies[0]";
/// Max NUMA nodes assumed when the attribute is absent.
pub const DEFAULT_MAX_NUMA_NODES: u32 = 8;
/// The node's kubelet version as its Node object reports it
/// (`status.nodeInfo.kubeletVersion`, e.g. `v1.36.3`): readers apply that kubelet
/// minor's placement rules.
pub const KUBELET_VERSION: &str = "kubeletVersion";

/// A well-known attribute with a value this crate does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    /// The value is not one of the known names.
    #[error("{attribute} has unknown value {value:?}; expected one of {expected}")]
    UnknownValue {
        /// Attribute (or field) name.
        attribute: &'static str,
        /// The value found.
        value: String,
        /// The accepted values, for the message.
        expected: &'static str,
    },
    /// The value should be a positive integer.
    #[error("{attribute} has invalid value {value:?}; expected a positive integer")]
    NotPositiveInteger {
        /// Attribute name.
        attribute: &'static str,
        /// The value found.
        value: String,
    },
}

/// The minor of a kubelet version (`v1.36.3`, `1.36`, `v1.37.0-alpha.1+abc`); `None`
/// for anything else or a major other than 1.
pub fn kubelet_minor(version: &str) -> Option<u32> {
    let rest = version.trim().strip_prefix('v').unwrap_or(version.trim());
    let mut parts = rest.split('.');
    (parts.next()? == "1").then_some(())?;
    let minor = parts.next()?;
    let digits: &str = &minor[..minor
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(minor.len())];
    digits.parse().ok()
}

impl NodeResourceTopology {
    /// The minor of the kubelet version its writer published (`kubeletVersion`), if
    /// any and well-formed.
    pub fn kubelet_minor(&self) -> Option<u32> {
        self.attribute(KUBELET_VERSION).and_then(kubelet_minor)
    }

    /// The value of the first top-level attribute called `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }

    /// The published pod-set fingerprint: the `nodeTopologyPodsFingerprint` attribute,
    /// else the legacy `topology.node.k8s.io/fingerprint` annotation. Empty values count
    /// as absent.
    pub fn pods_fingerprint(&self) -> Option<&str> {
        let annotation = || {
            self.metadata
                .annotations
                .as_ref()?
                .get(FINGERPRINT_ANNOTATION)
                .map(String::as_str)
        };
        self.attribute(NODE_TOPOLOGY_PODS_FINGERPRINT)
            .filter(|v| !v.is_empty())
            .or_else(|| annotation().filter(|v| !v.is_empty()))
    }

    /// The `namespace/name` globs of the pods the published fingerprint leaves out
    /// (the `nodeTopologyPodsFingerprintExclude` attribute); none when it is absent.
    pub fn pods_fingerprint_exclude(&self) -> Vec<&str> {
        self.attribute(NODE_TOPOLOGY_PODS_FINGERPRINT_EXCLUDE)
            .map(|v| v.split_whitespace().collect())
            .unwrap_or_default()
    }

    /// Which pods the published fingerprint covers; [`Method::All`] when the
    /// `nodeTopologyPodsFingerprintMethod` attribute is absent.
    pub fn pods_fingerprint_method(&self) -> Result<Method, AttributeError> {
        match self.attribute(NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD) {
            None => Ok(Method::All),
            Some(value) => value.parse().map_err(|_| AttributeError::UnknownValue {
                attribute: NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD,
                value: value.to_owned(),
                expected: "all, with-exclusive-resources",
            }),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::nrt::v1alpha2::AttributeInfo;

    /// An object for node `worker` with these policies and attributes.
    pub(crate) fn nrt(policies: &[&str], attributes: &[(&str, &str)]) -> NodeResourceTopology {
        NodeResourceTopology {
            topology_policies: policies.iter().map(|p| p.to_string()).collect(),
            attributes: attributes
                .iter()
                .map(|&(n, v)| AttributeInfo::new(n, v))
                .collect(),
            ..NodeResourceTopology::new("worker")
        }
    }

    #[test]
    fn fingerprint_from_attribute_then_annotation() {
        let mut node = nrt(&[], &[]);
        assert_eq!(node.pods_fingerprint(), None);
        node.metadata.annotations = Some(BTreeMap::from([(
            FINGERPRINT_ANNOTATION.to_owned(),
            "pfp0v001aaaa".to_owned(),
        )]));
        assert_eq!(node.pods_fingerprint(), Some("pfp0v001aaaa"));
        node.attributes
            .push(AttributeInfo::new(NODE_TOPOLOGY_PODS_FINGERPRINT, ""));
        assert_eq!(node.pods_fingerprint(), Some("pfp0v001aaaa"));
        node.attributes[0].value = "pfp0v001bbbb".into();
        assert_eq!(node.pods_fingerprint(), Some("pfp0v001bbbb"));
    }

    #[test]
    fn fingerprint_method() {
        assert_eq!(nrt(&[], &[]).pods_fingerprint_method(), Ok(Method::All));
        let exclusive = nrt(
            &[],
            &[(
                NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD,
                "with-exclusive-resources",
            )],
        );
        assert_eq!(
            exclusive.pods_fingerprint_method(),
            Ok(Method::WithExclusiveResources)
        );
        let err = nrt(&[], &[(NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD, "some")])
            .pods_fingerprint_method()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains(NODE_TOPOLOGY_PODS_FINGERPRINT_METHOD),
            "{err}"
        );
    }

    #[test]
    fn kubelet_minors_are_read_from_versions() {
        assert_eq!(kubelet_minor("v1.36.3"), Some(36));
        assert_eq!(kubelet_minor("1.34"), Some(34));
        assert_eq!(kubelet_minor("v1.37.0-alpha.1+abc"), Some(37));
        assert_eq!(kubelet_minor("v2.0.0"), None);
        assert_eq!(kubelet_minor("fake"), None);
        assert_eq!(kubelet_minor("v1."), None);
    }
}
