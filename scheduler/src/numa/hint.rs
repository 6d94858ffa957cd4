//! The kubelet Topology Manager's hint merge, over explicit hint lists.
//!
//! This is the literal algorithm (topology-manager.md, "Merge"): normalise each
//! resource's hint list, take the cross product, AND the masks of each permutation,
//! mark it preferred only if every member is preferred and all concrete masks are
//! equal, and keep the best merged hint (preferred beats non-preferred; among preferred
//! the narrowest, then the numerically lowest mask; among non-preferred the kubelet's
//! rule of creeping towards the widest provider minimum). `single-numa-node` first drops
//! every hint that is not preferred or spans more than one NUMA node. With the
//! `prefer-closest-numa-nodes` option ([`merge_closest`]; not for `single-numa-node`),
//! masks of equal width are compared by their average NUMA distance first.
//!
//! The cross product grows as the product of the list lengths, so [`super::fit`] does not
//! call this: it computes the same admission decision and the same chosen mask directly
//! from the zone amounts (see the `align` module). This module is the executable
//! specification the fast path is tested against, and a tool for diagnostics.

use tas_api::nrt::TopologyManagerPolicy;

/// A NUMA affinity hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hint {
    /// The NUMA bitmask (bit `i` = NUMA id `i`); `None` = "any".
    pub mask: Option<u64>,
    /// Whether this is a preferred (minimum-width) allocation.
    pub preferred: bool,
}

impl Hint {
    /// A hint for a concrete mask.
    pub const fn new(mask: u64, preferred: bool) -> Self {
        Self {
            mask: Some(mask),
            preferred,
        }
    }

    /// The "any NUMA node" hint.
    pub const fn any(preferred: bool) -> Self {
        Self {
            mask: None,
            preferred,
        }
    }
}

/// What one hint provider says about one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceHints {
    /// No opinion (the provider returned nil): normalised to `[{any, preferred}]`.
    DontCare,
    /// These hints; an empty list means "impossible": `[{any, not preferred}]`.
    Hints(Vec<Hint>),
}

/// The merged hint and whether `policy` admits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged {
    /// The best merged hint.
    pub hint: Hint,
    /// The admission decision.
    pub admit: bool,
}

/// Merges per-resource hints like the kubelet's `policy` on a machine whose NUMA ids are
/// the bits of `numa_nodes`.
pub fn merge(policy: TopologyManagerPolicy, numa_nodes: u64, hints: &[ResourceHints]) -> Merged {
    merge_closest(policy, numa_nodes, hints, None)
}

/// [`merge`] with the `prefer-closest-numa-nodes` policy option when `distance` is
/// given: `distance(from, to)` between NUMA ids (the NRT zone costs).
pub fn merge_closest(
    policy: TopologyManagerPolicy,
    numa_nodes: u64,
    hints: &[ResourceHints],
    distance: Option<&dyn Fn(u32, u32) -> u32>,
) -> Merged {
    merge_with(policy, numa_nodes, hints, distance, merge_lists)
}

/// [`merge_closest`] without visiting the cross product one permutation at a time (see
/// [`merge_states`]): cost grows with the list lengths times the distinct partial
/// merges, not with their product.
pub(crate) fn merge_closest_fast(
    policy: TopologyManagerPolicy,
    numa_nodes: u64,
    hints: &[ResourceHints],
    distance: Option<&dyn Fn(u32, u32) -> u32>,
) -> Merged {
    merge_with(policy, numa_nodes, hints, distance, merge_states)
}

type ListMerger = fn(u64, &[Vec<Hint>], Option<&dyn Fn(u32, u32) -> u32>) -> Hint;

fn merge_with(
    policy: TopologyManagerPolicy,
    numa_nodes: u64,
    hints: &[ResourceHints],
    distance: Option<&dyn Fn(u32, u32) -> u32>,
    merge_lists: ListMerger,
) -> Merged {
    use TopologyManagerPolicy as P;
    if policy == P::None {
        // The none policy gathers no hints and returns the zero hint.
        return Merged {
            hint: Hint::any(false),
            admit: true,
        };
    }
    let mut lists: Vec<Vec<Hint>> = hints
        .iter()
        .map(|h| match h {
            ResourceHints::DontCare => vec![Hint::any(true)],
            ResourceHints::Hints(list) if list.is_empty() => vec![Hint::any(false)],
            ResourceHints::Hints(list) => list.clone(),
        })
        .collect();
    if policy == P::SingleNumaNode {
        for list in &mut lists {
            list.retain(|h| h.preferred && h.mask.is_none_or(|m| m.count_ones() == 1));
        }
    }
    let closest = distance.filter(|_| policy != P::SingleNumaNode);
    let mut best = merge_lists(numa_nodes, &lists, closest);
    if policy == P::SingleNumaNode && best.mask == Some(numa_nodes) {
        best.mask = None;
    }
    let admit = match policy {
        P::None | P::BestEffort => true,
        P::Restricted | P::SingleNumaNode => best.preferred,
    };
    Merged { hint: best, admit }
}

/// The widest of the providers' narrowest concrete hints: among non-preferred merged
/// hints the kubelet aims for this width.
fn target_width(lists: &[Vec<Hint>]) -> u32 {
    lists
        .iter()
        .filter_map(|list| {
            list.iter()
                .filter_map(|h| h.mask)
                .min_by_key(|&m| (m.count_ones(), m))
        })
        .map(u64::count_ones)
        .max()
        .unwrap_or(0)
}

/// A permutation merged so far: the AND of its masks, whether it is still preferred
/// (every member preferred, every concrete mask equal, hence equal to the AND), and
/// whether it has a concrete mask yet.
type Partial = (u64, bool, bool);

/// [`merge_lists`] by distinct partial merges. Permutations that reach the same
/// [`Partial`] after the first `k` lists merge alike with any rest, and the kubelet
/// (last list fastest) visits the lexicographically first of them first; so keeping,
/// per partial merge, the first prefix reaching it gives every distinct merged hint with
/// the position of its first visit. The kubelet's pick over the distinct hints in that
/// order is its pick over the whole cross product: a hint seen again is never picked
/// over the best so far (checked against [`merge_lists`] in the tests).
pub(crate) fn merge_states(
    default: u64,
    lists: &[Vec<Hint>],
    closest: Option<&dyn Fn(u32, u32) -> u32>,
) -> Hint {
    use std::collections::BTreeMap;
    if lists.iter().any(Vec::is_empty) {
        return Hint::new(default, false);
    }
    let target = target_width(lists);
    // Partial merge -> first prefix (list positions) reaching it.
    let mut states: BTreeMap<Partial, Vec<usize>> = BTreeMap::new();
    states.insert((default, true, false), Vec::new());
    for list in lists {
        let mut next: BTreeMap<Partial, Vec<usize>> = BTreeMap::new();
        for (&(mask, preferred, concrete), prefix) in &states {
            for (i, hint) in list.iter().enumerate() {
                let state = match hint.mask {
                    Some(m) => (
                        mask & m,
                        preferred && hint.preferred && (!concrete || m == mask),
                        true,
                    ),
                    None => (mask, preferred && hint.preferred, concrete),
                };
                let mut path = prefix.clone();
                path.push(i);
                next.entry(state)
                    .and_modify(|p| {
                        if path < *p {
                            p.clone_from(&path);
                        }
                    })
                    .or_insert(path);
            }
        }
        states = next;
    }
    let mut visits: Vec<(Vec<usize>, Hint)> = states
        .into_iter()
        .map(|((mask, preferred, _), path)| (path, Hint::new(mask, preferred)))
        .collect();
    visits.sort_by(|a, b| a.0.cmp(&b.0));
    let mut best: Option<Hint> = None;
    for (_, candidate) in visits {
        best = pick(target, closest, best, candidate);
    }
    best.unwrap_or(Hint::new(default, false))
}

fn merge_lists(
    default: u64,
    lists: &[Vec<Hint>],
    closest: Option<&dyn Fn(u32, u32) -> u32>,
) -> Hint {
    let target = target_width(lists);
    let mut best: Option<Hint> = None;
    let mut picks = vec![0usize; lists.len()];
    if lists.iter().any(Vec::is_empty) {
        return Hint::new(default, false);
    }
    loop {
        let candidate = merge_permutation(default, lists.iter().zip(&picks).map(|(l, &i)| l[i]));
        best = pick(target, closest, best, candidate);
        // Odometer over the cross product, last list fastest, like the kubelet's recursion.
        let mut level = lists.len();
        loop {
            if level == 0 {
                return best.unwrap_or(Hint::new(default, false));
            }
            level -= 1;
            picks[level] += 1;
            if picks[level] < lists[level].len() {
                break;
            }
            picks[level] = 0;
        }
    }
}

fn merge_permutation(default: u64, permutation: impl Iterator<Item = Hint>) -> Hint {
    let mut mask = default;
    let mut first: Option<u64> = None;
    let mut preferred = true;
    for hint in permutation {
        if let Some(m) = hint.mask {
            mask &= m;
            if *first.get_or_insert(m) != m {
                preferred = false;
            }
        }
        preferred &= hint.preferred;
    }
    Hint::new(mask, preferred)
}

/// `a` is narrower than `b`: fewer NUMA nodes, then numerically lower.
pub(crate) fn narrower(a: u64, b: u64) -> bool {
    (a.count_ones(), a) < (b.count_ones(), b)
}

/// Sum of the distances between every ordered pair of `mask`'s NUMA ids (the diagonal
/// included): for masks of one width, the kubelet's average distance times a constant.
pub(crate) fn distance_sum(mask: u64, distance: &dyn Fn(u32, u32) -> u32) -> u64 {
    let mut sum = 0u64;
    for from in super::mask::bits(mask) {
        for to in super::mask::bits(mask) {
            sum += u64::from(distance(from, to));
        }
    }
    sum
}

/// `a` is closer than `b` (`prefer-closest-numa-nodes`): narrower when the widths
/// differ, else a smaller average distance, else numerically lower.
pub(crate) fn closer(a: u64, b: u64, distance: &dyn Fn(u32, u32) -> u32) -> bool {
    if a.count_ones() != b.count_ones() {
        return narrower(a, b);
    }
    (distance_sum(a, distance), a) < (distance_sum(b, distance), b)
}

fn fitter(closest: Option<&dyn Fn(u32, u32) -> u32>, current: Hint, candidate: Hint) -> Hint {
    let (c, k) = (current.mask.unwrap_or(0), candidate.mask.unwrap_or(0));
    let better = match closest {
        Some(distance) => closer(k, c, distance),
        None => narrower(k, c),
    };
    if c != k && better { candidate } else { current }
}

/// The kubelet's comparison of the best hint so far with a new merged hint.
fn pick(
    target: u32,
    closest: Option<&dyn Fn(u32, u32) -> u32>,
    current: Option<Hint>,
    candidate: Hint,
) -> Option<Hint> {
    let fitter = |current, candidate| fitter(closest, current, candidate);
    let width = |h: Hint| h.mask.unwrap_or(0).count_ones();
    if width(candidate) == 0 {
        return current;
    }
    let Some(current) = current else {
        return Some(candidate);
    };
    Some(match (current.preferred, candidate.preferred) {
        (false, true) => candidate,
        (true, false) => current,
        (true, true) => fitter(current, candidate),
        (false, false) => {
            let (cur, cand) = (width(current), width(candidate));
            if cur > target {
                fitter(current, candidate)
            } else if cur == target {
                if cand == target {
                    fitter(current, candidate)
                } else {
                    current
                }
            } else if cand > target {
                current
            } else if cand == target || cand > cur {
                candidate
            } else if cand < cur {
                current
            } else {
                fitter(current, candidate)
            }
        }
    })
}
