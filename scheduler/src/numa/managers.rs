//! What the kubelet's CPU and device managers do beyond their hints: reusing the CPUs
//! and devices of regular init containers, and the CPU manager's own count of free
//! CPUs (which refuses a pod under any Topology Manager policy).

use super::align::{CPU_GROUP, MEMORY_GROUP, Req};
use super::cpu_reuse::{self, CpuOrder, Outcome, Shape};
use super::fit::container_unfit;
use super::fit::{Code, UnfitCode};
use super::mask::bits;
use super::request::{ContainerKind, PodRequest};
use super::resources::ResourceId;
use super::topology::NodeTopology;

/// CPUs and devices that regular init containers hold and later containers reuse,
/// per resource: how many are left and on which zones.
#[derive(Default)]
pub(super) struct Reuse {
    /// (node resource index, amount left, zone-index mask).
    held: Vec<(u32, i64, u64)>,
    /// Which CPUs the reusable ones are, as far as the node's CPU layout tells
    /// ([`cpu_reuse`]).
    cpu_shape: Shape,
}

/// CPU amounts are in millicores; [`cpu_reuse`] counts whole CPUs.
const MILLI: i64 = 1000;

/// Reusable CPUs a sidecar or app container may leave untouched: what is held
/// (resource, amount, zones) and how the container treats it.
#[derive(Clone, Copy)]
pub(super) struct MayLeave {
    held: (u32, i64, u64),
    outcome: Outcome,
}

impl MayLeave {
    /// Whether the kubelet may either take or leave them (a branch point), rather than
    /// surely take them first.
    pub(super) fn both_ways(&self) -> bool {
        matches!(self.outcome, Outcome::Either { .. })
    }
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

    /// Notes the shape of the reusable CPUs after a regular init container asking for
    /// the CPUs in `reqs`, aligned on `mask` (`free`: what is free or reusable,
    /// zone-major with `nres` resources). Call before [`Self::record`].
    pub(super) fn note_init_cpus(
        &mut self,
        order: CpuOrder,
        reqs: &[Req],
        mask: u64,
        free: &[i64],
        nres: usize,
    ) {
        let Some(cpu) = reqs.iter().find(|r| r.group == CPU_GROUP) else {
            return;
        };
        let before = self
            .held
            .iter()
            .find(|&&(res, left, _)| res == cpu.res && left > 0)
            .map_or((self.cpu_shape, 0, 0), |&(_, left, zones)| {
                (self.cpu_shape, left, zones)
            });
        let on_mask: i64 = bits(mask)
            .map(|z| free[z as usize * nres + cpu.res as usize])
            .sum();
        let (shape, left, zones) = before;
        self.cpu_shape = cpu_reuse::after_init(
            order,
            (shape, left / MILLI, zones),
            cpu.need / MILLI,
            mask,
            on_mask / MILLI,
        );
    }

    /// What a container of `kind` aligned on `mask` may leave of the reusable CPUs,
    /// when it is a sidecar or app container taking fewer CPUs than `mask` has free
    /// (`free`, zone-major with `nres` resources): the CPU manager takes CPUs by
    /// topology, not reusable ones first, so only a container taking every free CPU of
    /// its zones surely takes those on them, unless the node's CPU layout tells which
    /// CPUs it takes ([`cpu_reuse`]).
    pub(super) fn cpus_it_may_leave(
        &self,
        kind: ContainerKind,
        reqs: &[Req],
        mask: u64,
        free: &[i64],
        nres: usize,
    ) -> Option<MayLeave> {
        if kind == ContainerKind::Init {
            return None;
        }
        let cpu = reqs.iter().find(|r| r.group == CPU_GROUP)?;
        let held = *self
            .held
            .iter()
            .find(|&&(res, left, _)| res == cpu.res && left > 0)?;
        let on_mask: i64 = bits(mask)
            .map(|z| free[z as usize * nres + cpu.res as usize])
            .sum();
        (cpu.need < on_mask).then(|| MayLeave {
            held,
            outcome: cpu_reuse::outcome(
                self.cpu_shape,
                held.1 / MILLI,
                held.2,
                cpu.need / MILLI,
                mask,
            ),
        })
    }

    /// After a sidecar or app container took its CPUs (`free`) and [`Self::record`]
    /// noted them taken first: whether it took the reusable CPUs first (`left`
    /// false) or left them (what [`Self::cpus_it_may_leave`] said it may leave, on
    /// those of their zones that still have free CPUs, no more than are free there).
    pub(super) fn settle_cpus(&mut self, may: MayLeave, left: bool, free: &[i64], nres: usize) {
        match may.outcome {
            Outcome::Taken(shape) => self.cpu_shape = shape,
            Outcome::Either { taken, .. } if !left => self.cpu_shape = taken,
            Outcome::Either { keep, left, .. } => {
                let (res, held, zones) = may.held;
                self.leave_cpus((res, held.min(keep * MILLI), zones), free, nres);
                self.cpu_shape = left;
            }
        }
    }

    /// After a sidecar or app container that took the CPUs in `reqs` with no choice
    /// left to the CPU manager (every free CPU of its zones, or no reusable CPU there):
    /// the shape stays only where any allocation keeps it ([`Shape::Lowest`]).
    pub(super) fn took_cpus(&mut self, kind: ContainerKind, reqs: &[Req]) {
        if kind != ContainerKind::Init
            && self.cpu_shape != Shape::Lowest
            && reqs.iter().any(|r| r.group == CPU_GROUP)
        {
            self.cpu_shape = Shape::Unknown;
        }
    }

    /// Puts back `held` (resource, amount, zones) after the container took its CPUs
    /// (`free`): the reusable CPUs stay on those of their zones that still have free
    /// CPUs, no more than are free there.
    fn leave_cpus(&mut self, held: (u32, i64, u64), free: &[i64], nres: usize) {
        let (res, left, zones) = held;
        let free_on = |z: u32| free[z as usize * nres + res as usize].max(0);
        let zones = bits(zones)
            .filter(|&z| free_on(z) > 0)
            .fold(0u64, |acc, z| acc | 1 << z);
        let left = left.min(bits(zones).map(free_on).sum());
        let kept = (res, left, if left > 0 { zones } else { 0 });
        match self.held.iter_mut().find(|h| h.0 == res) {
            Some(h) => *h = kept,
            None => self.held.push(kept),
        }
    }
}

/// The CPU manager `static` gives each container its whole CPUs from what is free
/// (with those of earlier regular init containers, which it reuses) and fails when
/// there are fewer: "not enough cpus available to satisfy request".
pub(super) fn check_cpu_count(node: &NodeTopology, pod: &PodRequest) -> Result<(), UnfitCode> {
    if !node.static_cpus() || !pod.is_guaranteed() {
        return Ok(());
    }
    let Some(ri) = node.resource_index_of(ResourceId::CPU, "cpu") else {
        return Ok(());
    };
    let nres = node.resource_count();
    let mut left: i64 = (0..node.zone_count())
        .map(|z| node.free()[z * nres + ri])
        .sum();
    for (i, c) in pod.containers().iter().enumerate() {
        if !c.exclusive_cpu {
            continue;
        }
        let need = c.resources.get_id(ResourceId::CPU);
        if need > left {
            return Err(container_unfit(
                node.policy(),
                i,
                Code::NotEnoughCpus {
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
