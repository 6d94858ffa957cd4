//! The fast alignment check for one request (a container, or the pod in `pod` scope).
//!
//! Instead of building hint lists and merging their cross product (see [`super::hint`]),
//! it uses what that merge boils down to for `restricted` and `single-numa-node`:
//!
//! - every hint a provider marks preferred has exactly the provider's minimum width `w`
//!   (the fewest zones whose *totals* hold the request), so a preferred merged hint is a
//!   mask of width `w` preferred by every provider: all providers must agree on `w`
//!   (`single-numa-node` additionally needs `w = 1`);
//! - such a mask exists iff some `w`-zone set has enough *free* of every resource;
//! - the kubelet then takes the numerically lowest such mask, which is the first one an
//!   ascending enumeration of `w`-bit masks finds.
//!
//! Providers are modelled as the kubelet's: the CPU manager (group `cpu`), the memory
//! manager (memory and every hugepages size as one group: a mask must hold all of them)
//! and the device manager (one group per device resource). Cost per call is a handful
//! of integer sums for `w = 1`; wider masks are enumerated within [`MAX_MASKS`].

use super::mask::{bits, count_masks, masks_of_width};
use super::memory::{MemoryManager, groups_allow};
use super::topology::NodeTopology;

/// Most masks one check may enumerate; beyond that the node is refused as too large.
pub(crate) const MAX_MASKS: u64 = 1 << 16;

/// Hint-provider group of the CPU manager.
pub(crate) const CPU_GROUP: u32 = 0;
/// Hint-provider group of the memory manager (memory and hugepages together).
pub(crate) const MEMORY_GROUP: u32 = 1;
/// Device resources get groups from here on, one each.
pub(crate) const FIRST_DEVICE_GROUP: u32 = 2;

/// One resource of a request that a hint provider aligns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Req {
    /// Position of the entry in the request's [`super::Resources`].
    pub(crate) pos: u32,
    /// Node resource index.
    pub(crate) res: u32,
    /// Hint-provider group.
    pub(crate) group: u32,
    /// Amount requested.
    pub(crate) need: i64,
}

const INLINE: usize = 8;

/// The aligned resources of one request; heap-free for up to eight of them.
#[derive(Debug, Default)]
pub(crate) struct Reqs {
    inline: [Req; INLINE],
    len: usize,
    spill: Vec<Req>,
}

impl Reqs {
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.spill.clear();
    }

    pub(crate) fn push(&mut self, req: Req) {
        if self.spill.is_empty() && self.len < INLINE {
            self.inline[self.len] = req;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline[..self.len]);
            }
            self.spill.push(req);
        }
    }

    /// The requests of one hint-provider group.
    pub(crate) fn only(&self, group: u32) -> Self {
        let mut out = Self::default();
        for r in self.as_slice().iter().filter(|r| r.group == group) {
            out.push(*r);
        }
        out
    }

    pub(crate) fn as_slice(&self) -> &[Req] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

/// What the policy asks of the merged hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Goal {
    /// `single-numa-node`: preferred and one NUMA node.
    SingleZone,
    /// `restricted` (and the aligned case of `best-effort`): preferred.
    MinimumWidth,
}

/// Why a request cannot be aligned. Positions index the request's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// More than any single zone holds in total (`single-numa-node`).
    ExceedsZone { pos: u32, largest: i64 },
    /// No set of the minimum width has enough free.
    Insufficient {
        pos: u32,
        best_free: i64,
        width: u32,
    },
    /// Providers need different minimum widths (`restricted`).
    WidthMismatch {
        first: (u32, u32),
        second: (u32, u32),
    },
    /// Each resource fits somewhere, but no set of this width fits them all.
    Disjoint { positions: Vec<u32>, width: u32 },
    /// Sets of this width have room, but the memory manager's grouping rules allow
    /// the memory on none of them.
    MemoryGroups,
    /// Too many masks to enumerate.
    TooManyZones,
}

fn sum(free: &[i64], nres: usize, mask: u64, res: u32) -> i64 {
    bits(mask).fold(0i64, |acc, z| {
        acc.saturating_add(free[z as usize * nres + res as usize])
    })
}

fn fits(free: &[i64], nres: usize, mask: u64, reqs: impl IntoIterator<Item = Req>) -> bool {
    reqs.into_iter()
        .all(|r| sum(free, nres, mask, r.res) >= r.need)
}

/// Whether `mask` can hold `reqs`: enough free of each, and, when memory is among
/// them, the memory manager's grouping rules allow memory on exactly `mask` (it never
/// mixes single-zone and multi-zone allocations on a zone, keeps multi-zone groups
/// apart, and hints a zone of a group only as that whole group).
fn mask_fits(node: &NodeTopology, free: &[i64], mask: u64, reqs: &[Req], memory: Memory) -> bool {
    let nres = node.resource_count();
    fits(free, nres, mask, reqs.iter().copied()) && memory_allows(node, free, mask, reqs, memory)
}

/// The memory manager state a check runs against: the one [`fit`](super::fit) replays
/// for the pod, or, when it replays none (too many zones), the NRT's.
pub(crate) type Memory<'a, 'n> = Option<&'a MemoryManager<'n>>;

/// Whether the memory manager's grouping rules let the memory of `reqs` (if any) go to
/// `mask`.
fn memory_allows(
    node: &NodeTopology,
    free: &[i64],
    mask: u64,
    reqs: &[Req],
    memory: Memory,
) -> bool {
    if !reqs.iter().any(|r| r.group == MEMORY_GROUP) {
        return true;
    }
    match memory {
        Some(mm) => mm.allows(mask),
        // Without the replay (too many zones), a doubted zone takes no memory at all.
        None => {
            mask & node.doubted_memory() == 0 && groups_allow(mask, |z| node.memory_state(free, z))
        }
    }
}

/// The mask of `width` zones the Topology Manager would take among those that contain
/// `must` and hold `reqs`: the numerically lowest, or with `prefer-closest-numa-nodes`
/// the one with the smallest average distance (then the lowest).
fn choose(
    node: &NodeTopology,
    free: &[i64],
    reqs: &[Req],
    width: u32,
    must: u64,
    memory: Memory,
) -> Option<u64> {
    let n = node.zone_count() as u32;
    let mut candidates = masks_of_width(n, width)
        .filter(|&m| m & must == must && mask_fits(node, free, m, reqs, memory));
    if !node.prefer_closest() {
        return candidates.next();
    }
    let distance = |a: u32, b: u32| node.zone_distance(a as usize, b as usize);
    candidates.min_by_key(|&m| (super::hint::distance_sum(m, &distance), m))
}

fn members(reqs: &[Req], group: u32) -> impl Iterator<Item = Req> + Clone + '_ {
    reqs.iter().copied().filter(move |r| r.group == group)
}

/// The first member of each group, in request order.
fn group_leaders(reqs: &[Req]) -> impl Iterator<Item = Req> + '_ {
    reqs.iter()
        .enumerate()
        .filter(|&(i, r)| reqs[..i].iter().all(|o| o.group != r.group))
        .map(|(_, r)| *r)
}

/// The provider's minimum width for a group, searching widths up to `limit`; `None`
/// when more than `limit` zones are needed. Like the kubelet, a request no set of zones
/// holds gets the full width.
pub(super) fn group_width(
    node: &NodeTopology,
    reqs: &[Req],
    group: u32,
    limit: u32,
) -> Result<Option<u32>, Cause> {
    let n = node.zone_count() as u32;
    let mut group_reqs = members(reqs, group);
    let first = group_reqs.next();
    let width = match (first, group_reqs.next()) {
        (None, _) => return Ok(Some(0)),
        (Some(only), None) => node.min_width(only.res as usize, only.need),
        (Some(_), Some(_)) => {
            let holds = |mask: u64| {
                members(reqs, group).all(|r| {
                    bits(mask).fold(0i64, |acc, z| {
                        acc.saturating_add(node.hint_total(z as usize, r.res as usize))
                    }) >= r.need
                })
            };
            let mut found = n;
            for k in 1..=limit.min(n) {
                if count_masks(n, k) > MAX_MASKS {
                    return Err(Cause::TooManyZones);
                }
                if masks_of_width(n, k).any(holds) {
                    found = k;
                    break;
                }
            }
            found
        }
    };
    Ok((width <= limit).then_some(width))
}

/// Aligns `reqs` against `free` (zone-major, like [`NodeTopology::free`]). `Ok(None)`:
/// nothing to align (any zone); `Ok(Some(mask))`: the zone-index mask the kubelet
/// would pick. Only masks containing the zone-index mask `must` qualify (the CPU
/// manager's hints must cover the CPUs a container reuses; 0: no constraint), and only
/// masks the memory manager's grouping rules allow for memory (`memory`).
pub(crate) fn align(
    node: &NodeTopology,
    free: &[i64],
    reqs: &[Req],
    goal: Goal,
    must: u64,
    memory: Memory,
) -> Result<Option<u64>, Cause> {
    if reqs.is_empty() {
        return Ok(None);
    }
    let n = node.zone_count() as u32;
    let nres = node.resource_count();
    let width = match goal {
        Goal::SingleZone => {
            for leader in group_leaders(reqs) {
                if group_width(node, reqs, leader.group, 1)?.is_none() {
                    return Err(exceeds_zone(node, reqs, leader.group));
                }
            }
            1
        }
        Goal::MinimumWidth => {
            let mut common: Option<(u32, u32)> = None;
            for leader in group_leaders(reqs) {
                let w = group_width(node, reqs, leader.group, n)?.unwrap_or(n);
                match common {
                    None => common = Some((leader.pos, w)),
                    Some(first) if first.1 != w => {
                        return Err(Cause::WidthMismatch {
                            first,
                            second: (leader.pos, w),
                        });
                    }
                    Some(_) => {}
                }
            }
            common.map_or(1, |(_, w)| w)
        }
    };
    if count_masks(n, width) > MAX_MASKS {
        return Err(Cause::TooManyZones);
    }
    if width == 1 && !node.prefer_closest() {
        // The common case, without the mask machinery.
        let found = (0..n as usize).find(|&z| {
            must & !(1 << z) == 0
                && reqs
                    .iter()
                    .all(|r| free[z * nres + r.res as usize] >= r.need)
                && memory_allows(node, free, 1 << z, reqs, memory)
        });
        if let Some(z) = found {
            return Ok(Some(1 << z));
        }
    } else if let Some(mask) = choose(node, free, reqs, width, must, memory) {
        return Ok(Some(mask));
    }
    Err(diagnose(node, free, reqs, width, memory))
}

fn exceeds_zone(node: &NodeTopology, reqs: &[Req], group: u32) -> Cause {
    for r in members(reqs, group) {
        if node.min_width(r.res as usize, r.need) > 1 {
            let largest = (0..node.zone_count())
                .map(|z| node.hint_total(z, r.res as usize))
                .max()
                .unwrap_or(0);
            return Cause::ExceedsZone {
                pos: r.pos,
                largest,
            };
        }
    }
    // Each memory type fits some zone, but no zone holds all of them.
    Cause::Disjoint {
        positions: members(reqs, group).map(|r| r.pos).collect(),
        width: 1,
    }
}

/// Explains a failed search (the slow path: only runs for nodes that do not fit).
fn diagnose(node: &NodeTopology, free: &[i64], reqs: &[Req], width: u32, memory: Memory) -> Cause {
    let n = node.zone_count() as u32;
    let nres = node.resource_count();
    // Some sets have room for `of`, but the memory manager's groups rule them all out.
    let groups_forbid = |of: &[Req]| {
        let mut roomy = masks_of_width(n, width)
            .filter(|&m| fits(free, nres, m, of.iter().copied()))
            .peekable();
        roomy.peek().is_some() && !roomy.any(|m| memory_allows(node, free, m, of, memory))
    };
    for leader in group_leaders(reqs) {
        let group = members(reqs, leader.group);
        if masks_of_width(n, width).any(|m| fits(free, nres, m, group.clone())) {
            let mut of = Reqs::default();
            group.for_each(|r| of.push(r));
            if groups_forbid(of.as_slice()) {
                return Cause::MemoryGroups;
            }
            continue;
        }
        for r in group.clone() {
            // Zone counts are at most 64 (NUMA ids above 63 are refused).
            let mut zone_free = [0i64; 64];
            let zone_free = &mut zone_free[..n as usize];
            for (z, f) in zone_free.iter_mut().enumerate() {
                *f = free[z * nres + r.res as usize];
            }
            zone_free.sort_unstable_by(|a, b| b.cmp(a));
            let best_free = zone_free
                .iter()
                .take(width as usize)
                .fold(0i64, |a, &b| a.saturating_add(b));
            if best_free < r.need {
                return Cause::Insufficient {
                    pos: r.pos,
                    best_free,
                    width,
                };
            }
        }
        return Cause::Disjoint {
            positions: group.map(|r| r.pos).collect(),
            width,
        };
    }
    if groups_forbid(reqs) {
        return Cause::MemoryGroups;
    }
    Cause::Disjoint {
        positions: reqs.iter().map(|r| r.pos).collect(),
        width,
    }
}

/// `best-effort`: the aligned mask when there is one, else the narrowest (then lowest)
/// mask with enough free of everything, else every zone. The flag says whether the
/// kubelet's merged hint would be preferred. The non-preferred choice approximates the
/// kubelet's (which depends on hint order); `fit` uses it only where the literal merge
/// (the `providers` module) would cost too much.
pub(crate) fn best_effort(
    node: &NodeTopology,
    free: &[i64],
    reqs: &[Req],
    must: u64,
    memory: Memory,
) -> (Option<u64>, bool) {
    if let Ok(mask) = align(node, free, reqs, Goal::MinimumWidth, must, memory) {
        return (mask, true);
    }
    let n = node.zone_count() as u32;
    match narrowest(node, free, reqs, must, memory) {
        Some(mask) => (Some(mask), false),
        None => (Some(all_zones(n)), false),
    }
}

/// The narrowest (then lowest, or closest) mask that holds `reqs`, within
/// [`MAX_MASKS`] masks; `None` when there is none.
pub(crate) fn narrowest(
    node: &NodeTopology,
    free: &[i64],
    reqs: &[Req],
    must: u64,
    memory: Memory,
) -> Option<u64> {
    let n = node.zone_count() as u32;
    let mut budget = MAX_MASKS;
    for k in 1..=n {
        budget = budget.saturating_sub(count_masks(n, k));
        if budget == 0 {
            break;
        }
        if let Some(mask) = choose(node, free, reqs, k, must, memory) {
            return Some(mask);
        }
    }
    None
}

/// The mask of every zone.
pub(crate) fn all_zones(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

/// Takes `reqs` out of `free` for an allocation on `mask`. Within one zone that is
/// exact; across several zones the split is the kubelet's to choose, so each zone is
/// assumed to give as much as it can (a lower bound on what stays free anywhere).
pub(crate) fn allocate(free: &mut [i64], nres: usize, mask: u64, reqs: &[Req]) {
    for r in reqs {
        for z in bits(mask) {
            let at = z as usize * nres + r.res as usize;
            let take = if mask.count_ones() == 1 {
                r.need
            } else {
                r.need.min(free[at].max(0))
            };
            free[at] -= take;
        }
    }
}
