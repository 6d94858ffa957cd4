//! Which PCIe root complexes each NUMA zone holds: the zone attribute `pcieRoots`.
//!
//! DRA drivers name the PCIe root complex of a device in the standard attribute
//! `resource.kubernetes.io/pcieRoot` (`pci<domain>:<bus>`, e.g. `pci0000:00`, the
//! directory of the root under the host's `/sys/devices`), not its NUMA node. A node
//! agent that reads the host's PCI devices says, on each zone, which roots are
//! attached to it, so a scheduler can place such devices in zones:
//!
//! | zone attribute | value |
//! |---|---|
//! | `pcieRoots` | the PCIe roots attached to the zone, sorted, separated by commas: `pci0000:00,pci0000:3a`; written only on zones that have some |
//!
//! A root attached to several zones (firmware that says so) is listed on each. A root
//! on no zone's list, or an object without the attribute (other agents, older TAS
//! updaters, an agent without the host's PCI devices in view), leaves the zone of the
//! devices under it unknown.

use std::collections::{BTreeMap, BTreeSet};

use super::attributes::AttributeError;
use super::v1alpha2::{AttributeInfo, NodeResourceTopology, Zone};

/// The zone attribute (see the module documentation).
pub const PCIE_ROOTS: &str = "pcieRoots";

/// What [`AttributeError::UnknownValue`] says is expected.
const EXPECTED: &str = "PCIe root names like pci0000:00 separated by commas";

/// Whether `name` is a PCIe root complex as the kernel names its directory under
/// `/sys/devices`: `pci`, a domain of 4 to 8 lowercase hex digits, `:`, a bus of 2.
pub fn is_root_name(name: &str) -> bool {
    let hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    name.strip_prefix("pci")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(domain, bus)| {
            (4..=8).contains(&domain.len()) && hex(domain) && bus.len() == 2 && hex(bus)
        })
}

/// The zone attribute for `roots`; `None` when there are none.
pub fn zone_attribute(roots: &BTreeSet<String>) -> Option<AttributeInfo> {
    (!roots.is_empty()).then(|| {
        let list: Vec<&str> = roots.iter().map(String::as_str).collect();
        AttributeInfo::new(PCIE_ROOTS, list.join(","))
    })
}

impl Zone {
    /// The PCIe roots this zone's attribute lists (empty without the attribute); an
    /// error naming the attribute when an entry is not a root name.
    pub fn pcie_roots(&self) -> Result<BTreeSet<String>, AttributeError> {
        let Some(value) = self.attribute(PCIE_ROOTS) else {
            return Ok(BTreeSet::new());
        };
        value
            .split(',')
            .map(|root| {
                let root = root.trim();
                if is_root_name(root) {
                    Ok(root.to_owned())
                } else {
                    Err(AttributeError::UnknownValue {
                        attribute: PCIE_ROOTS,
                        value: value.to_owned(),
                        expected: EXPECTED,
                    })
                }
            })
            .collect()
    }
}

/// PCIe root → the NUMA ids of the zones listing it, over the NUMA zones of `nrt`
/// (what the DRA allocator takes as `PcieRootZones`), with the errors of zones whose
/// attribute does not parse: those zones are left out, the others still count.
pub fn pcie_root_zones(
    nrt: &NodeResourceTopology,
) -> (BTreeMap<String, BTreeSet<u32>>, Vec<AttributeError>) {
    let mut roots: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut errors = Vec::new();
    for zone in nrt.zones.iter().filter(|z| z.is_numa_node()) {
        let Ok(id) = zone.numa_id() else {
            continue;
        };
        match zone.pcie_roots() {
            Ok(listed) => {
                for root in listed {
                    roots.entry(root).or_default().insert(id);
                }
            }
            Err(e) => errors.push(e),
        }
    }
    (roots, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nrt::zone::zone_with_attribute;

    fn zone(id: u32, roots: Option<&str>) -> Zone {
        zone_with_attribute(id, PCIE_ROOTS, roots)
    }

    #[test]
    fn root_names_are_the_kernels() {
        for good in ["pci0000:00", "pci0000:3a", "pci10000:e1", "pciffffffff:ff"] {
            assert!(is_root_name(good), "{good}");
        }
        for bad in [
            "",
            "pci",
            "pci0000",
            "pci000:00",
            "pci0000:0",
            "pci0000:000",
            "pci0000:0G",
            "PCI0000:00",
            "pci0000:AB",
            "0000:00",
            "pci0000:00 ",
            "pci123456789:00",
        ] {
            assert!(!is_root_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_attribute_round_trips_and_bad_entries_are_named() {
        let roots: BTreeSet<String> = ["pci0000:3a", "pci0000:00"].map(String::from).into();
        let attribute = zone_attribute(&roots).expect("some roots");
        assert_eq!(attribute.value, "pci0000:00,pci0000:3a");
        let mut z = zone(0, None);
        assert_eq!(z.pcie_roots(), Ok(BTreeSet::new()));
        z.attributes.push(attribute);
        assert_eq!(z.pcie_roots(), Ok(roots));
        assert_eq!(zone_attribute(&BTreeSet::new()), None);
        for bad in ["", "pci0000:00,", "pci0000:00,node-1", "0000:00:01.0"] {
            let err = zone(0, Some(bad)).pcie_roots().unwrap_err().to_string();
            assert!(err.contains(PCIE_ROOTS), "{err}");
        }
    }

    #[test]
    fn an_object_maps_roots_to_zones_and_skips_what_it_cannot_read() {
        let mut nrt = NodeResourceTopology::new("node-a");
        nrt.zones = vec![
            zone(0, Some("pci0000:00,pci0000:17")),
            zone(1, Some("pci0000:80,pci0000:17")),
            zone(2, Some("not a root")),
            zone(3, None),
        ];
        // A zone that is not a NUMA node says nothing.
        let mut socket = zone(4, Some("pci0000:ff"));
        socket.type_ = "Socket".to_owned();
        nrt.zones.push(socket);
        let (roots, errors) = pcie_root_zones(&nrt);
        assert_eq!(
            roots,
            BTreeMap::from([
                ("pci0000:00".to_owned(), BTreeSet::from([0])),
                ("pci0000:17".to_owned(), BTreeSet::from([0, 1])),
                ("pci0000:80".to_owned(), BTreeSet::from([1])),
            ])
        );
        assert_eq!(errors.len(), 1);
    }
}
