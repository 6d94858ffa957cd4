//! The kubelet's hint providers, literally, for `best-effort` requests that cannot be
//! aligned.
//!
//! When no merged hint can be preferred, `best-effort` still admits, but the
//! non-preferred hint it picks is what the memory manager then extends or refuses (see
//! the `memory` module), so the scheduler needs the same one. It depends on the
//! providers' whole hint lists and on their order, so they are built here as the
//! kubelet builds them and merged like [`super::hint::merge_closest`] (by distinct
//! partial merges, [`super::hint::merge_closest_fast`]):
//! - device manager, one list per device resource: every zone set (in the kubelet's
//!   order: by width, then lexicographically) with enough free devices that holds the
//!   devices earlier init containers left to reuse; preferred at the fewest zones whose
//!   devices (free or not) could hold the request. Kubelets from 1.36 on build it over
//!   the zones holding such devices only (a zone set with another zone is no hint),
//!   which changes the merge only where no hint is preferred
//!   ([`NodeTopology::device_hint_zones`]);
//! - CPU manager: the same for exclusive CPUs;
//! - memory manager, one (identical) list per memory type: its own hints (see
//!   [`MemoryManager::hints`]); no hints at all reads as "no preference".
//!
//! The merge's work (list lengths times distinct partial merges, at most four per zone
//! set) is bounded by [`MAX_MERGE_WORK`]; beyond it the caller keeps its approximation.

use tas_api::nrt::TopologyManagerPolicy;

use super::align::{CPU_GROUP, FIRST_DEVICE_GROUP, MEMORY_GROUP, Req};
use super::hint::{Hint, ResourceHints, merge_closest_fast};
use super::mask::bits;
use super::memory::MemoryManager;
use super::topology::NodeTopology;

/// Most (partial merge, hint) pairs the merge may visit.
pub(crate) const MAX_MERGE_WORK: u64 = 1 << 21;

/// Every non-empty zone set of `n` zones in the kubelet's order (IterateBitMasks).
fn kubelet_masks(n: u32) -> Vec<u64> {
    fn combos(from: u32, n: u32, left: u32, acc: u64, out: &mut Vec<u64>) {
        if left == 0 {
            out.push(acc);
            return;
        }
        for z in from..n {
            combos(z + 1, n, left - 1, acc | 1 << z, out);
        }
    }
    let mut out = Vec::new();
    for k in 1..=n {
        combos(0, n, k, 0, &mut out);
    }
    out
}

/// The merged hint the kubelet's `best-effort` policy picks for `reqs` on `free`
/// (zone-index masks), or `None` when the lists are too long to merge. `must(res)`:
/// zones holding what earlier init containers left to reuse of node resource `res`.
pub(crate) fn merged(
    node: &NodeTopology,
    free: &[i64],
    reqs: &[Req],
    must: &dyn Fn(u32) -> u64,
    memory: Option<&MemoryManager<'_>>,
) -> Option<Hint> {
    let n = node.zone_count() as u32;
    if n > 16 {
        return None;
    }
    let nres = node.resource_count();
    let masks = kubelet_masks(n);
    let sum = |mask: u64, res: u32| -> i64 {
        bits(mask).fold(0i64, |acc, z| {
            acc.saturating_add(free[z as usize * nres + res as usize])
        })
    };
    let single = |r: &Req| -> ResourceHints {
        let min_width = node.min_width(r.res as usize, r.need);
        let keep = must(r.res);
        // Kubelets from 1.36 on build device hints over the zones holding such devices.
        let over = if r.group >= FIRST_DEVICE_GROUP {
            node.device_hint_zones(r.res as usize)
        } else {
            u64::MAX
        };
        ResourceHints::Hints(
            masks
                .iter()
                .filter(|&&m| m & !over == 0 && m & keep == keep && sum(m, r.res) >= r.need)
                .map(|&m| Hint::new(m, m.count_ones() == min_width))
                .collect(),
        )
    };
    let mut lists = Vec::new();
    // Device manager, then CPU manager, then memory manager, as the kubelet adds them.
    for r in reqs.iter().filter(|r| r.group > MEMORY_GROUP) {
        lists.push(single(r));
    }
    for r in reqs.iter().filter(|r| r.group == CPU_GROUP) {
        lists.push(single(r));
    }
    let mem: Vec<Req> = reqs
        .iter()
        .copied()
        .filter(|r| r.group == MEMORY_GROUP)
        .collect();
    if !mem.is_empty() {
        match memory {
            Some(mm) => {
                let mut hints = mm.hints(&mem);
                if hints.is_empty() {
                    lists.push(ResourceHints::DontCare);
                } else {
                    let rank = |m: u64| masks.iter().position(|&k| k == m);
                    hints.sort_by_key(|&(m, _)| rank(m));
                    let list: Vec<Hint> = hints.iter().map(|&(m, p)| Hint::new(m, p)).collect();
                    for _ in &mem {
                        lists.push(ResourceHints::Hints(list.clone()));
                    }
                }
            }
            None => return None,
        }
    }
    // Distinct partial merges: at most the prefixes, and at most four per zone set.
    let most_states = 4u64 << n;
    let (mut states, mut work) = (1u64, 0u64);
    for l in &lists {
        let len = match l {
            ResourceHints::Hints(h) => h.len().max(1) as u64,
            ResourceHints::DontCare => 1,
        };
        work = work.saturating_add(states.saturating_mul(len));
        states = states.saturating_mul(len).min(most_states);
    }
    if work > MAX_MERGE_WORK {
        return None;
    }
    let distance = |a: u32, b: u32| node.zone_distance(a as usize, b as usize);
    let closest: Option<&dyn Fn(u32, u32) -> u32> = if node.prefer_closest() {
        Some(&distance)
    } else {
        None
    };
    let all = if n >= 64 { u64::MAX } else { (1 << n) - 1 };
    let result = merge_closest_fast(TopologyManagerPolicy::BestEffort, all, &lists, closest);
    Some(result.hint)
}
