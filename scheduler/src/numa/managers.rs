//! What the kubelet's CPU and device managers do beyond their hints: reusing the CPUs
//! and devices of regular init containers, and the CPU manager's own count of free
//! CPUs (which refuses a pod under any Topology Manager policy).

use super::align::{MEMORY_GROUP, Req};
use super::fit::container_unfit;
use super::request::{ContainerKind, PodRequest};
use super::topology::NodeTopology;
use super::unfit::{Unfit, UnfitReason};

/// CPUs and devices that regular init containers hold and later containers reuse,
/// per resource: how many are left and on which zones.
#[derive(Default)]
pub(super) struct Reuse {
    /// (node resource index, amount left, zone-index mask).
    held: Vec<(u32, i64, u64)>,
}

impl Reuse {
    /// The zones every hint for `reqs` must contain.
    pub(super) fn must(&self, reqs: &[Req]) -> u64 {
        self.held
            .iter()
            .filter(|&&(res, left, _)| left > 0 && reqs.iter().any(|r| r.res == res))
            .fold(0, |acc, &(_, _, zones)| acc | zones)
    }

    /// The zones holding what is left to reuse of node resource `res`.
    pub(super) fn zones_of(&self, res: u32) -> u64 {
        self.held
            .iter()
            .find(|&&(r, left, _)| r == res && left > 0)
            .map_or(0, |&(_, _, zones)| zones)
    }

    /// Notes what a container of `kind` aligned on `mask` takes or leaves to reuse.
    pub(super) fn record(&mut self, kind: ContainerKind, reqs: &[Req], mask: u64) {
        for r in reqs.iter().filter(|r| r.group != MEMORY_GROUP) {
            let at = self.held.iter().position(|&(res, _, _)| res == r.res);
            match (kind, at) {
                (ContainerKind::Init, Some(i)) => {
                    let held = &mut self.held[i];
                    held.1 = held.1.max(r.need);
                    held.2 |= mask;
                }
                (ContainerKind::Init, None) => self.held.push((r.res, r.need, mask)),
                (_, Some(i)) => {
                    let held = &mut self.held[i];
                    held.1 = (held.1 - r.need).max(0);
                    if held.1 == 0 {
                        held.2 = 0;
                    }
                }
                (_, None) => {}
            }
        }
    }
}

/// The CPU manager `static` gives each container its whole CPUs from what is free
/// (with those of earlier regular init containers, which it reuses) and fails when
/// there are fewer: "not enough cpus available to satisfy request".
pub(super) fn check_cpu_count(node: &NodeTopology, pod: &PodRequest) -> Result<(), Unfit> {
    if !node.static_cpus() || !pod.is_guaranteed() {
        return Ok(());
    }
    let Some(ri) = node.resource_index("cpu") else {
        return Ok(());
    };
    let nres = node.resource_count();
    let mut left: i64 = (0..node.zone_count())
        .map(|z| node.free()[z * nres + ri])
        .sum();
    for c in pod.containers().iter().filter(|c| c.exclusive_cpu) {
        let need = c.resources.get("cpu");
        if need > left {
            return Err(container_unfit(
                node.policy(),
                c,
                UnfitReason::NotEnoughCpus {
                    need: need / 1000,
                    free: left.max(0) / 1000,
                },
            ));
        }
        if c.kind != ContainerKind::Init {
            left -= need;
        }
    }
    Ok(())
}
