//! CPUs the kubelet keeps for regular init containers: the attribute `initContainerCpus`.
//!
//! Under the `static` CPU manager a regular init container's exclusive CPUs stay
//! assigned to it until its pod ends, except those a later container of the pod takes
//! over. The podresources API lists app containers and sidecars only, so an object
//! built from it alone shows those CPUs as free. A writer that also sees the CPU
//! manager's shared pool (TAS's agent reads it from its own container's cpuset) knows
//! them: an allocatable CPU that is neither in the shared pool nor exclusive to a
//! listed container is kept for an init container. Such a writer counts them out of
//! each zone's `cpu` `available` and says so:
//!
//! | where | attribute | value |
//! |---|---|---|
//! | object | `initContainerCpus` | `counted`: every zone's `cpu` `available` already leaves out the CPUs init containers keep |
//! | zone | `initContainerCpus` | how many of the zone's CPUs init containers keep; written only when not 0 |
//!
//! Without the object attribute the zones' `available` CPUs may include CPUs that init
//! containers keep, as with every writer that reads podresources alone; a reader that
//! accounts for init containers itself (TAS's scheduler predicts what they keep) must
//! then go on doing so. With it, a reader must not take those CPUs off again for the
//! pods the object reflects.

use super::attributes::AttributeError;
use super::v1alpha2::{AttributeInfo, NodeResourceTopology, Zone};

/// The object and zone attribute (see the module documentation).
pub const INIT_CONTAINER_CPUS: &str = "initContainerCpus";

/// The object attribute's only value.
pub const COUNTED: &str = "counted";

/// Whether `nrt`'s writer counted the CPUs init containers keep out of every zone's
/// `available` CPUs. Any other value of the attribute counts as not said.
pub fn counted(nrt: &NodeResourceTopology) -> bool {
    nrt.attributes
        .iter()
        .any(|a| a.name == INIT_CONTAINER_CPUS && a.value == COUNTED)
}

/// The object attribute saying the CPUs are counted.
pub fn counted_attribute() -> AttributeInfo {
    AttributeInfo::new(INIT_CONTAINER_CPUS, COUNTED)
}

/// The zone attribute for `cpus` CPUs kept by init containers; `None` for 0.
pub fn zone_attribute(cpus: u64) -> Option<AttributeInfo> {
    (cpus > 0).then(|| AttributeInfo::new(INIT_CONTAINER_CPUS, cpus.to_string()))
}

/// How many of `zone`'s CPUs init containers keep, as its attribute says (0 when it
/// has none); an error when the value is not a non-negative integer.
pub fn zone_cpus(zone: &Zone) -> Result<u64, AttributeError> {
    match zone
        .attributes
        .iter()
        .find(|a| a.name == INIT_CONTAINER_CPUS)
    {
        None => Ok(0),
        Some(a) => a
            .value
            .trim()
            .parse()
            .map_err(|_| AttributeError::UnknownValue {
                attribute: INIT_CONTAINER_CPUS,
                value: a.value.clone(),
                expected: "a number of CPUs",
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_value_counted_says_the_cpus_are_counted() {
        let mut nrt = NodeResourceTopology::default();
        assert!(!counted(&nrt));
        nrt.attributes
            .push(AttributeInfo::new(INIT_CONTAINER_CPUS, "yes"));
        assert!(!counted(&nrt));
        nrt.attributes.push(counted_attribute());
        assert!(counted(&nrt));
    }

    #[test]
    fn zone_counts_round_trip_and_bad_values_are_named() {
        let mut zone = Zone::default();
        assert_eq!(zone_cpus(&zone).unwrap(), 0);
        assert!(zone_attribute(0).is_none());
        zone.attributes.extend(zone_attribute(3));
        assert_eq!(zone_cpus(&zone).unwrap(), 3);
        zone.attributes = vec![AttributeInfo::new(INIT_CONTAINER_CPUS, "-1")];
        let error = zone_cpus(&zone).unwrap_err().to_string();
        assert!(
            error.contains(INIT_CONTAINER_CPUS) && error.contains("-1"),
            "{error}"
        );
    }
}
