//! The fragmentation-aware (`BestFit`) NUMA score: prefer the node where the pod fills
//! the zone the kubelet will give it most tightly, and where no large zone is broken.
//!
//! With `single-numa-node` (and `restricted`) the kubelet, not the scheduler, chooses
//! the zone: among the single zones that hold every aligned request it takes the
//! lowest-numbered one (the narrowest preferred hint, ties to the lower mask). So the
//! score looks at that zone `z`, not at the node's best zone:
//!
//! - `tight` — `Σ w·(100 − leftover·100/allocatable) / Σ w` over the weighted
//!   resources of `z`, with `leftover = free − request`: 100 when the pod fills `z`
//!   exactly, low when it takes a sliver of an empty zone;
//! - `keep` — 100 when another zone of the node has at least as many free CPUs as `z`;
//!   otherwise `largest free CPUs after / largest before · 100`: breaking the node's
//!   only large zone costs up to 100.
//!
//! The score is `(3·tight + keep) / 4`. A pod that fits in no single zone (it spans
//! zones) is scored like MostAllocated over the smallest fitting zone sets.

use super::align::Req;
use super::resources::{ResourceId, Resources};
use super::score::ScoreConfig;
use super::topology::NodeTopology;

/// The name of the CPU resource in NRT objects.
const CPU: &str = "cpu";

/// Scores the lowest single zone that holds all of `reqs`, or `None` when no single
/// zone does.
pub(super) fn best_fit_score(
    node: &NodeTopology,
    reqs: &[Req],
    request: &Resources,
    config: &ScoreConfig,
) -> Option<u8> {
    let n = node.zone_count();
    let nres = node.resource_count();
    let free = node.free();
    let alloc = node.allocatable_table();
    let zone = (0..n).find(|&z| {
        reqs.iter()
            .all(|r| free[z * nres + r.res as usize] >= r.need)
    })?;

    let (mut total, mut weights) = (0i128, 0i128);
    for (name, w) in config.weights.iter().filter(|(_, w)| *w > 0) {
        let Some(ri) = node.named_index(name) else {
            continue;
        };
        let cap = i128::from(alloc[zone * nres + ri]);
        if cap <= 0 {
            continue;
        }
        let left =
            (i128::from(free[zone * nres + ri]) - i128::from(requested(request, name))).max(0);
        total += i128::from(*w) * (100 - (left * 100 / cap).min(100));
        weights += i128::from(*w);
    }
    let tight = if weights == 0 { 0 } else { total / weights };

    let keep = match node.resource_index_of(ResourceId::CPU, CPU) {
        None => 100,
        Some(ri) => {
            let cpu = |z: usize| i128::from(free[z * nres + ri]);
            let others = (0..n).filter(|&z| z != zone).map(cpu).max().unwrap_or(0);
            let before = cpu(zone);
            if others >= before || before <= 0 {
                100
            } else {
                let after = (before - i128::from(request.get_id(ResourceId::CPU))).max(others);
                after * 100 / before
            }
        }
    };
    Some(((3 * tight + keep) / 4).clamp(0, 100) as u8)
}

/// The amount of `name` in `request`: by id for the well-known names.
pub(super) fn requested(request: &Resources, name: &str) -> i64 {
    match ResourceId::well_known(name) {
        Some(id) => request.get_id(id),
        None => request.get(name),
    }
}
