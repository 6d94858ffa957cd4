//! `kubectl tas nodes`: each node's NUMA zones with free and allocatable amounts per
//! resource, drawn as bars, and whether the scheduler's view of the node agrees with
//! its NodeResourceTopology (the pod fingerprint, and reservations not yet confirmed).

use serde::Serialize;
use tas_api::nrt::zone::zone_numa_id;
use tas_scheduler::numa::{Amount, NodeTopology, ResourceKind};

use crate::cluster::ClusterRead;
use crate::render::{Table, bar};

/// What `nodes` shows.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodesReport {
    /// Why the scheduler's reserve cache could not be read, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_error: Option<String>,
    /// Whether the scheduler replica that answered leads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_leader: Option<bool>,
    /// Every node, by name.
    pub nodes: Vec<NodeRow>,
}

/// How the scheduler's view of a node compares with its NRT.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum FingerprintState {
    /// The NRT's pod fingerprint equals the scheduler's.
    Match,
    /// They differ: the NRT does not (yet) reflect the pods the scheduler placed.
    Mismatch,
    /// The NRT carries no usable fingerprint.
    NotPublished,
    /// The scheduler did not answer, or does not know the node.
    Unknown,
}

impl FingerprintState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::Mismatch => "mismatch",
            Self::NotPublished => "not-published",
            Self::Unknown => "unknown",
        }
    }
}

/// One node.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    /// Node name.
    pub node: String,
    /// Topology Manager policy (absent without a usable NRT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Topology Manager scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Why there is no usable topology, if there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The scheduler's view against the NRT fingerprint.
    pub fingerprint: FingerprintState,
    /// The scheduler's view is the NRT as published (no unconfirmed reservation);
    /// absent when the scheduler did not answer about the node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    /// Reservations the scheduler holds on the node.
    pub reservations: usize,
    /// NUMA zones.
    pub zones: Vec<ZoneRow>,
    /// Seconds since the node's NRT writer last wrote it, when the scheduler judges that
    /// writer stopped (its `tas.dev/heartbeat` is too old): the pods bound since stay
    /// reserved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_stopped_seconds: Option<f64>,
}

/// One NUMA zone.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ZoneRow {
    /// `node-<id>`.
    pub zone: String,
    /// NUMA id.
    pub numa_id: u32,
    /// Per resource.
    pub resources: Vec<ResourceRow>,
    /// CPUs regular init containers keep here, already left out of the free CPUs,
    /// when the NRT's writer counts them (`initContainerCpus`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_container_cpus: Option<u64>,
}

/// One resource of a zone. Amounts in the scheduler's units (CPU millicores, bytes).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRow {
    /// Resource name.
    pub resource: String,
    /// Allocatable, as the NRT reports it.
    pub allocatable: i64,
    /// Free, as the NRT reports it.
    pub free: i64,
    /// Free in the scheduler's view (reservations subtracted), when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_free: Option<i64>,
}

impl NodesReport {
    /// The report of `cluster`: every node with an NRT object or a Node object.
    pub fn build(cluster: &ClusterRead) -> Self {
        let mut names: Vec<&String> = cluster.nodes.keys().chain(cluster.nrts.keys()).collect();
        names.sort();
        names.dedup();
        let nodes = names.into_iter().map(|n| node_row(cluster, n)).collect();
        Self {
            scheduler_error: cluster.scheduler.as_ref().err().cloned(),
            scheduler_leader: cluster.scheduler.as_ref().ok().map(|r| r.leader),
            nodes,
        }
    }

    /// Plain aligned text: a line per node, then a line per zone and resource (those
    /// with nothing allocatable and nothing free left out; `-o json` has them all).
    pub fn render(&self) -> String {
        let mut out = String::new();
        if let Some(e) = &self.scheduler_error {
            out.push_str(&format!(
                "warning: scheduler reservations unavailable ({e}): showing the NRT objects only\n\n"
            ));
        } else if self.scheduler_leader == Some(false) {
            out.push_str("note: the scheduler replica that answered is not the leader\n\n");
        }
        let mut table = Table::new(&[
            "NODE",
            "POLICY/SCOPE",
            "FINGERPRINT",
            "VIEW",
            "ZONE",
            "RESOURCE",
            "FREE",
            "",
            "ALLOC",
            "SCHED-FREE",
        ]);
        for n in &self.nodes {
            let policy = match (&n.policy, &n.scope, &n.problem) {
                (Some(p), Some(s), _) => format!("{p}/{s}"),
                (_, _, Some(problem)) => problem.clone(),
                _ => "-".to_owned(),
            };
            let mut view = match n.confirmed {
                Some(true) => "confirmed".to_owned(),
                Some(false) => format!("{} reserved", n.reservations),
                None => "-".to_owned(),
            };
            if let Some(seconds) = n.writer_stopped_seconds {
                view.push_str(&format!(
                    ", writer stopped {}m ago",
                    (seconds / 60.0) as u64
                ));
            }
            let mut head = vec![
                n.node.clone(),
                policy,
                n.fingerprint.as_str().to_owned(),
                view,
            ];
            if n.zones.is_empty() {
                table.row(head);
                continue;
            }
            for z in &n.zones {
                // Resources the zone has none of (e.g. hugepages not configured) say nothing.
                let shown = z
                    .resources
                    .iter()
                    .filter(|r| r.allocatable > 0 || r.free > 0);
                for (i, r) in shown.enumerate() {
                    let kind = ResourceKind::of(&r.resource);
                    let show = |value| Amount { kind, value }.to_string();
                    let mut row = std::mem::replace(&mut head, vec![String::new(); 4]);
                    row.push(if i == 0 {
                        z.zone.clone()
                    } else {
                        String::new()
                    });
                    row.push(match z.init_container_cpus {
                        Some(kept) if kept > 0 && r.resource == "cpu" => {
                            format!("cpu ({kept} kept by init containers)")
                        }
                        _ => r.resource.clone(),
                    });
                    row.push(show(r.free));
                    row.push(bar(r.free, r.allocatable));
                    row.push(show(r.allocatable));
                    row.push(r.scheduler_free.map_or_else(|| "-".to_owned(), show));
                    table.row(row);
                }
            }
            if !head[0].is_empty() {
                // Not consumed by a resource row: every zone was empty.
                table.row(head);
            }
        }
        out.push_str(&table.render(0));
        out
    }
}

fn node_row(cluster: &ClusterRead, node: &str) -> NodeRow {
    let cached = cluster.cached(node);
    let fingerprint = match cached.map(|c| (c.fingerprint_match, c.nrt_fingerprint.is_some())) {
        Some((Some(true), _)) => FingerprintState::Match,
        Some((Some(false), _)) => FingerprintState::Mismatch,
        Some((None, _)) => FingerprintState::NotPublished,
        None => FingerprintState::Unknown,
    };
    let mut row = NodeRow {
        node: node.to_owned(),
        policy: None,
        scope: None,
        problem: None,
        fingerprint,
        confirmed: cached.map(|c| c.confirmed),
        reservations: cached.map_or(0, |c| c.reservations.len()),
        zones: Vec::new(),
        writer_stopped_seconds: cached.and_then(|c| c.writer_stopped_seconds),
    };
    let Some(nrt) = cluster.nrts.get(node) else {
        row.problem = Some("no NodeResourceTopology".to_owned());
        return row;
    };
    let published = match NodeTopology::from_nrt(nrt) {
        Ok(t) => t,
        Err(e) => {
            row.problem = Some(format!("invalid NodeResourceTopology: {e}"));
            return row;
        }
    };
    row.policy = Some(published.policy().to_string());
    row.scope = Some(published.scope().to_string());
    let scheduler = cached.filter(|c| !c.zones.is_empty());
    for &id in published.numa_ids() {
        let free_in_view = scheduler.and_then(|c| c.zones.iter().find(|z| z.numa_id == id));
        // The resources this zone lists, not every resource of the node.
        let mut resources: Vec<&str> = nrt
            .zones
            .iter()
            .filter(|z| zone_numa_id(&z.name) == Ok(id))
            .flat_map(|z| z.resources.iter().map(|r| r.name.as_str()))
            .collect();
        resources.sort_unstable();
        resources.dedup();
        let resources = resources
            .iter()
            .filter_map(|r| {
                Some(ResourceRow {
                    resource: (*r).to_owned(),
                    allocatable: published.allocatable(id, r)?,
                    free: published.available(id, r)?,
                    scheduler_free: free_in_view.and_then(|z| z.available.get(*r).copied()),
                })
            })
            .collect();
        let counted = tas_api::nrt::init_cpus::counted(nrt);
        let init_container_cpus = nrt
            .zones
            .iter()
            .find(|z| zone_numa_id(&z.name) == Ok(id))
            .filter(|_| counted)
            .and_then(|z| tas_api::nrt::init_cpus::zone_cpus(z).ok());
        row.zones.push(ZoneRow {
            zone: format!("node-{id}"),
            numa_id: id,
            resources,
            init_container_cpus,
        });
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_writer_is_shown_with_the_reservations() {
        let row = |stopped| NodeRow {
            node: "worker-1".into(),
            policy: None,
            scope: None,
            problem: None,
            fingerprint: FingerprintState::Mismatch,
            confirmed: Some(false),
            reservations: 2,
            zones: Vec::new(),
            writer_stopped_seconds: stopped,
        };
        let report = |stopped| NodesReport {
            scheduler_error: None,
            scheduler_leader: Some(true),
            nodes: vec![row(stopped)],
        };
        let text = report(Some(2130.0)).render();
        assert!(
            text.contains("2 reserved, writer stopped 35m ago"),
            "{text}"
        );
        assert!(!report(None).render().contains("writer stopped"));
        let json = serde_json::to_value(report(Some(2130.0))).unwrap();
        assert_eq!(json["nodes"][0]["writerStoppedSeconds"], 2130.0);
    }

    #[test]
    fn cpus_kept_by_init_containers_are_named_on_the_zones_cpu_row() {
        let zone = |kept| ZoneRow {
            zone: "node-0".into(),
            numa_id: 0,
            resources: vec![ResourceRow {
                resource: "cpu".into(),
                allocatable: 8000,
                free: 2000,
                scheduler_free: None,
            }],
            init_container_cpus: kept,
        };
        let report = |kept| NodesReport {
            scheduler_error: None,
            scheduler_leader: Some(true),
            nodes: vec![NodeRow {
                node: "worker-1".into(),
                policy: Some("single-numa-node".into()),
                scope: Some("container".into()),
                problem: None,
                fingerprint: FingerprintState::Match,
                confirmed: Some(true),
                reservations: 0,
                zones: vec![zone(kept)],
                writer_stopped_seconds: None,
            }],
        };
        let text = report(Some(3)).render();
        assert!(text.contains("cpu (3 kept by init containers)"), "{text}");
        assert!(!report(Some(0)).render().contains("kept by init"));
        let json = serde_json::to_value(report(Some(3))).unwrap();
        assert_eq!(json["nodes"][0]["zones"][0]["initContainerCpus"], 3);
        let json = serde_json::to_value(report(None)).unwrap();
        assert!(
            json["nodes"][0]["zones"][0]
                .get("initContainerCpus")
                .is_none()
        );
    }
}
