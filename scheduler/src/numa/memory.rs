//! The memory manager `Static`'s own Allocate step, after the Topology Manager's merge.
//!
//! Every container of a Guaranteed pod gets its memory and hugepages pinned, under
//! every Topology Manager policy and in both scopes, from the hint the Topology Manager
//! hands over (the container's merged hint, the pod's in `pod` scope, none under policy
//! `none`). The memory manager then, per container in admission order:
//! - without a hint, takes its own best one: among its hints (below) the preferred,
//!   then narrowest, then lowest ("no NUMA nodes with enough memory" when it has none);
//! - when the hint's zones do not have enough free of each requested memory type,
//!   extends it: its best hint among those holding the hint's zones ("failed to find
//!   NUMA nodes to extend the current topology hint" when none; "failed to find the
//!   extended preferred hint" when the hint was preferred and the extension is not);
//! - refuses zones that would mix a single-zone and a multi-zone allocation, or two
//!   multi-zone groups ("preferred hint violates NUMA node allocation");
//! - takes the memory zone by zone in ascending order, less what the pod's regular init
//!   containers left on exactly these zones (app containers reuse it).
//!
//! Its hints: every zone set whose allocatable holds the request, that does not mix
//! groups, and whose free (plus reusable) holds it; preferred when of the fewest zones
//! whose allocatable holds it. Which zones hold pinned memory and how they are grouped
//! comes from the zones' `memoryManagerGroup` attributes (the memory manager's own
//! per-zone `Cells`); a zone without one that has memory taken is taken as holding a
//! single-zone allocation (NRTs of writers that do not publish groups). The groups the
//! pod itself forms are tracked exactly.

use super::align::Req;
use super::hint::narrower;
use super::mask::bits;
use super::request::ContainerKind;
use super::scratch::ZoneTable;
use super::topology::NodeTopology;
use super::unfit::MemoryRefusal;

/// Zone counts up to this are emulated (every zone set is enumerated); beyond, the
/// memory manager's own step is not checked.
const MAX_ZONES: usize = 12;

/// A hint as the memory manager sees it: a zone-index mask and whether it is preferred.
pub(crate) type MemoryHint = (u64, bool);

/// The memory manager's state for one pod's admission.
#[derive(Clone)]
pub(crate) struct MemoryManager<'n> {
    node: &'n NodeTopology,
    /// Zone-major free amounts, like [`NodeTopology::free`].
    free: ZoneTable,
    /// Per zone: the zone set its allocations belong to (its own bit when alone).
    cells: [u64; MAX_ZONES],
    /// Per zone: whether it holds any allocation.
    assigned: [bool; MAX_ZONES],
    /// What regular init containers left to reuse: (zone set, resource, amount).
    reusable: Vec<(u64, u32, i64)>,
    /// Zone-index mask of the zones whose cells are not known (the node's doubted
    /// zones, until [`Self::in_world`] settles them): no allocation goes there.
    doubted: u64,
}

impl<'n> MemoryManager<'n> {
    /// The state seen in `free`; `None` when the node has too many zones to emulate.
    pub(crate) fn new(node: &'n NodeTopology, free: &[i64]) -> Option<Self> {
        let n = node.zone_count();
        if n > MAX_ZONES {
            return None;
        }
        let mut cells = [0; MAX_ZONES];
        let mut assigned = [false; MAX_ZONES];
        for z in 0..n {
            (cells[z], assigned[z]) = node.memory_state(free, z);
        }
        Some(Self {
            node,
            free: ZoneTable::copy_of(free),
            cells,
            assigned,
            reusable: Vec::new(),
            doubted: node.doubted_memory(),
        })
    }

    /// This state in one of the worlds a doubt allows ([`super::memory_doubt`]): the
    /// doubted zones in `split` hold their own cells (the kubelet left them single when
    /// it refused a pod part-way; their group's allocation keeps them assigned), the
    /// other doubted zones hold the group their object shows. Nothing is doubted then.
    pub(crate) fn in_world(mut self, split: u64) -> Self {
        for z in bits(split & self.doubted) {
            let z = z as usize;
            self.cells[z] = 1 << z;
            self.assigned[z] = true;
        }
        self.doubted = 0;
        self
    }

    /// Whether the memory manager's grouping rules let memory go to exactly `mask`
    /// (see [`groups_allow`]), in the state this manager has reached.
    pub(crate) fn allows(&self, mask: u64) -> bool {
        groups_allow(mask, |z| (self.cells[z], self.assigned[z]))
    }

    fn sum(&self, table: &[i64], mask: u64, res: u32) -> i64 {
        let nres = self.node.resource_count();
        bits(mask).fold(0i64, |acc, z| {
            acc.saturating_add(table[z as usize * nres + res as usize])
        })
    }

    fn reuse(&self, mask: u64, res: u32) -> i64 {
        self.reusable
            .iter()
            .find(|&&(m, r, _)| m == mask && r == res)
            .map_or(0, |&(_, _, a)| a)
    }

    /// Whether a multi-zone `mask` would mix groups.
    fn violates(&self, mask: u64) -> bool {
        mask.count_ones() > 1
            && bits(mask).any(|z| {
                let z = z as usize;
                self.assigned[z] && self.cells[z] != mask
            })
    }

    /// Whether `mask` is one of the memory manager's hints for `reqs`, leaving aside
    /// whether its allocatable holds them.
    fn usable(&self, mask: u64, reqs: &[Req]) -> bool {
        self.allows(mask)
            && reqs.iter().all(|r| {
                self.sum(&self.free, mask, r.res)
                    .saturating_add(self.reuse(mask, r.res))
                    >= r.need
            })
    }

    fn holds(&self, mask: u64, reqs: &[Req]) -> bool {
        let allocatable = self.node.allocatable_table();
        reqs.iter()
            .all(|r| self.sum(allocatable, mask, r.res) >= r.need)
    }

    /// The memory manager's hints for `reqs` (calculateHints).
    pub(crate) fn hints(&self, reqs: &[Req]) -> Vec<MemoryHint> {
        let n = self.node.zone_count() as u32;
        let mut min_width = n;
        let mut found = Vec::new();
        for mask in 1..(1u64 << n) {
            if !self.holds(mask, reqs) {
                continue;
            }
            min_width = min_width.min(mask.count_ones());
            if self.usable(mask, reqs) {
                found.push(mask);
            }
        }
        found
            .into_iter()
            .map(|m| (m, m.count_ones() == min_width))
            .collect()
    }

    /// Whether the memory manager has no hint at all for `reqs`: the Topology Manager
    /// then reads it as having no preference.
    pub(crate) fn indifferent(&self, reqs: &[Req]) -> bool {
        let n = self.node.zone_count() as u32;
        !reqs.is_empty() && !(1..(1u64 << n)).any(|m| self.usable(m, reqs) && self.holds(m, reqs))
    }

    /// Allocates `reqs` (the container's memory and hugepages) for a container of
    /// `kind` given the Topology Manager's hint (`mask`, `None`: no NUMA affinity) and
    /// whether it is preferred; returns the zones used.
    pub(crate) fn allocate(
        &mut self,
        kind: ContainerKind,
        reqs: &[Req],
        mask: Option<u64>,
        preferred: bool,
    ) -> Result<u64, MemoryRefusal> {
        if reqs.is_empty() {
            return Ok(0);
        }
        let mut best = match mask {
            Some(m) => (m, preferred),
            None => {
                let default = best_hint(self.hints(reqs)).ok_or(MemoryRefusal::NoZones)?;
                if !default.1 && preferred {
                    return Err(MemoryRefusal::DefaultNotPreferred);
                }
                default
            }
        };
        let satisfied = reqs
            .iter()
            .all(|r| self.sum(&self.free, best.0, r.res) >= r.need);
        if !satisfied {
            let within = best.0;
            let candidates = self
                .hints(reqs)
                .into_iter()
                .filter(|&(m, _)| m & within == within);
            let extended = best_hint(candidates).ok_or(MemoryRefusal::CannotExtend)?;
            if !extended.1 && best.1 {
                return Err(MemoryRefusal::ExtensionNotPreferred);
            }
            best = extended;
        }
        let mask = best.0;
        if self.violates(mask) {
            return Err(MemoryRefusal::MixesGroups);
        }
        // Whether the kubelet's cells of a doubted zone are its group's or its own, an
        // allocation there may be refused; the hints above are the NRT's either way.
        if mask & self.doubted != 0 {
            return Err(MemoryRefusal::Doubted);
        }
        let nres = self.node.resource_count();
        for r in reqs {
            let mut need = (r.need - self.reuse(mask, r.res)).max(0);
            for z in bits(mask) {
                let z = z as usize;
                self.assigned[z] = true;
                self.cells[z] = mask;
                let free = &mut self.free[z * nres + r.res as usize];
                let take = need.min((*free).max(0));
                *free -= take;
                need -= take;
            }
        }
        for r in reqs {
            let at = self
                .reusable
                .iter()
                .position(|&(m, res, _)| m == mask && res == r.res);
            match (kind, at) {
                (ContainerKind::Init, Some(i)) => {
                    self.reusable[i].2 = self.reusable[i].2.max(r.need);
                }
                (ContainerKind::Init, None) => self.reusable.push((mask, r.res, r.need)),
                (_, Some(i)) => self.reusable[i].2 = (self.reusable[i].2 - r.need).max(0),
                (_, None) => {}
            }
        }
        Ok(mask)
    }
}

/// The memory manager's grouping rules for a hint `mask` (calculateHints), given each
/// zone index's state: the mask of the zones it is grouped with (its own bit when alone)
/// and whether it holds pinned memory.
/// - a single zone is usable unless it belongs to a multi-zone group;
/// - several zones are usable when each of them holds nothing yet or belongs to exactly
///   this group (never a zone holding single-zone allocations, never another group).
pub(crate) fn groups_allow(mask: u64, state: impl Fn(usize) -> (u64, bool)) -> bool {
    if mask.count_ones() == 1 {
        return state(mask.trailing_zeros() as usize).0 == mask;
    }
    bits(mask).all(|z| {
        let (cells, assigned) = state(z as usize);
        !assigned || cells == mask
    })
}

/// findBestHint: preferred first, then the narrowest, then the lowest.
fn best_hint(hints: impl IntoIterator<Item = MemoryHint>) -> Option<MemoryHint> {
    let mut best: Option<MemoryHint> = None;
    for h in hints {
        best = match best {
            None => Some(h),
            Some(b) if h.1 && !b.1 => Some(h),
            Some(b) if h.1 == b.1 && narrower(h.0, b.0) => Some(h),
            keep => keep,
        };
    }
    best
}
