//! The filter phase on one node: every filter in kube-scheduler's order (the first
//! failure is the node's reason, kept as a code), then the NUMA fit of the node's
//! Topology Manager policy and scope, and the node-local score of a node that passes.

use tas_api::tas::NodesWithoutTopology;

use super::score::{Scored, node_resource_score};
use super::{
    CycleSettings, INVALID_TOPOLOGY, NO_TOPOLOGY, PodInput, PreFilter, TopologyView,
    UNPUBLISHED_TOPOLOGY,
};
use crate::filter::{self, NodeInfo};
use crate::numa::{self, NodeTopology, PodRequest};

/// Every filter on one node and its node-local score, without rendering anything:
/// the hot path of a decision. The node's topology view is looked up (`view`) only
/// once the node-level and cluster-wide filters pass.
pub(super) fn check_node(
    pod: &PodInput,
    node: &NodeInfo,
    pre: Option<&PreFilter<'_>>,
    view: impl FnOnce() -> TopologyView,
    s: &CycleSettings,
    rotation: u64,
) -> Result<Scored, Reject> {
    filter::filter_node(&pod.filter, node).map_err(Reject::Filter)?;
    if let Some(pre) = pre {
        pre.check(node).map_err(Reject::Text)?;
    }
    let config = numa::node_strategy::config_for(node.name(), node.numa_strategy(), &s.score);
    let mut zones = None;
    let numa_score = match view() {
        TopologyView::Known(topo) => {
            zones = numa_check(&topo, &pod.request, node)
                .map_err(Reject::Numa)?
                .zones;
            numa::score(&topo, &pod.request, &config)
        }
        TopologyView::Invalid(_) => return Err(Reject::Text(INVALID_TOPOLOGY)),
        TopologyView::Unpublished if numa_sensitive(&pod.request) => {
            return Err(Reject::Text(UNPUBLISHED_TOPOLOGY));
        }
        TopologyView::Missing | TopologyView::Unpublished => match s.nodes_without_topology {
            NodesWithoutTopology::Schedule => 0,
            NodesWithoutTopology::Skip => return Err(Reject::Text(NO_TOPOLOGY)),
        },
    };
    let dra_bonus = match &pod.dra {
        Some(dra) => dra.fit(node, zones).map_err(Reject::Dra)?.outcome.bonus(),
        None => 0,
    };
    let node_score = node_resource_score(pod, node, &config);
    Ok(Scored {
        // Devices lined up with the pod's zones first, then NUMA alignment; node-level
        // balance breaks near-ties.
        score: dra_bonus + u32::from(numa_score) * 2 + node_score,
        tie: super::tie::tie(rotation, node.name()),
        zones,
    })
}

/// Why a node was rejected, kept as it came from the filter (the NUMA fit's reason as
/// codes); rendered to text only when the pod fits nowhere.
#[derive(Debug)]
pub(super) enum Reject {
    Filter(filter::FilterReason),
    Numa(numa::UnfitCode),
    Text(&'static str),
    /// The pod's claims cannot be allocated on the node (rendered: it is rare).
    Dra(String),
}

impl Reject {
    /// The reason's text; `pod` is the pod the node was judged for.
    pub(super) fn render(&self, pod: &PodRequest) -> String {
        match self {
            Self::Filter(r) => r.to_string(),
            Self::Numa(code) => code.render(pod).to_string(),
            Self::Text(t) => (*t).to_owned(),
            Self::Dra(t) => t.clone(),
        }
    }
}

/// Whether the kubelet may pin part of this pod to NUMA zones (exclusive CPUs,
/// hugepages, devices): such a pod never goes to a TAS node without its topology.
pub fn numa_sensitive(request: &PodRequest) -> bool {
    crate::cache::holds_exclusive_resources(request)
}

/// The allocation of the pod's claims on `node` as the filter found it (the NUMA
/// fit's zones first): `None` for a pod without claims.
pub fn dra_choice(
    pod: &PodInput,
    node: &NodeInfo,
    view: TopologyView,
) -> Option<Result<super::dra::DraChoice, String>> {
    let dra = pod.dra.as_ref()?;
    let zones = match view {
        TopologyView::Known(topo) => match numa_check(&topo, &pod.request, node) {
            Ok(placement) => placement.zones,
            Err(code) => return Some(Err(code.render(&pod.request).to_string())),
        },
        _ => None,
    };
    Some(dra.fit(node, zones))
}

/// The NUMA fit of `request` on `topology`, the node-level resources judged from
/// `node`'s allocatable.
pub fn numa_fit(
    topology: &NodeTopology,
    request: &PodRequest,
    node: &NodeInfo,
) -> Result<numa::Placement, numa::Unfit> {
    numa::fit(topology, request, &node_level(node))
}

/// Whether `node` accounts resource `r` at node level (the NUMA fit then judges only
/// the zones' share of it): a core resource, or any its allocatable lists.
fn node_level(node: &NodeInfo) -> impl Fn(&str) -> bool + '_ {
    |r: &str| node.allocatable().resources.scalar(r) > 0 || is_core(r)
}

/// [`numa_fit`] without the per-container zones, the reason kept as codes: the
/// filter's check.
fn numa_check(
    topology: &NodeTopology,
    request: &PodRequest,
    node: &NodeInfo,
) -> Result<numa::Placement, numa::UnfitCode> {
    numa::fits(topology, request, &node_level(node))
}

fn is_core(r: &str) -> bool {
    matches!(r, "cpu" | "memory" | "ephemeral-storage")
}
