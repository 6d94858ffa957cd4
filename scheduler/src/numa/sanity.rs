//! Sanity checks of an NRT object before the scheduler trusts it.
//!
//! The CRD schema bounds the object's shape and the node agents' admission policy
//! judges what TAS's own agents write, but any writer with RBAC on the objects (another
//! agent, an admin, a cluster running a copy of the CRD without bounds) can still
//! publish an object that advertises more than the node has or is costly to read. A
//! node whose object fails any check here is skipped for NUMA-sensitive pods, with an
//! Event and a metric, rather than trusted.
//!
//! Checked in order of cost, before [`super::NodeTopology::from_nrt`] does any work:
//! sizes (the figures of [`tas_api::nrt::limits`]), duplicate zone names, duplicate
//! resources in a zone, costs that name an unknown zone or are negative, and in every
//! resource `available <= allocatable <= capacity`. Quantities that do not parse are left
//! to `from_nrt`, which reports them.

use std::collections::HashSet;

use tas_api::nrt::NrtQuantity;
use tas_api::nrt::limits::{
    MAX_ATTRIBUTES, MAX_COSTS_PER_ZONE, MAX_RESOURCES_PER_ZONE, MAX_ZONE_ATTRIBUTES, MAX_ZONES,
};
use tas_api::nrt::v1alpha2::{NodeResourceTopology, ResourceInfo};

/// Why an NRT object is not believed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SanityProblem {
    /// A list is longer than any real node needs.
    #[error("{what}: {count} entries, more than the {max} a real node needs")]
    TooLarge {
        /// Which list (`zones`, `zone node-0 resources`, ...).
        what: String,
        /// Its length.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// Two zones share a name.
    #[error("zone {0:?} is listed twice")]
    DuplicateZone(String),
    /// A zone lists a resource twice.
    #[error("zone {zone:?} lists resource {resource:?} twice")]
    DuplicateResource {
        /// Zone name.
        zone: String,
        /// Resource name.
        resource: String,
    },
    /// A cost entry names a zone the object does not have.
    #[error("zone {zone:?} has a cost to unknown zone {to:?}")]
    UnknownCostZone {
        /// Zone name.
        zone: String,
        /// The unknown destination.
        to: String,
    },
    /// A cost (NUMA distance) below zero.
    #[error("zone {zone:?} has a negative cost {value} to zone {to:?}")]
    NegativeCost {
        /// Zone name.
        zone: String,
        /// Destination zone.
        to: String,
        /// The cost.
        value: i64,
    },
    /// More available than allocatable, or more allocatable than capacity.
    #[error(
        "zone {zone:?} resource {resource:?}: available {available}, allocatable {allocatable}, capacity {capacity} (must be available <= allocatable <= capacity)"
    )]
    AmountsOutOfOrder {
        /// Zone name.
        zone: String,
        /// Resource name.
        resource: String,
        /// As written.
        available: String,
        /// As written.
        allocatable: String,
        /// As written.
        capacity: String,
    },
}

impl SanityProblem {
    /// A short, stable code for metrics labels.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too_large",
            Self::DuplicateZone(_) => "duplicate_zone",
            Self::DuplicateResource { .. } => "duplicate_resource",
            Self::UnknownCostZone { .. } => "unknown_cost_zone",
            Self::NegativeCost { .. } => "negative_cost",
            Self::AmountsOutOfOrder { .. } => "amounts_out_of_order",
        }
    }
}

/// Checks `nrt`; the first problem found.
pub fn check(nrt: &NodeResourceTopology) -> Result<(), SanityProblem> {
    bounded("zones", nrt.zones.len(), MAX_ZONES)?;
    bounded("attributes", nrt.attributes.len(), MAX_ATTRIBUTES)?;
    let zones = nrt.zones.len();
    for zone in &nrt.zones {
        let what = |list: &str| format!("zone {} {list}", zone.name);
        bounded(
            &what("resources"),
            zone.resources.len(),
            MAX_RESOURCES_PER_ZONE,
        )?;
        bounded(
            &what("attributes"),
            zone.attributes.len(),
            MAX_ZONE_ATTRIBUTES,
        )?;
        bounded(&what("costs"), zone.costs.len(), MAX_COSTS_PER_ZONE)?;
        if zone.costs.len() > zones {
            return Err(SanityProblem::TooLarge {
                what: what("costs"),
                count: zone.costs.len(),
                max: zones,
            });
        }
    }

    let mut names = HashSet::with_capacity(zones);
    for zone in &nrt.zones {
        if !names.insert(zone.name.as_str()) {
            return Err(SanityProblem::DuplicateZone(zone.name.clone()));
        }
    }
    for zone in &nrt.zones {
        for cost in &zone.costs {
            if !names.contains(cost.name.as_str()) {
                return Err(SanityProblem::UnknownCostZone {
                    zone: zone.name.clone(),
                    to: cost.name.clone(),
                });
            }
            if cost.value < 0 {
                return Err(SanityProblem::NegativeCost {
                    zone: zone.name.clone(),
                    to: cost.name.clone(),
                    value: cost.value,
                });
            }
        }
        let mut resources = HashSet::with_capacity(zone.resources.len());
        for resource in &zone.resources {
            if !resources.insert(resource.name.as_str()) {
                return Err(SanityProblem::DuplicateResource {
                    zone: zone.name.clone(),
                    resource: resource.name.clone(),
                });
            }
            in_order(&zone.name, resource)?;
        }
    }
    Ok(())
}

fn bounded(what: &str, count: usize, max: i64) -> Result<(), SanityProblem> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    if count > max {
        return Err(SanityProblem::TooLarge {
            what: what.to_owned(),
            count,
            max,
        });
    }
    Ok(())
}

/// `available <= allocatable <= capacity`, compared in thousandths (so `7500m` and
/// `8` compare as CPUs do) or, when that overflows, in whole units.
fn in_order(zone: &str, r: &ResourceInfo) -> Result<(), SanityProblem> {
    let amounts = [&r.available, &r.allocatable, &r.capacity].map(thousandths);
    let [Some(available), Some(allocatable), Some(capacity)] = amounts else {
        return Ok(());
    };
    if available <= allocatable && allocatable <= capacity {
        return Ok(());
    }
    Err(SanityProblem::AmountsOutOfOrder {
        zone: zone.to_owned(),
        resource: r.name.clone(),
        available: r.available.as_str().to_owned(),
        allocatable: r.allocatable.as_str().to_owned(),
        capacity: r.capacity.as_str().to_owned(),
    })
}

fn thousandths(q: &NrtQuantity) -> Option<i128> {
    match q.milli_value() {
        Ok(milli) => Some(i128::from(milli)),
        Err(_) => q.value().ok().map(|v| i128::from(v) * 1000),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn nrt(zones: Value) -> NodeResourceTopology {
        serde_json::from_value(json!({"metadata": {"name": "n"}, "zones": zones})).unwrap()
    }

    fn zone(name: &str, resources: Value) -> Value {
        json!({"name": name, "type": "Node", "resources": resources,
               "costs": [{"name": "node-0", "value": 10}]})
    }

    fn cpu(capacity: &str, allocatable: &str, available: &str) -> Value {
        json!([{"name": "cpu", "capacity": capacity, "allocatable": allocatable, "available": available}])
    }

    #[test]
    fn a_sane_object_passes() {
        let object = nrt(json!([
            zone("node-0", cpu("8", "7500m", "7")),
            zone(
                "node-1",
                json!([{"name": "memory", "capacity": "64Gi", "allocatable": 68_000_000_000_i64, "available": "60G"}])
            ),
        ]));
        assert_eq!(check(&object), Ok(()));
    }

    #[test]
    fn each_insanity_is_named_with_its_code() {
        let many_zones: Vec<Value> = (0..129)
            .map(|i| json!({"name": format!("node-{i}"), "type": "Node"}))
            .collect();
        let cases = [
            (
                nrt(Value::Array(many_zones)),
                "too_large",
                "zones: 129 entries",
            ),
            (
                nrt(json!([zone("node-0", cpu("8", "8", "9"))])),
                "amounts_out_of_order",
                "available 9, allocatable 8",
            ),
            (
                nrt(json!([zone("node-0", cpu("8", "9", "1"))])),
                "amounts_out_of_order",
                "capacity 8",
            ),
            (
                nrt(json!([
                    zone("node-0", cpu("8", "8", "8")),
                    zone("node-0", cpu("8", "8", "8"))
                ])),
                "duplicate_zone",
                "\"node-0\" is listed twice",
            ),
            (
                nrt(
                    json!([{"name": "node-0", "type": "Node", "costs": [{"name": "node-7", "value": 10}]}]),
                ),
                "unknown_cost_zone",
                "unknown zone \"node-7\"",
            ),
            (
                nrt(
                    json!([{"name": "node-0", "type": "Node", "costs": [{"name": "node-0", "value": -1}]}]),
                ),
                "negative_cost",
                "negative cost -1",
            ),
            (
                nrt(json!([{"name": "node-0", "type": "Node", "costs": [
                    {"name": "node-0", "value": 10}, {"name": "node-0", "value": 10}]}])),
                "too_large",
                "zone node-0 costs: 2 entries, more than the 1",
            ),
            (
                nrt(json!([zone(
                    "node-0",
                    json!([
                    {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"},
                    {"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"}])
                )])),
                "duplicate_resource",
                "lists resource \"cpu\" twice",
            ),
        ];
        for (object, code, text) in cases {
            let problem = check(&object).expect_err(text);
            assert_eq!(problem.code(), code, "{problem}");
            assert!(problem.to_string().contains(text), "{problem}");
        }
    }

    #[test]
    fn unparsable_amounts_are_left_to_the_reader() {
        let object = nrt(json!([zone("node-0", cpu("8", "lots", "9"))]));
        assert_eq!(check(&object), Ok(()));
    }
}
