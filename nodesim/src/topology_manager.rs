//! The Topology Manager's decision: merge the hint providers' hints and admit or not.
//!
//! Each provider (CPU, memory, device manager) answers with [`ResourceHints`]: per
//! resource either `None` ("don't care") or a list of hints, possibly empty
//! ("impossible"). [`merge`] normalises them (a provider with no resources and a
//! "don't care" resource become `[{any, preferred}]`; an empty list becomes
//! `[{any, not preferred}]`), takes the cross product of the lists, ANDs the masks of
//! each permutation (preferred only if every member is preferred and all non-"any" masks
//! are equal), and picks the best merged hint:
//!
//! 1. a preferred hint beats a non-preferred one; among preferred ones the narrowest
//!    wins (fewest nodes, then the numerically lower mask);
//! 2. among non-preferred ones the kubelet aims at the widest of the providers'
//!    narrowest hints (`B`): a mask of exactly `B` nodes, else the narrowest wider one,
//!    else the widest narrower one. (The kubelet's choice here depends on the order in
//!    which it walks Go maps; this is the deterministic reading of it.)
//!
//! With no non-empty merged mask the result is all nodes, not preferred. The policy then
//! decides admission (see [`merge`]).
//!
//! The cross product is folded list by list over the distinct partial results, which
//! gives the same set of merged hints as enumerating every permutation without its
//! exponential cost.

use std::collections::{BTreeMap, BTreeSet};

use tas_api::nrt::TopologyManagerPolicy;

use crate::mask::{Hint, NumaMask};

/// One provider's hints: resource name → `None` (don't care) or the feasible hints.
pub type ResourceHints = BTreeMap<String, Option<Vec<Hint>>>;

/// The merged hint and whether the policy admits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// The hint resources are then allocated by.
    pub hint: Hint,
    /// Whether the pod (or container) may be admitted.
    pub admit: bool,
}

/// Merges `providers`' hints on a machine of `zones` NUMA nodes under `policy`:
///
/// - `none`: no hints are gathered; admits with "any";
/// - `best-effort`: admits with the best merged hint;
/// - `restricted`: admits if the best merged hint is preferred;
/// - `single-numa-node`: only preferred single-node (or "any") hints take part; admits
///   if the best merged hint is preferred. A merged mask of all nodes becomes "any".
pub fn merge(policy: TopologyManagerPolicy, zones: u32, providers: &[ResourceHints]) -> Decision {
    let default = NumaMask::all(zones);
    let mut lists = normalise(providers);
    match policy {
        TopologyManagerPolicy::None => Decision {
            hint: Hint::any(true),
            admit: true,
        },
        TopologyManagerPolicy::BestEffort => Decision {
            hint: best_hint(default, &lists),
            admit: true,
        },
        TopologyManagerPolicy::Restricted => {
            let hint = best_hint(default, &lists);
            Decision {
                hint,
                admit: hint.preferred,
            }
        }
        TopologyManagerPolicy::SingleNumaNode => {
            for list in &mut lists {
                list.retain(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1));
            }
            let mut hint = best_hint(default, &lists);
            if hint.affinity == Some(default) {
                hint.affinity = None;
            }
            Decision {
                hint,
                admit: hint.preferred,
            }
        }
    }
}

/// One hint list per resource, "don't care" and "impossible" made explicit.
pub fn normalise(providers: &[ResourceHints]) -> Vec<Vec<Hint>> {
    let mut lists = Vec::new();
    for provider in providers {
        if provider.is_empty() {
            lists.push(vec![Hint::any(true)]);
        }
        for hints in provider.values() {
            lists.push(match hints {
                None => vec![Hint::any(true)],
                Some(hints) if hints.is_empty() => vec![Hint::any(false)],
                Some(hints) => hints.clone(),
            });
        }
    }
    lists
}

/// A permutation merged so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Partial {
    and: NumaMask,
    preferred: bool,
    /// The first non-"any" mask seen, while still preferred.
    first: Option<NumaMask>,
}

impl Partial {
    fn with(self, hint: &Hint) -> Option<Partial> {
        let mut next = self;
        if let Some(mask) = hint.affinity {
            next.and = next.and.and(mask);
            match next.first {
                None => next.first = Some(mask),
                Some(first) if first != mask => next.preferred = false,
                Some(_) => {}
            }
        }
        next.preferred &= hint.preferred;
        if !next.preferred {
            next.first = None;
        }
        // ANDing only removes nodes: an empty mask stays empty and is never chosen.
        (!next.and.is_empty()).then_some(next)
    }
}

/// The best merged hint over the cross product of `lists`.
pub fn best_hint(default: NumaMask, lists: &[Vec<Hint>]) -> Hint {
    let mut partials = BTreeSet::from([Partial {
        and: default,
        preferred: true,
        first: None,
    }]);
    for list in lists {
        partials = partials
            .iter()
            .flat_map(|p| list.iter().filter_map(|h| p.with(h)))
            .collect();
    }
    let merged: BTreeSet<Hint> = partials
        .iter()
        .map(|p| Hint::new(p.and, p.preferred))
        .collect();
    select(&merged, best_non_preferred_count(lists)).unwrap_or(Hint::new(default, false))
}

/// The widest of the narrowest non-"any" hint of each list.
fn best_non_preferred_count(lists: &[Vec<Hint>]) -> u32 {
    lists
        .iter()
        .filter_map(|list| {
            list.iter()
                .filter_map(|h| h.affinity)
                .min_by_key(|m| (m.count(), m.bits()))
        })
        .map(NumaMask::count)
        .max()
        .unwrap_or(0)
}

fn select(merged: &BTreeSet<Hint>, target: u32) -> Option<Hint> {
    let key = |h: &&Hint| h.affinity.map(|m| (m.count(), m.bits()));
    if let Some(best) = merged.iter().filter(|h| h.preferred).min_by_key(key) {
        return Some(*best);
    }
    let count = |h: &Hint| h.affinity.map_or(0, NumaMask::count);
    let exact = merged.iter().filter(|h| count(h) == target).min_by_key(key);
    let wider = || merged.iter().filter(|h| count(h) > target).min_by_key(key);
    let narrower = || {
        merged
            .iter()
            .filter(|h| count(h) < target)
            .min_by_key(|h| h.affinity.map(|m| (u32::MAX - m.count(), m.bits())))
    };
    exact.or_else(wider).or_else(narrower).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use TopologyManagerPolicy::{BestEffort, Restricted, SingleNumaNode};

    fn m(ids: &[u32]) -> NumaMask {
        NumaMask::of(ids.iter().copied())
    }

    fn provider(resources: &[(&str, Option<Vec<Hint>>)]) -> ResourceHints {
        resources
            .iter()
            .map(|(name, hints)| (name.to_string(), hints.clone()))
            .collect()
    }

    fn pref(ids: &[u32]) -> Hint {
        Hint::new(m(ids), true)
    }

    fn not(ids: &[u32]) -> Hint {
        Hint::new(m(ids), false)
    }

    /// Worked case 1: cpu {0}/pref, device {0,1}/pref.
    #[test]
    fn case_1_preferred_masks_that_differ_merge_to_not_preferred() {
        let providers = [
            provider(&[("cpu", Some(vec![pref(&[0])]))]),
            provider(&[("example.com/nic", Some(vec![pref(&[0, 1])]))]),
        ];
        let best_effort = merge(BestEffort, 2, &providers);
        assert_eq!(best_effort.hint, not(&[0]));
        assert!(best_effort.admit);
        assert!(!merge(Restricted, 2, &providers).admit);
        assert!(!merge(SingleNumaNode, 2, &providers).admit);
    }

    /// Worked case 2: r1 [{0,1,2,3}/no, {0,1}/no], r2 [{0,3}/no] → {0,3} not preferred.
    #[test]
    fn case_2_non_preferred_aims_at_the_widest_narrowest_hint() {
        let providers = [provider(&[
            ("r1", Some(vec![not(&[0, 1, 2, 3]), not(&[0, 1])])),
            ("r2", Some(vec![not(&[0, 3])])),
        ])];
        let decision = merge(BestEffort, 4, &providers);
        assert_eq!(decision.hint, not(&[0, 3]));
        assert!(!merge(Restricted, 4, &providers).admit);
    }

    /// Worked case 3: single-numa-node drops r1's only (two-node) hint and rejects.
    #[test]
    fn case_3_single_numa_node_rejects_a_resource_without_single_node_hints() {
        let providers = [provider(&[
            ("r1", Some(vec![pref(&[0, 1])])),
            ("r2", Some(vec![pref(&[0]), pref(&[1]), not(&[0, 1])])),
        ])];
        let decision = merge(SingleNumaNode, 2, &providers);
        assert!(!decision.admit);
        // Restricted rejects too: no permutation is preferred with equal masks.
        let restricted = merge(Restricted, 2, &providers);
        assert_eq!(
            restricted,
            Decision {
                hint: not(&[0, 1]),
                admit: false
            }
        );
    }

    /// Worked case 4: an empty list (too few devices) is "any, not preferred".
    #[test]
    fn case_4_impossible_resource_is_any_not_preferred() {
        let providers = [provider(&[("example.com/nic", Some(vec![]))])];
        let best_effort = merge(BestEffort, 2, &providers);
        assert_eq!(best_effort.hint, not(&[0, 1]), "all nodes, i.e. any");
        assert!(best_effort.admit);
        assert!(!merge(Restricted, 2, &providers).admit);
        assert!(!merge(SingleNumaNode, 2, &providers).admit);
    }

    #[test]
    fn preferred_beats_narrower_not_preferred_then_narrowest_then_lowest() {
        let providers = [
            provider(&[("cpu", Some(vec![not(&[1]), pref(&[0, 1]), pref(&[2, 3])]))]),
            provider(&[]),
        ];
        assert_eq!(merge(BestEffort, 4, &providers).hint, pref(&[0, 1]));
        let providers = [provider(&[("cpu", Some(vec![pref(&[3]), pref(&[1])]))])];
        assert_eq!(merge(Restricted, 4, &providers).hint, pref(&[1]));
    }

    #[test]
    fn dont_care_everywhere_is_any_and_admitted() {
        let providers = [provider(&[("cpu", None)]), provider(&[])];
        assert_eq!(
            merge(SingleNumaNode, 2, &providers),
            Decision {
                hint: Hint::any(true),
                admit: true
            }
        );
        let restricted = merge(Restricted, 2, &providers);
        assert_eq!(restricted.hint, pref(&[0, 1]));
        assert!(restricted.admit);
        assert!(
            merge(
                TopologyManagerPolicy::None,
                2,
                &[provider(&[("x", Some(vec![]))])]
            )
            .admit
        );
    }

    #[test]
    fn single_numa_node_takes_the_common_single_node() {
        let providers = [
            provider(&[("cpu", Some(vec![pref(&[0]), pref(&[1]), not(&[0, 1])]))]),
            provider(&[
                ("memory", Some(vec![pref(&[1]), not(&[0, 1])])),
                ("hugepages-2Mi", Some(vec![pref(&[1]), not(&[0, 1])])),
            ]),
        ];
        assert_eq!(
            merge(SingleNumaNode, 2, &providers),
            Decision {
                hint: pref(&[1]),
                admit: true
            }
        );
    }
}
