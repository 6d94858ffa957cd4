//! [`fit`]: would the node's kubelet Topology Manager admit the pod?
//!
//! Per policy:
//! - `none`: no NUMA opinion; refused only where the memory manager `Static` refuses by
//!   itself (see the `memory` module);
//! - `best-effort`: the same refusals; the placement reports the zones the kubelet would
//!   prefer and whether that hint is preferred (for scoring);
//! - `restricted`: only when every container (or the pod) gets a preferred merged hint:
//!   a zone set of the common minimum width with enough free of everything aligned;
//! - `single-numa-node`: the same with width one.
//!
//! Per scope:
//! - `container`: containers in admission order (init containers, sidecars included, in
//!   spec order, then app containers). Each is aligned against what is still free.
//!   Regular init containers are not subtracted (their CPUs and memory are reused by
//!   later containers); sidecars and app containers are. While reusable init-container
//!   CPUs remain, the CPU manager only hints masks containing their zones, so later
//!   containers with exclusive CPUs must include those zones. Each goes to the zone set the
//!   kubelet itself would pick: the numerically lowest preferred mask, i.e. the lowest
//!   NUMA id for single zones. Picking by a scoring strategy instead would predict an
//!   allocation the kubelet does not make and so mis-judge the containers after it.
//! - `pod`: one alignment of [`PodRequest::numa_request`].
//!
//! Which resources are aligned follows the kubelet's hint providers: exclusive CPUs
//! (CPU manager `static`) and memory/hugepages (memory manager `Static`) of Guaranteed
//! pods (shared pools otherwise, and on nodes whose NRT attributes turn the manager
//! off), device resources for every QoS class, nothing else. A resource that needs alignment but that no zone
//! reports is skipped when `node_level` says the node reports it as a whole (e.g. an
//! extended resource without NUMA affinity); otherwise the pod does not fit.

use std::borrow::Cow;

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::align::{
    CPU_GROUP, Cause, FIRST_DEVICE_GROUP, Goal, MEMORY_GROUP, Req, Reqs, align, allocate,
    best_effort,
};
use super::mask::NumaSet;
use super::request::{ContainerKind, ContainerRequest, PodRequest};
use super::resources::{Amount, ResourceKind, Resources};
use super::topology::NodeTopology;
use super::unfit::{Unfit, UnfitReason, UnfitTarget};

/// Where the pod's NUMA-aligned resources would come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Union of the zones used; `None` when nothing is NUMA-aligned (policy `none`,
    /// or a pod with no aligned resource).
    pub zones: Option<NumaSet>,
    /// `container` scope: per container, in [`PodRequest::containers`] order, the
    /// zones it would use (`None`: no aligned resource). Empty in `pod` scope and for
    /// policy `none`.
    pub containers: Vec<Option<NumaSet>>,
    /// Whether the kubelet's merged hints would be preferred. Always true for
    /// `restricted` and `single-numa-node` fits; may be false under `best-effort`.
    pub aligned: bool,
}

impl Placement {
    /// No NUMA opinion.
    pub fn unconstrained() -> Self {
        Self {
            zones: None,
            containers: Vec::new(),
            aligned: true,
        }
    }
}

/// Decides whether `node`'s kubelet would admit `pod`; see the module documentation.
pub fn fit(
    node: &NodeTopology,
    pod: &PodRequest,
    node_level: &dyn Fn(&str) -> bool,
) -> Result<Placement, Unfit> {
    let policy = node.policy();
    if matches!(
        policy,
        TopologyManagerPolicy::None | TopologyManagerPolicy::BestEffort
    ) {
        // The memory manager refuses by itself under the lenient policies.
        super::memory::check(node, pod)?;
    }
    let goal = match policy {
        TopologyManagerPolicy::None => return Ok(Placement::unconstrained()),
        TopologyManagerPolicy::BestEffort => None,
        TopologyManagerPolicy::Restricted => Some(Goal::MinimumWidth),
        TopologyManagerPolicy::SingleNumaNode => Some(Goal::SingleZone),
    };
    let guaranteed = pod.is_guaranteed();
    let nres = node.resource_count();
    let mut reqs = Reqs::default();

    if node.scope() == TopologyManagerScope::Pod {
        let request = pod.numa_request();
        let fail = |reason| Unfit {
            policy,
            target: UnfitTarget::Pod,
            reason,
        };
        // The pod-level request already holds only exclusive CPUs.
        collect(
            node,
            request,
            guaranteed,
            true,
            node_level,
            goal.is_some(),
            &mut reqs,
        )
        .map_err(|pos| fail(not_reported(request, pos)))?;
        let (mask, aligned) = match goal {
            Some(goal) => {
                let mask = align(node, node.free(), reqs.as_slice(), goal, 0)
                    .map_err(|cause| fail(reason(node, request, cause)))?;
                (mask, true)
            }
            None => best_effort(node, node.free(), reqs.as_slice(), 0),
        };
        return Ok(Placement {
            zones: mask.map(|m| node.numa_set(m)),
            containers: Vec::new(),
            aligned,
        });
    }

    // Copied only once a container's allocation matters for a later one.
    let mut free = Cow::Borrowed(node.free());
    let containers = pod.containers();
    let mut placed = Vec::with_capacity(containers.len());
    let mut union: Option<u64> = None;
    let mut all_aligned = true;
    // CPUs of regular init containers that later containers reuse first, and the zones
    // holding them: while any are left, the CPU manager only hints masks containing
    // those zones (generateCPUTopologyHints). Init containers are never subtracted from
    // `free`, so `free` already counts the reusable CPUs as free on their zones.
    let mut reusable_cpus = 0i64;
    let mut reuse_zones = 0u64;
    for (i, c) in containers.iter().enumerate() {
        let fail = |reason| container_unfit(policy, c, reason);
        reqs.clear();
        collect(
            node,
            &c.resources,
            guaranteed,
            c.exclusive_cpu,
            node_level,
            goal.is_some(),
            &mut reqs,
        )
        .map_err(|pos| fail(not_reported(&c.resources, pos)))?;
        let cpus = reqs.need_of(CPU_GROUP);
        let must = if cpus > 0 { reuse_zones } else { 0 };
        let (mask, aligned) = match goal {
            Some(goal) => {
                let mask = align(node, &free, reqs.as_slice(), goal, must)
                    .map_err(|cause| fail(reason(node, &c.resources, cause)))?;
                (mask, true)
            }
            None => best_effort(node, &free, reqs.as_slice(), must),
        };
        if let (Some(mask), true) = (mask, cpus > 0) {
            if c.kind == ContainerKind::Init {
                reusable_cpus = reusable_cpus.max(cpus);
                reuse_zones |= mask;
            } else {
                reusable_cpus = (reusable_cpus - cpus).max(0);
                if reusable_cpus == 0 {
                    reuse_zones = 0;
                }
            }
        }
        all_aligned &= aligned;
        if let Some(mask) = mask {
            union = Some(union.unwrap_or(0) | mask);
            if c.kind != ContainerKind::Init && i + 1 < containers.len() {
                allocate(free.to_mut(), nres, mask, reqs.as_slice());
            }
        }
        placed.push(mask.map(|m| node.numa_set(m)));
    }
    Ok(Placement {
        zones: union.map(|m| node.numa_set(m)),
        containers: placed,
        aligned: all_aligned,
    })
}

/// Gathers the resources of `request` that a hint provider aligns: whole CPUs when the
/// CPU manager is `static`, memory and hugepages when the memory manager is `Static`
/// (Guaranteed pods only, both), devices always. `Err(pos)`: the entry at `pos` needs
/// alignment, no zone reports it and it is not node-level (only when `strict`;
/// otherwise such resources are skipped).
pub(super) fn collect(
    node: &NodeTopology,
    request: &Resources,
    guaranteed: bool,
    exclusive_cpu: bool,
    node_level: &dyn Fn(&str) -> bool,
    strict: bool,
    reqs: &mut Reqs,
) -> Result<(), u32> {
    let mut next_device_group = FIRST_DEVICE_GROUP;
    for (pos, entry) in request.entries().iter().enumerate() {
        let group = match entry.kind {
            ResourceKind::Cpu if guaranteed && exclusive_cpu && node.static_cpus() => CPU_GROUP,
            ResourceKind::Memory | ResourceKind::Hugepages
                if guaranteed && node.static_memory() =>
            {
                MEMORY_GROUP
            }
            ResourceKind::Device => {
                next_device_group += 1;
                next_device_group - 1
            }
            _ => continue,
        };
        let pos = u32::try_from(pos).unwrap_or(u32::MAX);
        let index = node
            .resource_index(&entry.name)
            .filter(|&ri| node.resource(ri).listed != 0);
        match index {
            Some(ri) => reqs.push(Req {
                pos,
                res: u32::try_from(ri).unwrap_or(u32::MAX),
                group,
                need: entry.amount,
            }),
            None if !strict || node_level(&entry.name) => {}
            None => return Err(pos),
        }
    }
    Ok(())
}

/// The kubelet refuses container `c`.
pub(super) fn container_unfit(
    policy: TopologyManagerPolicy,
    c: &ContainerRequest,
    reason: UnfitReason,
) -> Unfit {
    Unfit {
        policy,
        target: UnfitTarget::Container {
            name: c.name.clone(),
            kind: c.kind,
        },
        reason,
    }
}

pub(super) fn not_reported(request: &Resources, pos: u32) -> UnfitReason {
    UnfitReason::NotReported {
        resource: request.entries()[pos as usize].name.clone(),
    }
}

/// Turns an alignment failure into its public form, naming resources and amounts.
fn reason(node: &NodeTopology, request: &Resources, cause: Cause) -> UnfitReason {
    let entry = |pos: u32| &request.entries()[pos as usize];
    let amount = |pos: u32, value: i64| Amount {
        kind: entry(pos).kind,
        value,
    };
    match cause {
        Cause::ExceedsZone { pos, largest } => UnfitReason::ExceedsZone {
            resource: entry(pos).name.clone(),
            need: amount(pos, entry(pos).amount),
            largest: amount(pos, largest),
        },
        Cause::Insufficient {
            pos,
            best_free,
            width,
        } => UnfitReason::Insufficient {
            resource: entry(pos).name.clone(),
            need: amount(pos, entry(pos).amount),
            best_free: amount(pos, best_free),
            width,
        },
        Cause::WidthMismatch { first, second } => UnfitReason::WidthMismatch {
            first: (entry(first.0).name.clone(), first.1),
            second: (entry(second.0).name.clone(), second.1),
        },
        Cause::Disjoint { positions, width } => UnfitReason::Disjoint {
            resources: positions
                .into_iter()
                .map(|p| entry(p).name.clone())
                .collect(),
            width,
        },
        Cause::TooManyZones => UnfitReason::TooManyZones {
            zones: u32::try_from(node.zone_count()).unwrap_or(u32::MAX),
        },
    }
}
