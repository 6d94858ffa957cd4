//! Which NUMA zones a device sits in, from the standard device attributes, and the
//! rule an allocation's zones must follow.
//!
//! - `resource.kubernetes.io/numaNode`: an int (`1`), or a string listing zones as
//!   the kernel's node lists do (`"0,1"`, `"0-1"`, `"0-1,4"`), for a device attached to
//!   several zones. It wins when both attributes are present.
//! - `resource.kubernetes.io/pcieRoot`: a string (`"pci0000:00"`) mapped to zones by
//!   the caller's [`PcieRootZones`] (published by the node agent as the NRT zone
//!   attribute `pcieRoots`, read back by `tas_api::nrt::pcie_roots::pcie_root_zones`);
//!   a root missing from the map leaves the device's zones unknown.
//!
//! A malformed value (a negative number, a zone past [`MAX_ZONE`], a list that does
//! not parse, a value of the wrong type) leaves the zones unknown and is reported as
//! a warning; it never fails the node.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::DeviceAttribute;

use super::attribute;

/// The standard attribute naming the NUMA node(s) of a device.
pub const NUMA_NODE_ATTRIBUTE: &str = "resource.kubernetes.io/numaNode";

/// The standard attribute naming the PCIe root complex of a device.
pub const PCIE_ROOT_ATTRIBUTE: &str = "resource.kubernetes.io/pcieRoot";

/// Highest NUMA zone id accepted (Linux supports at most 1024 nodes).
pub const MAX_ZONE: u32 = 1023;

/// A set of NUMA zone ids.
pub type Zones = BTreeSet<u32>;

/// PCIe root (`pci0000:00`) → the zones it is attached to, per node.
pub type PcieRootZones = BTreeMap<String, Zones>;

/// Which zones the devices of an allocation may use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ZoneRule {
    /// Any device, wherever it sits.
    #[default]
    Any,
    /// Devices whose zones are known must lie inside `zones`; devices whose zones are
    /// unknown are used only if `allow_unknown`.
    Within { zones: Zones, allow_unknown: bool },
}

impl ZoneRule {
    /// Whether a device with these zones (`None`: unknown) may be allocated.
    pub fn admits(&self, device: Option<&Zones>) -> bool {
        match (self, device) {
            (Self::Any, _) => true,
            (Self::Within { allow_unknown, .. }, None) => *allow_unknown,
            (Self::Within { zones, .. }, Some(device)) => device.is_subset(zones),
        }
    }

    /// Whether a device with these zones is aligned with the rule: zones known and,
    /// under `Within`, inside the set.
    pub fn aligned(&self, device: Option<&Zones>) -> bool {
        match (self, device) {
            (_, None) => false,
            (Self::Any, Some(_)) => true,
            (Self::Within { zones, .. }, Some(device)) => device.is_subset(zones),
        }
    }
}

/// Why a device's zone attribute cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{attribute}: {reason}")]
pub struct ZoneError {
    pub attribute: &'static str,
    pub reason: String,
}

/// The zones of a device of `driver`: `Ok(None)` when unknown (no attribute, or a PCIe
/// root the map does not know), an error when an attribute is malformed.
pub fn device_zones(
    driver: &str,
    attributes: &BTreeMap<String, DeviceAttribute>,
    pcie_roots: &PcieRootZones,
) -> Result<Option<Zones>, ZoneError> {
    if let Some(numa) = attribute::lookup(driver, attributes, NUMA_NODE_ATTRIBUTE) {
        let fail = |reason: String| ZoneError {
            attribute: NUMA_NODE_ATTRIBUTE,
            reason,
        };
        return match numa {
            DeviceAttribute { int: Some(id), .. } => {
                zone_id(*id).map(|z| Some(Zones::from([z]))).map_err(fail)
            }
            DeviceAttribute {
                string: Some(list), ..
            } => parse_zone_list(list).map(Some).map_err(fail),
            _ => Err(fail("expected an int or a string list of zones".to_owned())),
        };
    }
    if let Some(root) = attribute::lookup(driver, attributes, PCIE_ROOT_ATTRIBUTE) {
        let Some(root) = &root.string else {
            return Err(ZoneError {
                attribute: PCIE_ROOT_ATTRIBUTE,
                reason: "expected a string".to_owned(),
            });
        };
        return Ok(pcie_roots
            .get(root)
            .filter(|zones| !zones.is_empty())
            .cloned());
    }
    Ok(None)
}

/// A zone id from an int attribute.
fn zone_id(id: i64) -> Result<u32, String> {
    u32::try_from(id)
        .ok()
        .filter(|&id| id <= MAX_ZONE)
        .ok_or_else(|| format!("zone {id} is not between 0 and {MAX_ZONE}"))
}

/// Parses a zone list: comma-separated ids or `first-last` ranges (`"0-1,4"`).
pub fn parse_zone_list(text: &str) -> Result<Zones, String> {
    let shown = || text.chars().take(64).collect::<String>();
    let number = |part: &str| -> Result<u32, String> {
        let part = part.trim();
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "{:?} is not a zone list like \"0,1\" or \"0-1\"",
                shown()
            ));
        }
        part.parse::<u32>()
            .ok()
            .filter(|&id| id <= MAX_ZONE)
            .ok_or_else(|| format!("{:?}: zones must be between 0 and {MAX_ZONE}", shown()))
    };
    let mut zones = Zones::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (number(first)?, number(last)?);
                if first > last {
                    return Err(format!("{:?}: range {first}-{last} is reversed", shown()));
                }
                zones.extend(first..=last);
            }
            None => {
                zones.insert(number(part)?);
            }
        }
    }
    Ok(zones)
}
