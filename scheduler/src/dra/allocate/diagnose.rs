//! Why the search found nothing, for a human: the first request that cannot be
//! satisfied even on its own (how its matching devices split into free, in use,
//! tainted, outside the zones), or else the combination of requests and constraints.

use super::{Search, Slot};
use crate::dra::error::{AllocateError, Shortage};
use crate::dra::request::{Alternative, Mode};

impl Search<'_, '_> {
    /// The devices matching `alt` in pools that may be used, for a diagnosis: a
    /// device whose selectors fail at run time counts as not matching.
    fn matching(&mut self, alt: &Alternative<'_>) -> Vec<usize> {
        if alt.mode == Mode::All {
            return self.all[alt.id].to_vec();
        }
        (0..self.node.devices.len())
            .filter(|&d| {
                self.node.pool_is_usable(self.node.devices[d].pool)
                    && self.selected(alt, d).unwrap_or(false)
            })
            .collect()
    }

    /// Why the search found nothing: the first request that cannot be satisfied even
    /// on its own, or else the combination.
    pub(super) fn diagnose(&mut self) -> AllocateError {
        for slot in 0..self.slots.len() {
            let Slot { claim, request } = self.slots[slot];
            let alternatives = self.plans[claim].requests[request].alternatives.len();
            let mut first = None;
            for alternative in 0..alternatives {
                let alt = self.alternative(slot, alternative);
                let candidates = self.matching(alt);
                let shortage = self.shortage(alt.mode, &candidates);
                let enough = match alt.mode {
                    Mode::Exact(n) => shortage.free() >= n,
                    Mode::All => shortage.matching > 0 && shortage.free() == shortage.matching,
                };
                if enough {
                    first = None;
                    break;
                }
                first.get_or_insert((alt, shortage));
            }
            if let Some((alt, shortage)) = first {
                let claim = self.plans[claim].name.clone();
                let request = alt.result_name.clone();
                return match alt.mode {
                    Mode::Exact(_) => AllocateError::Unsatisfiable {
                        claim,
                        request,
                        shortage,
                    },
                    Mode::All => AllocateError::AllDevicesUnavailable {
                        claim,
                        request,
                        problem: format!("not all of them are free: {shortage}"),
                    },
                };
            }
        }
        AllocateError::NoCombination
    }

    /// How the matching devices of an alternative split into free and not.
    fn shortage(&self, mode: Mode, candidates: &[usize]) -> Shortage {
        let mut shortage = Shortage {
            needed: match mode {
                Mode::Exact(n) => n,
                Mode::All => 1,
            },
            matching: candidates.len(),
            in_use: 0,
            tainted: 0,
            outside_zones: 0,
            unsupported: 0,
            unusable_pools: Vec::new(),
        };
        for &device in candidates {
            let d = &self.node.devices[device];
            if self.external[device] {
                shortage.in_use += 1;
            } else if d.excluded.is_some() {
                shortage.unsupported += 1;
            } else if d.tainted {
                shortage.tainted += 1;
            } else if !self.rule.admits(d.zones.as_ref()) {
                shortage.outside_zones += 1;
            }
        }
        if shortage.free() < shortage.needed {
            shortage.unusable_pools = self
                .node
                .pools
                .iter()
                .enumerate()
                .filter(|(i, _)| !self.node.pool_is_usable(*i))
                .filter_map(|(_, p)| p.problem())
                .collect();
        }
        shortage
    }
}
