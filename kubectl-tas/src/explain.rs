//! `kubectl tas explain POD`: per node, whether the pod fits and why not, judged by the
//! scheduler's own code — the node-level filters, topology spread, inter-pod affinity
//! and the NUMA fit of the node's Topology Manager policy and scope
//! ([`tas_scheduler::cycle::score_node_in`]) — on the scheduler's view of each node
//! (the NRT with the scheduler's reservations subtracted, see [`crate::cluster`]); plus,
//! per NUMA zone, what is free against what the pod needs aligned, and the node's DRA
//! devices per driver and zone as the scheduler counts them. A pod's resource claims
//! are not judged here (their allocation needs the claims, classes and slices the
//! scheduler watches): the report says so, and the pod's Events carry the scheduler's
//! reasons.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;
use tas_api::nrt::TopologyManagerScope;
use tas_api::tas::NodesWithoutTopology;
use tas_scheduler::affinity::NamespaceLabels;
use tas_scheduler::cache::numa_footprint;
use tas_scheduler::cycle::{
    ClusterView, CycleSettings, PodInput, PreFilter, TopologyView, score_node_in,
};
use tas_scheduler::debug::{DraDevices, Reservation};
use tas_scheduler::filter::{NodeInfo, PodFilterInput, filter_node};
use tas_scheduler::numa::{Amount, NodeTopology, PodRequest, ResourceKind, ScoreConfig};
use tas_scheduler::state::ClusterState;

use crate::cluster::{ClusterRead, bound_pods};
use crate::error::Error;
use crate::render::Table;

/// What `explain` shows.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExplainReport {
    /// `namespace/name`.
    pub pod: String,
    /// The pod's `spec.schedulerName`.
    pub scheduler_name: String,
    /// The pod's QoS class.
    pub qos: String,
    /// The node the pod is bound to, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_to: Option<String>,
    /// Why the scheduler's reservations could not be read, if they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_error: Option<String>,
    /// Nodes that fit.
    pub feasible: usize,
    /// The pod's resource claims (`spec.resourceClaims` names), not judged here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<String>,
    /// Every node, by name.
    pub nodes: Vec<NodeExplain>,
}

/// One node's verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeExplain {
    /// Node name.
    pub node: String,
    /// Whether the scheduler would consider the node feasible.
    pub fits: bool,
    /// The scheduler's reason when it does not (the `FailedScheduling` text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether the node passed every filter before the NUMA fit (node resources,
    /// taints, affinity, spread...): only then do its zones decide.
    pub node_level_fit: bool,
    /// Topology Manager policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Topology Manager scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The scheduler's view is the NRT as published; absent when it did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    /// Reservations the scheduler holds on zones of the node.
    pub reservations: Vec<Reservation>,
    /// Per NUMA zone: free against needed, per aligned resource.
    pub zones: Vec<ZoneNeeds>,
    /// The node's DRA devices per driver and zone, as the scheduler counts them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dra_devices: Vec<DraDevices>,
}

/// One zone against the pod's aligned needs.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ZoneNeeds {
    /// `node-<id>`.
    pub zone: String,
    /// NUMA id.
    pub numa_id: u32,
    /// Per aligned resource.
    pub resources: Vec<Need>,
    /// One line: "node-0: cpu 6 free < 8 needed (short 2); memory 16Gi free >= 1Gi needed".
    pub summary: String,
}

/// One resource of a zone against the pod's need (scheduler units).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Need {
    /// Resource name.
    pub resource: String,
    /// Free in the scheduler's view.
    pub free: i64,
    /// Needed in one zone: the pod's aligned amount (`pod` scope) or the largest
    /// container's (`container` scope).
    pub need: i64,
    /// `free >= need`.
    pub enough: bool,
}

/// Reads the pod and the cluster and judges every node.
pub async fn explain(
    client: &Client,
    namespace: &str,
    pod_name: &str,
    cluster: &ClusterRead,
    nodes_without_topology: NodesWithoutTopology,
) -> Result<ExplainReport, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod = pods
        .get(pod_name)
        .await
        .map_err(Error::api(format!("reading pod {namespace}/{pod_name}")))?;
    let bound = bound_pods(client).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let labels: NamespaceLabels = match namespaces.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .map(|ns| (ns.name_any(), ns.metadata.labels.unwrap_or_default()))
            .collect(),
        // Without the right to list namespaces, selectors match by name only.
        Err(_) => NamespaceLabels::new(),
    };
    judge(&pod, &bound, &labels, cluster, nodes_without_topology)
}

/// Judges every node for `pod`: pure over what was read.
pub fn judge(
    pod: &Pod,
    bound: &[Pod],
    namespaces: &NamespaceLabels,
    cluster: &ClusterRead,
    nodes_without_topology: NodesWithoutTopology,
) -> Result<ExplainReport, Error> {
    let id = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    let parse_error = |e: &dyn std::fmt::Display| Error::Pod {
        pod: id.clone(),
        message: e.to_string(),
    };
    let request = PodRequest::from_pod(pod).map_err(|e| parse_error(&e))?;
    let input = PodInput {
        uid: pod.uid().unwrap_or_default(),
        filter: PodFilterInput::new(pod).map_err(|e| parse_error(&e))?,
        request,
        dra: None,
    };
    let mut state = ClusterState::default();
    for node in cluster.nodes.values() {
        state.upsert_node(node);
    }
    for p in bound {
        if p.uid() != pod.uid() {
            state.upsert_bound_pod(p);
        }
    }
    let mut infos: Vec<&NodeInfo> = state.nodes().collect();
    infos.sort_by(|a, b| a.name().cmp(b.name()));
    let view = ClusterView {
        nodes: &infos,
        namespaces,
    };
    let pre = PreFilter::prepare(&input, &view);
    let settings = CycleSettings {
        score: ScoreConfig::default(),
        nodes_without_topology,
        parallelism: 1,
        // Every node is judged one by one here; sampling never applies.
        sampling: tas_scheduler::cycle::Sampling::new(100),
    };
    let mut nodes = Vec::new();
    for info in &infos {
        let topology = cluster.view(info.name());
        let verdict = score_node_in(&input, info, &pre, topology_view(&topology), &settings);
        let node_level_fit = filter_node(&input.filter, info).is_ok() && pre.check(info).is_ok();
        let cached = cluster.cached(info.name());
        let known = topology.and_then(Result::ok);
        nodes.push(NodeExplain {
            node: info.name().to_owned(),
            fits: verdict.is_ok(),
            reason: verdict.err(),
            node_level_fit,
            policy: known.as_ref().map(|t| t.policy().to_string()),
            scope: known.as_ref().map(|t| t.scope().to_string()),
            confirmed: cached.map(|c| c.confirmed),
            reservations: cached.map(|c| c.reservations.clone()).unwrap_or_default(),
            zones: known
                .as_ref()
                .map(|t| zone_needs(t, &input.request))
                .unwrap_or_default(),
            dra_devices: cached.map(|c| c.dra_devices.clone()).unwrap_or_default(),
        });
    }
    Ok(ExplainReport {
        pod: id,
        scheduler_name: pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_default(),
        qos: format!("{:?}", input.request.qos()),
        bound_to: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        scheduler_error: cluster.scheduler.as_ref().err().cloned(),
        feasible: nodes.iter().filter(|n| n.fits).count(),
        resource_claims: pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect(),
        nodes,
    })
}

fn topology_view(
    topology: &Option<Result<NodeTopology, tas_scheduler::numa::TopologyError>>,
) -> TopologyView {
    match topology {
        None => TopologyView::Missing,
        Some(Ok(t)) => TopologyView::Known(Arc::new(t.clone())),
        Some(Err(e)) => TopologyView::Invalid(Arc::new(e.clone())),
    }
}

/// What one zone must hold, per resource the node's managers align: the pod-level
/// NUMA footprint in `pod` scope, the largest container's in `container` scope.
fn aligned_needs(topology: &NodeTopology, request: &PodRequest) -> BTreeMap<String, i64> {
    let aligned = |name: &str| match ResourceKind::of(name) {
        ResourceKind::Cpu => topology.static_cpus(),
        ResourceKind::Memory | ResourceKind::Hugepages => topology.static_memory(),
        ResourceKind::Device => true,
        ResourceKind::Unaligned => false,
    };
    let footprint = numa_footprint(request);
    let mut needs = BTreeMap::new();
    match topology.scope() {
        TopologyManagerScope::Pod => {
            for (name, amount) in footprint.iter() {
                needs.insert(name.to_owned(), amount);
            }
        }
        _ => {
            for c in request.containers() {
                for (name, amount) in c.resources.iter() {
                    let counted = footprint.get(name) > 0
                        && (ResourceKind::of(name) != ResourceKind::Cpu || c.exclusive_cpu);
                    if counted {
                        let n = needs.entry(name.to_owned()).or_insert(0);
                        *n = (*n).max(amount);
                    }
                }
            }
        }
    }
    needs.retain(|name, amount| aligned(name) && *amount > 0);
    needs
}

fn zone_needs(topology: &NodeTopology, request: &PodRequest) -> Vec<ZoneNeeds> {
    let needs = aligned_needs(topology, request);
    topology
        .numa_ids()
        .iter()
        .map(|&id| {
            let zone = format!("node-{id}");
            let resources: Vec<Need> = needs
                .iter()
                .map(|(name, &need)| {
                    let free = topology.available(id, name).unwrap_or(0);
                    Need {
                        resource: name.clone(),
                        free,
                        need,
                        enough: free >= need,
                    }
                })
                .collect();
            let parts: Vec<String> = resources.iter().map(need_text).collect();
            let summary = if parts.is_empty() {
                format!("{zone}: the pod needs nothing aligned")
            } else {
                format!("{zone}: {}", parts.join("; "))
            };
            ZoneNeeds {
                zone,
                numa_id: id,
                resources,
                summary,
            }
        })
        .collect()
}

fn show(resource: &str, value: i64) -> String {
    Amount {
        kind: ResourceKind::of(resource),
        value,
    }
    .to_string()
}

fn need_text(n: &Need) -> String {
    let (free, need) = (show(&n.resource, n.free), show(&n.resource, n.need));
    if n.enough {
        format!("{} {free} free >= {need} needed", n.resource)
    } else {
        format!(
            "{} {free} free < {need} needed (short {})",
            n.resource,
            show(&n.resource, n.need - n.free.max(0))
        )
    }
}

impl ExplainReport {
    /// Plain aligned text: a summary, then per node its verdict, policy and (for nodes
    /// that pass the node-level filters) zones.
    pub fn render(&self) -> String {
        let mut out = format!(
            "Pod {} (QoS {}, schedulerName {}): {}/{} nodes fit",
            self.pod,
            self.qos,
            self.scheduler_name,
            self.feasible,
            self.nodes.len()
        );
        if let Some(node) = &self.bound_to {
            out.push_str(&format!(", bound to {node}"));
        }
        out.push('\n');
        if let Some(e) = &self.scheduler_error {
            out.push_str(&format!(
                "warning: scheduler reservations unavailable ({e}): judged on the NRT objects alone\n"
            ));
        }
        if !self.resource_claims.is_empty() {
            out.push_str(&format!(
                "note: resource claims ({}) are not judged here; the scheduler allocates them on the zones of the pod's CPUs and explains in the pod's Events\n",
                self.resource_claims.join(", ")
            ));
        }
        for n in &self.nodes {
            out.push('\n');
            let verdict = match &n.reason {
                None => "fits".to_owned(),
                Some(r) => format!("does not fit: {r}"),
            };
            out.push_str(&format!("{}: {verdict}\n", n.node));
            if let (Some(p), Some(s)) = (&n.policy, &n.scope) {
                let view = match n.confirmed {
                    Some(true) => "the scheduler's view is the published NRT".to_owned(),
                    Some(false) => format!(
                        "the scheduler holds {} reservation(s) the NRT has not confirmed",
                        n.reservations.len()
                    ),
                    None => "the scheduler's view is unknown".to_owned(),
                };
                out.push_str(&format!("  topology manager {p}, scope {s}; {view}\n"));
            }
            for r in &n.reservations {
                let amounts: Vec<String> = r
                    .amounts
                    .iter()
                    .map(|(k, v)| format!("{k} {}", show(k, *v)))
                    .collect();
                let zones = match &r.zones {
                    Some(ids) => {
                        let names: Vec<String> =
                            ids.iter().map(|id| format!("node-{id}")).collect();
                        format!("on {}", names.join(", "))
                    }
                    None => "on every zone".to_owned(),
                };
                out.push_str(&format!(
                    "  reserved for {}/{}{}: {} {zones}\n",
                    r.namespace,
                    r.name,
                    if r.foreign {
                        " (not placed by TAS)"
                    } else {
                        ""
                    },
                    amounts.join(", ")
                ));
            }
            if !n.dra_devices.is_empty() {
                out.push_str(&format!("  DRA devices: {}\n", dra_text(&n.dra_devices)));
            }
            // A node refused before the NUMA fit: its zones do not matter.
            if n.node_level_fit && !n.zones.is_empty() {
                let mut table = Table::new(&["ZONE", "RESOURCE", "FREE", "NEED", ""]);
                for z in &n.zones {
                    for (i, r) in z.resources.iter().enumerate() {
                        table.row(vec![
                            if i == 0 {
                                z.zone.clone()
                            } else {
                                String::new()
                            },
                            r.resource.clone(),
                            show(&r.resource, r.free),
                            show(&r.resource, r.need),
                            if r.enough {
                                "ok".to_owned()
                            } else {
                                format!("short {}", show(&r.resource, r.need - r.free.max(0)))
                            },
                        ]);
                    }
                    if z.resources.is_empty() {
                        table.row(vec![z.zone.clone(), "-".into()]);
                    }
                }
                out.push_str(&table.render(2));
            }
        }
        out
    }
}

/// `gpu.example.com node-0: 1 free, 1 in use; node-1: 2 free` (zones without a NUMA
/// id as `no zone`).
fn dra_text(rows: &[DraDevices]) -> String {
    let mut drivers: Vec<String> = Vec::new();
    let mut last: Option<&str> = None;
    for row in rows {
        let zone = row
            .numa_id
            .map_or("no zone".to_owned(), |id| format!("node-{id}"));
        let mut counts = vec![format!("{} free", row.free)];
        if row.in_use > 0 {
            counts.push(format!("{} in use", row.in_use));
        }
        if row.unusable > 0 {
            counts.push(format!("{} unusable", row.unusable));
        }
        let part = format!("{zone}: {}", counts.join(", "));
        match (last, drivers.last_mut()) {
            (Some(d), Some(text)) if d == row.driver => text.push_str(&format!("; {part}")),
            _ => drivers.push(format!("{} {part}", row.driver)),
        }
        last = Some(&row.driver);
    }
    drivers.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dra_devices_read_per_driver_and_zone() {
        let row = |driver: &str, numa_id, free, in_use, unusable| DraDevices {
            driver: driver.into(),
            numa_id,
            free,
            in_use,
            unusable,
        };
        let rows = [
            row("gpu.example.com", Some(0), 1, 1, 0),
            row("gpu.example.com", Some(1), 2, 0, 0),
            row("nic.example.com", None, 0, 0, 1),
        ];
        assert_eq!(
            dra_text(&rows),
            "gpu.example.com node-0: 1 free, 1 in use; node-1: 2 free | nic.example.com no zone: 0 free, 1 unusable"
        );
    }
}
