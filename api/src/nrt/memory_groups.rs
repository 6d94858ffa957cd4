//! Which NUMA zones hold memory the kubelet's memory manager `Static` pinned, and how it
//! grouped them: the zone attribute `memoryManagerGroup`.
//!
//! The memory manager pins a Guaranteed container's memory and hugepages either to one
//! NUMA zone or, when no single zone holds them, to a set of zones (a *group*). It never
//! mixes the two on one zone, and a zone of a group serves only allocations spanning
//! exactly that group; a zone holding single-zone allocations is never part of a new
//! group. Free amounts alone cannot show this: a group's memory may all come from one of
//! its zones, leaving the others looking untouched. So a writer names, on each zone
//! holding pinned memory, the zones its allocations are grouped with:
//!
//! | zone attribute | value |
//! |---|---|
//! | `memoryManagerGroup` | the zone names of the zone's group, sorted by NUMA id and separated by commas, the zone itself included: `node-0,node-1` for a zone of a two-zone group, just `node-2` for a zone holding single-zone allocations |
//!
//! A zone without the attribute holds no pinned memory as far as its writer knows, or
//! its writer does not publish groups (other agents, older TAS updaters): readers then
//! fall back to the zone's free amounts (a zone whose memory or hugepages are partly
//! taken is taken to hold single-zone allocations), as they did before.
//!
//! The value is the memory manager's own per-zone state (the `Cells` of its machine
//! state for a zone with allocations), so the rules above can be replayed exactly.
//! [`ZoneMemoryGroups::from_blocks`] derives it from the zone sets of the memory
//! blocks containers hold, as the podresources API reports them.

use std::collections::{BTreeMap, BTreeSet};

use super::attributes::AttributeError;
use super::v1alpha2::{AttributeInfo, Zone};
use super::zone::{zone_name, zone_numa_id};

/// Zone attribute naming the zone's memory manager group (see the module documentation).
pub const MEMORY_MANAGER_GROUP: &str = "memoryManagerGroup";

/// Per NUMA id, the zones its pinned memory is grouped with (sorted, itself included);
/// zones without pinned memory are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneMemoryGroups(pub BTreeMap<u32, Vec<u32>>);

impl ZoneMemoryGroups {
    /// Derives the groups from the zone sets of the memory blocks containers hold (one
    /// item per block; the order does not matter):
    /// - a block on one zone marks that zone as holding single-zone allocations. This
    ///   wins over a group: the memory manager checks the grouping rules only for
    ///   multi-zone allocations, so a single-zone one can land on a zone of a group
    ///   (under `best-effort` or `none`), and the zone then counts as single; the
    ///   reverse (a group over a zone with single-zone allocations) is always refused;
    /// - a block on several zones makes them a group. Two different groups never
    ///   share a zone; should blocks say so, the lowest group (by its sorted ids) wins.
    ///
    /// Empty zone sets are ignored.
    pub fn from_blocks<'a>(blocks: impl IntoIterator<Item = &'a [u32]>) -> Self {
        let mut single = BTreeSet::new();
        let mut grouped: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for zones in blocks {
            let set: BTreeSet<u32> = zones.iter().copied().collect();
            match set.len() {
                0 => {}
                1 => {
                    single.extend(set);
                }
                _ => {
                    let group: Vec<u32> = set.iter().copied().collect();
                    for &zone in &set {
                        grouped
                            .entry(zone)
                            .and_modify(|g| {
                                if group < *g {
                                    g.clone_from(&group);
                                }
                            })
                            .or_insert_with(|| group.clone());
                    }
                }
            }
        }
        for zone in single {
            grouped.insert(zone, vec![zone]);
        }
        Self(grouped)
    }

    /// The attribute for zone `id`, when it holds pinned memory.
    pub fn attribute(&self, id: u32) -> Option<AttributeInfo> {
        self.0
            .get(&id)
            .map(|group| AttributeInfo::new(MEMORY_MANAGER_GROUP, format_group(group)))
    }
}

/// Renders a group: zone names separated by commas.
pub fn format_group(zones: &[u32]) -> String {
    zones
        .iter()
        .map(|&z| zone_name(z))
        .collect::<Vec<_>>()
        .join(",")
}

impl Zone {
    /// The NUMA ids of this zone's memory manager group (sorted, itself included), or
    /// `None` when the zone has no `memoryManagerGroup` attribute. A value that is not a
    /// list of zone names including this zone's own is an error naming the attribute.
    pub fn memory_manager_group(&self) -> Result<Option<Vec<u32>>, AttributeError> {
        let Some(value) = self.attribute(MEMORY_MANAGER_GROUP) else {
            return Ok(None);
        };
        let invalid = || AttributeError::UnknownValue {
            attribute: MEMORY_MANAGER_GROUP,
            value: value.to_owned(),
            expected: "zone names separated by commas, the zone's own included",
        };
        let ids = value
            .split(',')
            .map(|name| zone_numa_id(name.trim()).map_err(|_| invalid()))
            .collect::<Result<BTreeSet<u32>, _>>()?;
        match self.numa_id() {
            Ok(own) if ids.contains(&own) => Ok(Some(ids.into_iter().collect())),
            _ => Err(invalid()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(id: u32, group: Option<&str>) -> Zone {
        super::super::zone::zone_with_attribute(id, MEMORY_MANAGER_GROUP, group)
    }

    #[test]
    fn blocks_make_groups_and_single_zones() {
        let blocks: [&[u32]; 5] = [&[3, 1], &[2], &[1, 3], &[], &[2]];
        let groups = ZoneMemoryGroups::from_blocks(blocks);
        assert_eq!(
            groups.0,
            BTreeMap::from([(1, vec![1, 3]), (2, vec![2]), (3, vec![1, 3])])
        );
        assert_eq!(
            groups.attribute(3),
            Some(AttributeInfo::new(MEMORY_MANAGER_GROUP, "node-1,node-3"))
        );
        assert_eq!(groups.attribute(0), None);
    }

    #[test]
    fn a_single_zone_block_wins_over_a_group() {
        let blocks: [&[u32]; 2] = [&[0], &[0, 1]];
        let groups = ZoneMemoryGroups::from_blocks(blocks);
        assert_eq!(groups.0, BTreeMap::from([(0, vec![0]), (1, vec![0, 1])]));
        let reversed: [&[u32]; 2] = [&[0, 1], &[0]];
        assert_eq!(ZoneMemoryGroups::from_blocks(reversed), groups);
    }

    #[test]
    fn the_attribute_is_read_back() {
        assert_eq!(zone(1, None).memory_manager_group(), Ok(None));
        assert_eq!(
            zone(1, Some("node-1")).memory_manager_group(),
            Ok(Some(vec![1]))
        );
        assert_eq!(
            zone(1, Some("node-2,node-0,node-1")).memory_manager_group(),
            Ok(Some(vec![0, 1, 2]))
        );
        for bad in ["", "node-0", "node-1,zone-2", "none"] {
            let err = zone(1, Some(bad)).memory_manager_group().unwrap_err();
            assert!(err.to_string().contains(MEMORY_MANAGER_GROUP), "{err}");
        }
    }
}
