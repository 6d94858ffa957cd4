//! Zone naming and typed zone readers.
//!
//! Every NRT writer names a NUMA zone `node-<NUMA id>` with type `Node` and names the
//! destination of each cost entry the same way. NUMA ids can be sparse (`node-0`,
//! `node-2` on a machine with a memory-less or offline node), so callers look zones up
//! by id, never by position.

use super::v1alpha2::{NodeResourceTopology, ResourceInfo, Zone};

/// Zone type of a NUMA node.
pub const ZONE_TYPE_NODE: &str = "Node";
/// Prefix of a NUMA zone's name, followed by the NUMA id.
pub const ZONE_NAME_PREFIX: &str = "node-";

/// A zone name that does not follow the `node-<NUMA id>` convention.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    /// The name is not `node-` followed by a decimal NUMA id.
    #[error("zone name {name:?} is not \"node-<NUMA id>\": {reason}")]
    InvalidName {
        /// The offending zone name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// The zone name for a NUMA id: `3` → `"node-3"`.
pub fn zone_name(numa_id: u32) -> String {
    format!("{ZONE_NAME_PREFIX}{numa_id}")
}

/// The NUMA id in a zone name: `"node-3"` → `3`.
///
/// Only the canonical form is accepted: `node-` then decimal digits without sign or
/// leading zeros, so that each id has exactly one name.
pub fn zone_numa_id(name: &str) -> Result<u32, ZoneError> {
    let invalid = |reason| ZoneError::InvalidName {
        name: name.to_owned(),
        reason,
    };
    let id = name
        .strip_prefix(ZONE_NAME_PREFIX)
        .ok_or_else(|| invalid("missing the \"node-\" prefix"))?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("the NUMA id is not a decimal number"));
    }
    if id.len() > 1 && id.starts_with('0') {
        return Err(invalid("the NUMA id has leading zeros"));
    }
    id.parse().map_err(|_| invalid("the NUMA id is too large"))
}

impl Zone {
    /// Whether this zone is a NUMA node (type `Node`).
    pub fn is_numa_node(&self) -> bool {
        self.type_ == ZONE_TYPE_NODE
    }

    /// The NUMA id in this zone's name.
    pub fn numa_id(&self) -> Result<u32, ZoneError> {
        zone_numa_id(&self.name)
    }

    /// The value of this zone's first attribute called `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }

    /// The amounts of resource `name` in this zone, if reported.
    pub fn resource(&self, name: &str) -> Option<&ResourceInfo> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// The cost (NUMA distance) from this zone to NUMA node `numa_id`, if reported.
    pub fn cost_to(&self, numa_id: u32) -> Option<i64> {
        let target = zone_name(numa_id);
        self.costs
            .iter()
            .find(|c| c.name == target)
            .map(|c| c.value)
    }
}

impl NodeResourceTopology {
    /// The NUMA zones (type `Node`) with their ids, sorted by id. Zones of other types
    /// are skipped; a `Node` zone with a malformed name is an error.
    pub fn numa_zones(&self) -> Result<Vec<(u32, &Zone)>, ZoneError> {
        let mut zones = self
            .zones
            .iter()
            .filter(|z| z.is_numa_node())
            .map(|z| Ok((z.numa_id()?, z)))
            .collect::<Result<Vec<_>, ZoneError>>()?;
        zones.sort_by_key(|&(id, _)| id);
        Ok(zones)
    }

    /// The NUMA zone with id `numa_id`, if present.
    pub fn numa_zone(&self, numa_id: u32) -> Option<&Zone> {
        self.zones
            .iter()
            .find(|z| z.is_numa_node() && z.numa_id() == Ok(numa_id))
    }
}

/// The NUMA zone `node-<id>`, with the attribute `name` set to `value` when there is
/// one: what the zone attribute readers' tests start from.
#[cfg(test)]
pub(crate) fn zone_with_attribute(id: u32, name: &str, value: Option<&str>) -> Zone {
    Zone {
        name: zone_name(id),
        type_: ZONE_TYPE_NODE.to_owned(),
        attributes: value
            .map(|v| vec![super::v1alpha2::AttributeInfo::new(name, v)])
            .unwrap_or_default(),
        ..Zone::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nrt::NrtQuantity;
    use crate::nrt::v1alpha2::CostInfo;

    #[test]
    fn names_and_ids_round_trip() {
        for id in [0, 1, 7, 63, 1023, u32::MAX] {
            assert_eq!(zone_numa_id(&zone_name(id)), Ok(id));
        }
        assert_eq!(zone_name(3), "node-3");
    }

    #[test]
    fn rejects_garbage_naming_it() {
        for name in [
            "",
            "node-",
            "nodex",
            "node--1",
            "node-+1",
            "numa-0",
            "node-01",
            "node-1a",
            "Node-1",
            " node-1",
            "node-4294967296",
            "node-１",
        ] {
            let err = zone_numa_id(name).unwrap_err();
            assert!(err.to_string().contains(&format!("{name:?}")), "{err}");
        }
    }

    fn zone(name: &str, costs: &[(u32, i64)]) -> Zone {
        Zone {
            name: name.into(),
            type_: ZONE_TYPE_NODE.into(),
            costs: costs
                .iter()
                .map(|&(dst, value)| CostInfo {
                    name: zone_name(dst),
                    value,
                })
                .collect(),
            resources: vec![ResourceInfo {
                name: "cpu".into(),
                capacity: NrtQuantity::from(4),
                allocatable: NrtQuantity::from(4),
                available: NrtQuantity::from(2),
            }],
            ..Zone::default()
        }
    }

    #[test]
    fn sparse_numa_ids_are_looked_up_by_id() {
        let mut nrt = NodeResourceTopology::new("sparse");
        nrt.zones = vec![
            zone("node-5", &[(0, 21), (2, 21), (5, 10)]),
            zone("node-0", &[(0, 10), (2, 20), (5, 21)]),
            Zone {
                name: "socket-0".into(),
                type_: "Socket".into(),
                ..Zone::default()
            },
            zone("node-2", &[(0, 20), (2, 10), (5, 21)]),
        ];
        let ids: Vec<u32> = nrt
            .numa_zones()
            .unwrap()
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(ids, [0, 2, 5]);
        let node2 = nrt.numa_zone(2).unwrap();
        assert_eq!(node2.cost_to(0), Some(20));
        assert_eq!(node2.cost_to(2), Some(10));
        assert_eq!(node2.cost_to(1), None);
        assert_eq!(
            node2.resource("cpu").map(|r| r.available.value()),
            Some(Ok(2))
        );
        assert!(node2.resource("memory").is_none());
        assert!(nrt.numa_zone(1).is_none());
    }

    #[test]
    fn malformed_numa_zone_name_is_reported() {
        let mut nrt = NodeResourceTopology::new("bad");
        nrt.zones = vec![zone("node-0", &[]), zone("numa-1", &[])];
        let err = nrt.numa_zones().unwrap_err();
        assert!(err.to_string().contains("\"numa-1\""), "{err}");
    }
}
