//! What `nodes` and `explain` read: Nodes, their NodeResourceTopology objects, and the
//! scheduler's reserve cache — and the scheduler's view of a node rebuilt from them:
//! the latest NRT with each zone's free amounts taken from the scheduler's view, so the
//! scheduler's own code ([`NodeTopology::from_nrt`], the filters, the NUMA fit) judges
//! exactly what the scheduler would.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use tas_api::nrt::NrtQuantity;
use tas_api::nrt::v1alpha2::NodeResourceTopology;
use tas_api::nrt::zone::zone_numa_id;
use tas_scheduler::debug::{NodeReservations, ReservationsReport};
use tas_scheduler::numa::{NodeTopology, ResourceKind, TopologyError};

use crate::bundle::Bundle;
use crate::error::Error;
use crate::gather::manifest::{MANIFEST, Manifest};
use crate::proxy::SchedulerService;

/// The cluster as the commands see it.
pub struct ClusterRead {
    /// Every node, by name.
    pub nodes: BTreeMap<String, Node>,
    /// Every NRT object, by node name.
    pub nrts: BTreeMap<String, NodeResourceTopology>,
    /// The scheduler's reserve cache, or why it could not be read.
    pub scheduler: Result<ReservationsReport, String>,
}

impl ClusterRead {
    /// Lists nodes and NRT objects and asks the scheduler for its reservations.
    pub async fn read(client: &Client, service: &SchedulerService) -> Result<Self, Error> {
        let nodes: Api<Node> = Api::all(client.clone());
        let nodes = nodes
            .list(&ListParams::default())
            .await
            .map_err(Error::api("listing nodes"))?
            .items
            .into_iter()
            .map(|n| (n.name_any(), n))
            .collect();
        let nrts: Api<NodeResourceTopology> = Api::all(client.clone());
        let nrts = match nrts.list(&ListParams::default()).await {
            Ok(list) => list.items.into_iter().map(|n| (n.name_any(), n)).collect(),
            // No NRT CRD: no node has a topology.
            Err(kube::Error::Api(e)) if e.code == 404 => BTreeMap::new(),
            Err(e) => return Err(Error::api("listing NodeResourceTopology objects")(e)),
        };
        let scheduler = service
            .reservations(client)
            .await
            .map_err(|e| e.to_string());
        Ok(Self {
            nodes,
            nrts,
            scheduler,
        })
    }

    /// The same from a support bundle: its Nodes, NRT objects and the scheduler's
    /// reservations (or why the bundle has none).
    pub fn from_bundle(bundle: &Bundle) -> Result<Self, Error> {
        use crate::gather::collect::{NODES, NRTS, RESERVATIONS};
        #[derive(serde::Deserialize)]
        struct List<T> {
            items: Vec<T>,
        }
        let nodes: List<Node> = bundle.yaml(NODES)?.unwrap_or(List { items: Vec::new() });
        let nrts: List<NodeResourceTopology> =
            bundle.yaml(NRTS)?.unwrap_or(List { items: Vec::new() });
        let manifest: Option<Manifest> = bundle.yaml(MANIFEST)?;
        let scheduler = match bundle.yaml::<ReservationsReport>(RESERVATIONS)? {
            Some(report) => Ok(report),
            None => Err(manifest
                .as_ref()
                .and_then(|m| m.entry(RESERVATIONS))
                .and_then(|e| e.reason.clone())
                .map_or_else(
                    || "the bundle has no scheduler reservations".to_owned(),
                    |why| format!("not in the bundle: {why}"),
                )),
        };
        Ok(Self {
            nodes: nodes.items.into_iter().map(|n| (n.name_any(), n)).collect(),
            nrts: nrts.items.into_iter().map(|n| (n.name_any(), n)).collect(),
            scheduler,
        })
    }

    /// The scheduler's entry for `node`, if it answered and knows the node.
    pub fn cached(&self, node: &str) -> Option<&NodeReservations> {
        self.scheduler.as_ref().ok()?.node(node)
    }

    /// The scheduler's view of `node`: `None` without an NRT object.
    pub fn view(&self, node: &str) -> Option<Result<NodeTopology, TopologyError>> {
        let nrt = self.nrts.get(node)?;
        Some(match self.cached(node) {
            Some(cached) if !cached.zones.is_empty() => {
                NodeTopology::from_nrt(&with_free_amounts(nrt, cached))
            }
            _ => NodeTopology::from_nrt(nrt),
        })
    }
}

/// Lists the pods bound to a node (not finished): what the scheduler counts on nodes.
pub async fn bound_pods(client: &Client) -> Result<Vec<Pod>, Error> {
    let pods: Api<Pod> = Api::all(client.clone());
    let params = ListParams::default().fields("spec.nodeName!=");
    Ok(pods
        .list(&params)
        .await
        .map_err(Error::api("listing pods"))?
        .items
        .into_iter()
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect())
}

/// `nrt` with every zone's `available` replaced by the scheduler's free amounts.
pub fn with_free_amounts(
    nrt: &NodeResourceTopology,
    cached: &NodeReservations,
) -> NodeResourceTopology {
    let mut nrt = nrt.clone();
    for zone in &mut nrt.zones {
        let Ok(id) = zone_numa_id(&zone.name) else {
            continue;
        };
        let Some(free) = cached.zones.iter().find(|z| z.numa_id == id) else {
            continue;
        };
        for resource in &mut zone.resources {
            if let Some(&amount) = free.available.get(&resource.name) {
                resource.available = quantity(&resource.name, amount);
            }
        }
    }
    nrt
}

/// An amount in the scheduler's units as an NRT quantity. A view over-reserved below
/// zero reads as zero: nothing fits either way.
pub fn quantity(resource: &str, amount: i64) -> NrtQuantity {
    let amount = amount.max(0);
    if ResourceKind::of(resource).is_milli() {
        NrtQuantity(format!("{amount}m"))
    } else {
        NrtQuantity(amount.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tas_scheduler::debug::ZoneFree;

    #[test]
    fn the_scheduler_view_replaces_each_zones_free_amounts() {
        let zones: Vec<_> = [0, 1]
            .iter()
            .map(|i| {
                json!({"name": format!("node-{i}"), "type": "Node", "resources": [
                {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "6"},
                {"name": "memory", "capacity": "4Gi", "allocatable": "4Gi", "available": "4Gi"}]})
            })
            .collect();
        let nrt: NodeResourceTopology = serde_json::from_value(json!({
            "metadata": {"name": "n"},
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
            "zones": zones
        }))
        .unwrap();
        let cached = NodeReservations {
            node: "n".into(),
            zones: vec![ZoneFree {
                numa_id: 1,
                available: [("cpu".to_owned(), 1500), ("memory".to_owned(), -5)].into(),
            }],
            ..NodeReservations::default()
        };
        let view = NodeTopology::from_nrt(&with_free_amounts(&nrt, &cached)).unwrap();
        // Zone 0 is not in the scheduler's answer: the NRT's amounts stay.
        assert_eq!(view.available(0, "cpu"), Some(6000));
        assert_eq!(view.available(1, "cpu"), Some(1500));
        assert_eq!(
            view.available(1, "memory"),
            Some(0),
            "over-reserved reads as none"
        );
        assert_eq!(view.allocatable(1, "cpu"), Some(8000));
    }
}
