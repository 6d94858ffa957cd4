//! [`fit`]: would the node's kubelet Topology Manager admit the pod?
//!
//! Per policy:
//! - `none`: no NUMA opinion; refused only where the CPU manager `static` has too few
//!   free CPUs for a container's exclusive ones, or the memory manager `Static` cannot
//!   place its memory (see the `memory` module);
//! - `best-effort`: the same refusals, against the hint the kubelet's merge hands the
//!   memory manager: the aligned one when there is one, otherwise the non-preferred one
//!   its literal merge picks (see the `providers` module); the placement reports those
//!   zones and whether the hint is preferred (for scoring);
//! - `restricted`: only when every container (or the pod) gets a preferred merged hint:
//!   a zone set of the common minimum width with enough free of everything aligned,
//!   and the memory manager can place each container's memory with it;
//! - `single-numa-node`: the same with width one.
//!
//! Per scope:
//! - `container`: containers in admission order, each aligned against what is still
//!   free, reusing what regular init containers leave (see the `containers` module).
//! - `pod`: one alignment of [`PodRequest::numa_request`] (its memory types only those
//!   app containers ask for, like the memory manager's pod hints); every container's
//!   memory is then placed against that one hint.
//!
//! Which resources are aligned follows the kubelet's hint providers: exclusive CPUs
//! (CPU manager `static`) and memory/hugepages (memory manager `Static`) of Guaranteed
//! pods (shared pools otherwise, and on nodes whose NRT attributes turn the manager
//! off), device resources for every QoS class, nothing else. A resource that needs alignment but that no zone
//! reports is skipped when `node_level` says the node reports it as a whole (e.g. an
//! extended resource without NUMA affinity); otherwise the pod does not fit.

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::align::{
    CPU_GROUP, Cause, FIRST_DEVICE_GROUP, Goal, MEMORY_GROUP, Req, Reqs, align, all_zones,
    best_effort,
};
use super::managers::check_cpu_count;
use super::mask::NumaSet;
use super::memory::MemoryManager;
use super::request::{ContainerKind, PodRequest};
use super::resources::{Amount, ResourceKind, Resources};
use super::topology::NodeTopology;
use super::unfit::{MemoryRefusal, Unfit, UnfitReason, UnfitTarget};

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
    fit_recorded(node, pod, node_level, true).map_err(|code| code.render(pod))
}

/// [`fit`] without the per-container zones of the placement (`containers` left empty)
/// and with the reason kept as codes ([`UnfitCode::render`] names it): the filter's
/// question, answered without allocating or copying names per node.
pub fn fits(
    node: &NodeTopology,
    pod: &PodRequest,
    node_level: &dyn Fn(&str) -> bool,
) -> Result<Placement, UnfitCode> {
    fit_recorded(node, pod, node_level, false)
}

fn fit_recorded(
    node: &NodeTopology,
    pod: &PodRequest,
    node_level: &dyn Fn(&str) -> bool,
    containers: bool,
) -> Result<Placement, UnfitCode> {
    let policy = node.policy();
    if matches!(
        policy,
        TopologyManagerPolicy::None | TopologyManagerPolicy::BestEffort
    ) {
        // Aligned CPUs are enough CPUs; without alignment the count can still fall short.
        check_cpu_count(node, pod)?;
    }
    // The memory manager pins memory of Guaranteed pods under every policy.
    let memory = if pod.is_guaranteed() && node.static_memory() {
        MemoryManager::new(node, node.free())
    } else {
        None
    };
    let doubted = node.doubted_memory();
    match memory {
        Some(mm) if doubted != 0 && doubted.count_ones() <= MAX_DOUBTED_ZONES => {
            // Each doubted zone holds its group's cells or its own: the pod fits when
            // it fits in every world; the placement is the one of the NRT's groups.
            let mut first = None;
            let mut split = 0u64;
            loop {
                let world = mm.clone().in_world(split);
                let placement = fit_in(node, pod, node_level, containers, Some(world))?;
                first.get_or_insert(placement);
                split = split.wrapping_sub(doubted) & doubted;
                if split == 0 {
                    break;
                }
            }
            Ok(first.unwrap_or_else(Placement::unconstrained))
        }
        memory => fit_in(node, pod, node_level, containers, memory),
    }
}

/// Doubted memory zones up to this are settled by fitting the pod in every world they
/// allow (`2^n` fits); beyond, no memory goes to a doubted zone.
const MAX_DOUBTED_ZONES: u32 = 4;

/// [`fit_recorded`] against one state of the memory manager (`None`: it pins nothing,
/// or there are too many zones to replay it).
fn fit_in(
    node: &NodeTopology,
    pod: &PodRequest,
    node_level: &dyn Fn(&str) -> bool,
    containers: bool,
    mut memory: Option<MemoryManager<'_>>,
) -> Result<Placement, UnfitCode> {
    let policy = node.policy();
    let goal = match policy {
        TopologyManagerPolicy::None => {
            if let Some(mm) = memory.as_mut() {
                for (i, c) in pod.containers().iter().enumerate() {
                    let reqs = memory_reqs(node, &c.resources);
                    mm.allocate(c.kind, reqs.as_slice(), None, false)
                        .map_err(|r| container_unfit(policy, i, memory_refusal(r)))?;
                }
            }
            return Ok(Placement::unconstrained());
        }
        TopologyManagerPolicy::BestEffort => None,
        TopologyManagerPolicy::Restricted => Some(Goal::MinimumWidth),
        TopologyManagerPolicy::SingleNumaNode => Some(Goal::SingleZone),
    };
    let guaranteed = pod.is_guaranteed();
    let all = all_zones(node.zone_count() as u32);
    let mut reqs = Reqs::default();

    if node.scope() == TopologyManagerScope::Pod {
        let request = pod.numa_request();
        let fail = |reason| UnfitCode {
            policy,
            container: None,
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
        .map_err(|pos| fail(not_reported(pos)))?;
        // The memory manager's pod hints count only memory types app containers ask for.
        let mut reqs = without_init_only_memory(pod, request, &reqs);
        if goal.is_some() {
            reqs = without_indifferent_memory(reqs, memory.as_ref());
        }
        let (mask, aligned) = match goal {
            Some(goal) => {
                let mask = align(node, node.free(), reqs.as_slice(), goal, 0, memory.as_ref())
                    .map_err(|cause| fail(reason(node, cause)))?;
                (mask, true)
            }
            None => lenient(
                node,
                node.free(),
                reqs.as_slice(),
                0,
                &|_| 0,
                memory.as_ref(),
            ),
        };
        if let Some(mm) = memory.as_mut() {
            // Every container is allocated against the pod's hint.
            for (i, c) in pod.containers().iter().enumerate() {
                let mem = memory_reqs(node, &c.resources);
                let hint = handed_over(policy, mask, all);
                mm.allocate(c.kind, mem.as_slice(), hint, aligned)
                    .map_err(|r| container_unfit(policy, i, memory_refusal(r)))?;
            }
        }
        return Ok(Placement {
            zones: mask.map(|m| node.numa_set(m)),
            containers: Vec::new(),
            aligned,
        });
    }

    super::containers::fit(node, pod, node_level, goal, memory, containers)
}

/// `best-effort`: the aligned mask when there is one; otherwise the non-preferred hint
/// the kubelet's merge picks (see the `providers` module), or an approximation of it
/// when that is too costly to compute. The flag says whether the hint is preferred.
pub(super) fn lenient(
    node: &NodeTopology,
    free: &[i64],
    reqs: &[Req],
    must: u64,
    must_of: &dyn Fn(u32) -> u64,
    memory: Option<&MemoryManager<'_>>,
) -> (Option<u64>, bool) {
    if let Ok(mask) = align(node, free, reqs, Goal::MinimumWidth, must, memory) {
        return (mask, true);
    }
    match super::providers::merged(node, free, reqs, must_of, memory) {
        Some(hint) => (
            Some(hint.mask.unwrap_or(all_zones(node.zone_count() as u32))),
            hint.preferred,
        ),
        None => best_effort(node, free, reqs, must, memory),
    }
}

/// The zones of the merged hint the memory manager gets: every zone when nothing was
/// aligned, none (no NUMA affinity) when `single-numa-node` would hand over every zone.
pub(super) fn handed_over(
    policy: TopologyManagerPolicy,
    mask: Option<u64>,
    all: u64,
) -> Option<u64> {
    let mask = mask.unwrap_or(all);
    (policy != TopologyManagerPolicy::SingleNumaNode || mask != all).then_some(mask)
}

/// `reqs` without its memory when the memory manager has no hint at all for it: the
/// Topology Manager then merges as if it had no preference (its Allocate still runs).
pub(super) fn without_indifferent_memory(reqs: Reqs, memory: Option<&MemoryManager<'_>>) -> Reqs {
    match memory {
        Some(mm) if mm.indifferent(reqs.only(MEMORY_GROUP).as_slice()) => {
            let mut out = Reqs::default();
            for r in reqs.as_slice().iter().filter(|r| r.group != MEMORY_GROUP) {
                out.push(*r);
            }
            out
        }
        _ => reqs,
    }
}

/// The memory and hugepages of `request` the memory manager pins.
pub(super) fn memory_reqs(node: &NodeTopology, request: &Resources) -> Reqs {
    let mut reqs = Reqs::default();
    // Not strict: memory no zone reports is not pinned to zones.
    let _ = collect(node, request, true, false, &|_| false, false, &mut reqs);
    reqs.only(MEMORY_GROUP)
}

/// `reqs` without memory types only init containers (and sidecars) ask for: the memory
/// manager's pod-scope hints count the types of app containers only.
fn without_init_only_memory(pod: &PodRequest, request: &Resources, reqs: &Reqs) -> Reqs {
    let mut out = Reqs::default();
    for r in reqs.as_slice() {
        let name = &request.entries()[r.pos as usize].name;
        let by_app = pod
            .containers()
            .iter()
            .any(|c| c.kind == ContainerKind::App && c.resources.get(name) > 0);
        if r.group != MEMORY_GROUP || by_app {
            out.push(*r);
        }
    }
    out
}

pub(super) fn memory_refusal(refusal: MemoryRefusal) -> Code {
    Code::Memory(refusal)
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
        // Every resource of a node is listed by some zone (see `entry_index`).
        let index = node.entry_index(entry);
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

/// The kubelet refuses container `index` (of [`PodRequest::containers`]).
pub(super) fn container_unfit(
    policy: TopologyManagerPolicy,
    index: usize,
    reason: Code,
) -> UnfitCode {
    UnfitCode {
        policy,
        container: Some(u32::try_from(index).unwrap_or(u32::MAX)),
        reason,
    }
}

pub(super) fn not_reported(pos: u32) -> Code {
    Code::NotReported(pos)
}

/// Keeps an alignment failure as a code, with the node's zone count it may name.
pub(super) fn reason(node: &NodeTopology, cause: Cause) -> Code {
    Code::Cause(cause, u32::try_from(node.zone_count()).unwrap_or(u32::MAX))
}

/// Why the kubelet would reject a pod, kept as codes: the container by index, the
/// resources by position in its request, amounts as numbers. Nothing is named or
/// copied per node; [`UnfitCode::render`] makes the [`Unfit`] a reason shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfitCode {
    policy: TopologyManagerPolicy,
    /// Index into [`PodRequest::containers`]; `None`: the pod (`pod` scope).
    container: Option<u32>,
    reason: Code,
}

/// The reason of an [`UnfitCode`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Code {
    /// The entry at this position is reported by no zone.
    NotReported(u32),
    /// The alignment failed; the node's zone count.
    Cause(Cause, u32),
    /// The memory manager refused.
    Memory(MemoryRefusal),
    /// Too few free exclusive CPUs (whole CPUs).
    NotEnoughCpus { need: i64, free: i64 },
}

impl UnfitCode {
    /// The public form, naming the container, resources and amounts of `pod` (the
    /// pod the code was found for).
    pub fn render(&self, pod: &PodRequest) -> Unfit {
        let container = self
            .container
            .and_then(|i| pod.containers().get(i as usize));
        let (target, request) = match container {
            Some(c) => (
                UnfitTarget::Container {
                    name: c.name.clone(),
                    kind: c.kind,
                },
                &c.resources,
            ),
            None => (UnfitTarget::Pod, pod.numa_request()),
        };
        let reason = match &self.reason {
            Code::NotReported(pos) => UnfitReason::NotReported {
                resource: request.entries()[*pos as usize].name.clone(),
            },
            Code::Cause(cause, zones) => render_cause(request, cause.clone(), *zones),
            &Code::Memory(refusal) => UnfitReason::MemoryPlacement { refusal },
            &Code::NotEnoughCpus { need, free } => UnfitReason::NotEnoughCpus { need, free },
        };
        Unfit {
            policy: self.policy,
            target,
            reason,
        }
    }
}

/// Turns an alignment failure into its public form, naming resources and amounts.
fn render_cause(request: &Resources, cause: Cause, zones: u32) -> UnfitReason {
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
        Cause::MemoryGroups => UnfitReason::MemoryPlacement {
            refusal: MemoryRefusal::MixesGroups,
        },
        Cause::TooManyZones => UnfitReason::TooManyZones { zones },
    }
}
