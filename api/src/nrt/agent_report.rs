//! What the TAS node agent says about its own view of the node, as annotations on the
//! NodeResourceTopology it publishes, for the operator to summarise in the
//! TopologyAwareScheduling status. Other NRT readers ignore them.

use std::collections::BTreeMap;

/// Where the agent read the kubelet's configuration: host paths joined by `, `, or
/// `/configz`.
pub const KUBELET_CONFIG_SOURCE: &str = "tas.dev/kubelet-config-source";
/// Set while the kubelet's configuration cannot be read or parsed: what is wrong,
/// naming the file. The object then holds the last settings the agent could read.
pub const KUBELET_CONFIG_PROBLEM: &str = "tas.dev/kubelet-config-problem";

/// Set while the agent cannot observe its node (the kubelet's podresources API or sysfs
/// unreadable): the error, naming what failed. The zones are then the last ones
/// published. Written apart from the agent's applies (its own field manager) and
/// removed after the next successful publish.
pub const AGENT_PROBLEM: &str = "tas.dev/agent-problem";

/// The agent's report, read back from an object's annotations.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentReport {
    /// [`KUBELET_CONFIG_SOURCE`].
    pub source: Option<String>,
    /// [`KUBELET_CONFIG_PROBLEM`].
    pub problem: Option<String>,
}

impl AgentReport {
    /// The report in `annotations` (absent ones are `None`).
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> Self {
        let get = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
        Self {
            source: get(KUBELET_CONFIG_SOURCE),
            problem: get(KUBELET_CONFIG_PROBLEM),
        }
    }

    /// The annotations saying this report.
    pub fn to_annotations(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(source) = &self.source {
            out.insert(KUBELET_CONFIG_SOURCE.to_owned(), source.clone());
        }
        if let Some(problem) = &self.problem {
            out.insert(KUBELET_CONFIG_PROBLEM.to_owned(), problem.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let report = AgentReport {
            source: Some("/etc/kubernetes/kubelet.conf".into()),
            problem: Some("bad".into()),
        };
        let annotations = report.to_annotations();
        assert_eq!(AgentReport::from_annotations(Some(&annotations)), report);
        assert_eq!(AgentReport::from_annotations(None), AgentReport::default());
    }
}
