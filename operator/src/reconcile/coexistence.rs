//! What the NodeResourceTopology objects and CRD say beyond freshness: the node agents'
//! reports on the kubelet configuration, and who else writes NRT (other publishers
//! such as node-feature-discovery's topology-updater, or another installer of the CRD).
//!
//! ```text
//! NRT objects ─┬─ tas.dev/kubelet-config-* annotations ─► kubeletConfigIssues (ConfigUnreadable)
//!              ├─ topologyManagerPolicy = none ──────────► kubeletConfigIssues (PolicyNone)
//!              └─ managedFields: other writers ─────────► foreignNRTWriters
//! NRT CRD ──── managedFields: other spec managers ──────► nrtCRD.foreignManagers
//!                                                        └─► NRTOwnership condition
//! ```
//!
//! Everything here is pure: it reads objects from the operator's caches.

use super::conditions::{AS_EXPECTED, Decided, name_some};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::collections::{BTreeMap, BTreeSet};
use tas_api::nrt::agent_report::AgentReport;
use tas_api::nrt::attributes::TOPOLOGY_MANAGER_POLICY;
use tas_api::nrt::ownership::{foreign_crd_managers, foreign_nrt_writers};
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::tas::status::condition_type::NRT_OWNERSHIP;
use tas_api::tas::{ForeignNrtWriter, KubeletConfigIssue, NrtCrdSpec};

/// Field manager of the node agents' writes.
pub const UPDATER_FIELD_MANAGER: &str = "tas-updater";
/// `kubeletConfigIssues[].reason`: the agent cannot read the configuration.
pub const CONFIG_UNREADABLE: &str = "ConfigUnreadable";
/// `kubeletConfigIssues[].reason`: the Topology Manager policy is `none`.
pub const POLICY_NONE: &str = "PolicyNone";
/// `NRTOwnership=False`: another manager manages the CRD and TAS leaves it alone.
pub const CRD_MANAGED_BY_OTHER: &str = "CRDManagedByOther";
/// `NRTOwnership=False`: other writers publish some nodes' NRT objects.
pub const NRT_WRITTEN_BY_OTHER: &str = "NRTWrittenByOther";
/// `NRTOwnership=True`: TAS applies the CRD over another manager (`takeOver`).
pub const CRD_TAKEN_OVER: &str = "CRDTakenOver";
/// At most this many nodes are listed per group and per list.
pub const MAX_LISTED: usize = 20;

/// What one node's NRT object says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeReport {
    /// The agent's problem with the kubelet configuration, or a `none` policy.
    pub issue: Option<KubeletConfigIssue>,
    /// Field managers other than the agents that write the object.
    pub foreign_writers: Vec<String>,
}

/// Per node, from the NRT objects.
pub fn node_reports<'a>(
    nrts: impl IntoIterator<Item = &'a NodeResourceTopology>,
) -> BTreeMap<String, NodeReport> {
    nrts.into_iter()
        .filter_map(|nrt| {
            let node = nrt.metadata.name.clone()?;
            let report = AgentReport::from_annotations(nrt.metadata.annotations.as_ref());
            let path = report.source.clone().unwrap_or_default();
            let issue = if let Some(problem) = report.problem {
                Some(KubeletConfigIssue {
                    node: node.clone(),
                    reason: CONFIG_UNREADABLE.to_owned(),
                    path,
                    message: problem,
                })
            } else if report.source.is_some() && nrt.attribute(TOPOLOGY_MANAGER_POLICY) == Some("none") {
                Some(KubeletConfigIssue {
                    node: node.clone(),
                    reason: POLICY_NONE.to_owned(),
                    path,
                    message: "the kubelet's Topology Manager policy is none: it aligns nothing to NUMA zones on this node; configure the kubelet, or set the node group's topologyManager if the kubelet is configured by flags".to_owned(),
                })
            } else {
                None
            };
            let foreign_writers = foreign_nrt_writers(&nrt.metadata, UPDATER_FIELD_MANAGER);
            Some((node, NodeReport { issue, foreign_writers }))
        })
        .collect()
}

/// The issues and foreign writers of the nodes of one group (at most [`MAX_LISTED`]
/// each, in node order).
pub fn for_group(
    nodes: &BTreeSet<String>,
    reports: &BTreeMap<String, NodeReport>,
) -> (Vec<KubeletConfigIssue>, Vec<ForeignNrtWriter>) {
    let mine = || nodes.iter().filter_map(|n| reports.get(n).map(|r| (n, r)));
    let issues = mine()
        .filter_map(|(_, r)| r.issue.clone())
        .take(MAX_LISTED)
        .collect();
    let foreign = mine()
        .filter(|(_, r)| !r.foreign_writers.is_empty())
        .map(|(n, r)| ForeignNrtWriter {
            node: n.clone(),
            field_managers: r.foreign_writers.clone(),
        })
        .take(MAX_LISTED)
        .collect();
    (issues, foreign)
}

/// Field managers other than the operator that manage the CRD's spec.
pub fn crd_foreign_managers(crd: Option<&CustomResourceDefinition>, ours: &str) -> Vec<String> {
    crd.map(|c| foreign_crd_managers(&c.metadata, ours))
        .unwrap_or_default()
}

/// Whether the operator leaves the CRD alone this reconcile: it manages it, but another
/// manager does too and `takeOver` is off.
pub fn yields_crd(spec: &NrtCrdSpec, foreign: &[String]) -> bool {
    spec.manage && !spec.take_over && !foreign.is_empty()
}

/// `NRTOwnership`.
pub fn ownership(
    spec: &NrtCrdSpec,
    crd_foreign: &[String],
    writers: &[ForeignNrtWriter],
) -> Decided {
    if yields_crd(spec, crd_foreign) {
        return decided(
            false,
            CRD_MANAGED_BY_OTHER,
            format!(
                "the NodeResourceTopology CRD is managed by {}: the operator does not force over it; set spec.nrtCRD.manage to false to leave it to them, or spec.nrtCRD.takeOver to true to manage it",
                crd_foreign.join(", ")
            ),
        );
    }
    if !writers.is_empty() {
        let managers: BTreeSet<&str> = writers
            .iter()
            .flat_map(|w| w.field_managers.iter().map(String::as_str))
            .collect();
        let nodes: Vec<String> = writers.iter().map(|w| w.node.clone()).collect();
        return decided(
            false,
            NRT_WRITTEN_BY_OTHER,
            format!(
                "{} also write{} NodeResourceTopology objects, of node(s) {}: node agents leave them alone unless their node group sets updater.takeOverNRT; see status.nodeGroups[].foreignNRTWriters",
                managers.iter().copied().collect::<Vec<_>>().join(", "),
                if managers.len() == 1 { "s" } else { "" },
                name_some(&nodes, 5)
            ),
        );
    }
    if spec.manage && !crd_foreign.is_empty() {
        return decided(
            true,
            CRD_TAKEN_OVER,
            format!(
                "spec.nrtCRD.takeOver: the operator applies the NodeResourceTopology CRD over {}",
                crd_foreign.join(", ")
            ),
        );
    }
    let who = if spec.manage {
        "the operator manages the NodeResourceTopology CRD"
    } else if crd_foreign.is_empty() {
        "the NodeResourceTopology CRD is left to another tool"
    } else {
        "the NodeResourceTopology CRD is left to its manager"
    };
    let message = if crd_foreign.is_empty() || spec.manage {
        format!("{who}; only TAS node agents write the objects of the selected nodes")
    } else {
        format!(
            "{who} ({}); only TAS node agents write the objects of the selected nodes",
            crd_foreign.join(", ")
        )
    };
    decided(true, AS_EXPECTED, message)
}

fn decided(status: bool, reason: &str, message: String) -> Decided {
    Decided {
        type_: NRT_OWNERSHIP,
        status,
        reason: reason.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests;
