//! `kubectl tas status`: the stack object's conditions, the NRT CRD, the scheduler, and
//! per node group how many nodes have a fresh NodeResourceTopology and which are stale.

use serde::Serialize;
use tas_api::tas::{
    Condition, NodeGroupStatus, NrtCrdStatus, SchedulerStatus, TopologyAwareScheduling,
};

use crate::render::Table;

/// What `status` shows.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// Whether the `TopologyAwareScheduling` object exists.
    pub found: bool,
    /// Its `metadata.generation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The generation the status describes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Namespace of the operands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `Available`, `Progressing`, `Degraded`.
    pub conditions: Vec<Condition>,
    /// The NRT CRD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nrt_crd: Option<NrtCrdStatus>,
    /// The scheduler Deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerStatus>,
    /// Nodes selected by the node groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_nodes: Option<i32>,
    /// Of which with a fresh NRT.
    #[serde(rename = "nodesWithFreshNRT", skip_serializing_if = "Option::is_none")]
    pub nodes_with_fresh_nrt: Option<i32>,
    /// Per node group: nodes, ready agents, fresh NRTs, stale nodes.
    pub node_groups: Vec<NodeGroupStatus>,
}

impl StatusReport {
    /// The report of `stack` (absent: `found: false`).
    pub fn build(stack: Option<&TopologyAwareScheduling>) -> Self {
        let Some(stack) = stack else {
            return Self {
                found: false,
                generation: None,
                observed_generation: None,
                namespace: None,
                conditions: Vec::new(),
                nrt_crd: None,
                scheduler: None,
                desired_nodes: None,
                nodes_with_fresh_nrt: None,
                node_groups: Vec::new(),
            };
        };
        let status = stack.status.clone().unwrap_or_default();
        Self {
            found: true,
            generation: stack.metadata.generation,
            observed_generation: status.observed_generation,
            namespace: Some(stack.spec.namespace.clone()),
            conditions: status.conditions,
            nrt_crd: status.nrt_crd,
            scheduler: status.scheduler,
            desired_nodes: status.desired_nodes,
            nodes_with_fresh_nrt: status.nodes_with_fresh_nrt,
            node_groups: status.node_groups,
        }
    }

    /// Plain aligned text.
    pub fn render(&self) -> String {
        if !self.found {
            return "TopologyAwareScheduling default not found: the stack is not installed \
                    (kubectl apply -f config/samples/).\n"
                .to_owned();
        }
        let opt = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
        let mut out = format!(
            "TopologyAwareScheduling default (generation {}, status of generation {}), operands in {}\n\n",
            opt(self.generation),
            opt(self.observed_generation),
            self.namespace.as_deref().unwrap_or("-"),
        );
        let mut conditions = Table::new(&["CONDITION", "STATUS", "REASON", "SINCE", "MESSAGE"]);
        for c in &self.conditions {
            conditions.row(vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.last_transition_time.0.to_string(),
                c.message.clone(),
            ]);
        }
        if self.conditions.is_empty() {
            out.push_str("No conditions yet: the operator has not reconciled the object.\n");
        } else {
            out.push_str(&conditions.render(0));
        }
        out.push('\n');
        if let Some(crd) = &self.nrt_crd {
            out.push_str(&format!(
                "NRT CRD:    {}{}, served {}, storage {}\n",
                if crd.installed {
                    "installed"
                } else {
                    "not installed"
                },
                if crd.managed {
                    " (managed by the operator)"
                } else {
                    ""
                },
                if crd.served_versions.is_empty() {
                    "-".to_owned()
                } else {
                    crd.served_versions.join(",")
                },
                crd.storage_version.as_deref().unwrap_or("-"),
            ));
        }
        if let Some(s) = &self.scheduler {
            out.push_str(&format!(
                "Scheduler:  {} ({}/{} replicas ready)\n",
                s.scheduler_name, s.ready_replicas, s.replicas
            ));
        }
        out.push_str(&format!(
            "Nodes:      {} selected, {} with a fresh NodeResourceTopology\n\n",
            self.desired_nodes.unwrap_or(0),
            self.nodes_with_fresh_nrt.unwrap_or(0)
        ));
        let mut groups =
            Table::new(&["GROUP", "NODES", "AGENTS-READY", "FRESH-NRT", "STALE-NODES"]);
        for g in &self.node_groups {
            groups.row(vec![
                g.name.clone(),
                g.desired_nodes.to_string(),
                g.ready_nodes.to_string(),
                g.nodes_with_fresh_nrt.to_string(),
                if g.stale_nodes.is_empty() {
                    "-".to_owned()
                } else {
                    g.stale_nodes.join(",")
                },
            ]);
        }
        out.push_str(&groups.render(0));
        out
    }
}
