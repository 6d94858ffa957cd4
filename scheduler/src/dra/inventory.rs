//! A node's devices counted per driver and NUMA zone, for `kubectl tas explain`.

use std::collections::{BTreeMap, HashSet};

use super::DeviceId;
use super::pools::NodeDevices;

/// Device counts of one driver in one zone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Usable and not held by anyone.
    pub free: usize,
    /// In the caller's in-use set.
    pub in_use: usize,
    /// Never allocated by TAS: tainted, in an incomplete or invalid pool, or with an
    /// unsupported feature.
    pub unusable: usize,
}

/// Driver → zone (`None`: unknown) → counts. A device attached to several zones is
/// counted in each.
pub type Inventory = BTreeMap<String, BTreeMap<Option<u32>, DeviceCounts>>;

/// Counts the devices visible to `node`.
pub fn inventory(node: &NodeDevices, in_use: &HashSet<DeviceId>) -> Inventory {
    let mut inventory = Inventory::new();
    for device in &node.devices {
        let zones = inventory.entry(device.id.driver.clone()).or_default();
        let keys: Vec<Option<u32>> = match &device.zones {
            Some(set) => set.iter().copied().map(Some).collect(),
            None => vec![None],
        };
        for key in keys {
            let counts = zones.entry(key).or_default();
            if in_use.contains(&device.id) {
                counts.in_use += 1;
            } else if device.tainted
                || device.excluded.is_some()
                || !node.pool_is_usable(device.pool)
            {
                counts.unusable += 1;
            } else {
                counts.free += 1;
            }
        }
    }
    inventory
}
