//! `container` scope: the containers of a pod admitted one by one, in admission order
//! (init containers, sidecars included, in spec order, then app containers).
//!
//! Each is aligned against what is still free. Regular init containers are not
//! subtracted (their CPUs, devices and memory are reused by later containers); sidecars
//! and app containers are. While reusable init-container CPUs or devices remain, the
//! CPU and device managers only hint masks containing their zones
//! (generateCPUTopologyHints, generateDeviceTopologyHints), so later containers asking
//! for them must include those zones. Each goes to the zone set the kubelet itself
//! would pick: the numerically lowest preferred mask, i.e. the lowest NUMA id for
//! single zones. Picking by a scoring strategy instead would predict an allocation the
//! kubelet does not make and so mis-judge the containers after it.
//!
//! The device manager hands out reusable devices first. The CPU manager does not: it
//! takes a container's CPUs by topology (whole sockets, then whole cores, then single
//! threads) from the free and reusable CPUs of the merged hint's zones, and which ones
//! those are the zones' counts do not show. An init container's single CPU is typically a lone
//! thread that an app container asking for whole cores leaves where it is, still
//! reusable, still binding the CPU hints of every container after. So after a sidecar
//! or app container that takes fewer CPUs than its zones have free while reusable CPUs
//! remain, both outcomes are followed: it took them (counted off first) or it left them
//! (kept, on the zones that still have free CPUs). The pod fits only when every
//! outcome does; the placement reported is the one where reusable CPUs are taken first.
//!
//! Where the object publishes the node's CPU layout (threads per core, each zone's
//! socket), the CPU manager's order tells for a container aligned on the one zone the
//! reusable CPUs sit on whether it takes them ([`super::cpu_reuse`]): it surely does
//! without SMT, and with two threads per core unless an odd init request meets an even
//! one (the init container's lone thread may stay). Only the outcomes the layout leaves
//! possible are followed; without a layout, both everywhere.

use super::align::{Goal, MEMORY_GROUP, Reqs, align, all_zones, allocate};
use super::fit::UnfitCode;
use super::fit::{
    Placement, collect, container_unfit, handed_over, lenient, memory_refusal, not_reported,
    reason, without_indifferent_memory,
};
use super::managers::Reuse;
use super::memory::MemoryManager;
use super::request::{ContainerKind, PodRequest};
use super::scratch::ZoneTable;
use super::topology::NodeTopology;

/// Branch points (containers that may leave reusable CPUs) whose both outcomes are
/// followed; beyond them the reusable CPUs are taken first. At most `2^MAX_BRANCHES`
/// runs per pod, and only pods with exclusive-CPU init containers branch at all.
const MAX_BRANCHES: u32 = 4;

/// The `container`-scope fit: `goal` as the policy asks (`None`: `best-effort`),
/// `memory`: the memory manager's state before the pod (`None`: it pins nothing);
/// `record`: whether the placement lists each container's zones.
pub(super) fn fit(
    node: &NodeTopology,
    pod: &PodRequest,
    node_level: &dyn Fn(&str) -> bool,
    goal: Option<Goal>,
    memory: Option<MemoryManager<'_>>,
    record: bool,
) -> Result<Placement, UnfitCode> {
    let reuses_cpus = node.static_cpus()
        && pod
            .containers()
            .iter()
            .any(|c| c.kind == ContainerKind::Init && c.exclusive_cpu);
    if !reuses_cpus {
        // No branch point: one run, on the memory manager's state itself.
        return run(node, pod, node_level, goal, memory, 0, record).map(|(placement, _)| placement);
    }
    let mut first = None;
    let mut runs = 1u32;
    let mut choices = 0u32;
    while choices < runs {
        let (placement, points) =
            run(node, pod, node_level, goal, memory.clone(), choices, record)?;
        // A run whose choices reach beyond its branch points repeats an earlier one.
        if choices >> points == 0 {
            runs = runs.max(1 << points.min(MAX_BRANCHES));
            first.get_or_insert(placement);
        }
        choices += 1;
    }
    Ok(first.unwrap_or_else(Placement::unconstrained))
}

/// One run through the containers. At the i-th branch point, bit i of `choices` says
/// whether the container left the reusable CPUs (1) or took them first (0). Returns
/// the placement and how many branch points the run met.
fn run(
    node: &NodeTopology,
    pod: &PodRequest,
    node_level: &dyn Fn(&str) -> bool,
    goal: Option<Goal>,
    mut memory: Option<MemoryManager<'_>>,
    choices: u32,
    record: bool,
) -> Result<(Placement, u32), UnfitCode> {
    let policy = node.policy();
    let guaranteed = pod.is_guaranteed();
    let nres = node.resource_count();
    let all = all_zones(node.zone_count() as u32);
    let mut reqs = Reqs::default();
    // What is free, copied only once a container's allocation matters for a later one.
    let mut copy: Option<ZoneTable> = None;
    let containers = pod.containers();
    let mut placed = Vec::with_capacity(if record { containers.len() } else { 0 });
    let mut union: Option<u64> = None;
    let mut all_aligned = true;
    let mut points = 0u32;
    // CPUs and devices of regular init containers that later containers may reuse, and
    // the zones holding them. Init containers are never subtracted from `free`, so
    // `free` already counts the reusable ones as free on their zones.
    let mut reuse = Reuse::default();
    for (i, c) in containers.iter().enumerate() {
        let fail = |reason| container_unfit(policy, i, reason);
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
        .map_err(|pos| fail(not_reported(pos)))?;
        // The memory of this container, whatever the merge makes of it.
        let mem = reqs.only(MEMORY_GROUP);
        if goal.is_some() {
            reqs = without_indifferent_memory(reqs, memory.as_ref());
        }
        let must = reuse.must(reqs.as_slice());
        let free = copy.as_deref().unwrap_or(node.free());
        let (mask, aligned) = match goal {
            Some(goal) => {
                let mask = align(node, free, reqs.as_slice(), goal, must, memory.as_ref())
                    .map_err(|cause| fail(reason(node, cause)))?;
                (mask, true)
            }
            None => lenient(
                node,
                free,
                reqs.as_slice(),
                must,
                &|res| reuse.zones_of(res),
                memory.as_ref(),
            ),
        };
        if let Some(mm) = memory.as_mut() {
            mm.allocate(
                c.kind,
                mem.as_slice(),
                handed_over(policy, mask, all),
                aligned,
            )
            .map_err(|r| fail(memory_refusal(r)))?;
        }
        all_aligned &= aligned;
        if let Some(mask) = mask {
            union = Some(union.unwrap_or(0) | mask);
            let later = i + 1 < containers.len();
            let may_leave = later
                .then(|| reuse.cpus_it_may_leave(c.kind, reqs.as_slice(), mask, free, nres))
                .flatten();
            if c.kind == ContainerKind::Init {
                reuse.note_init_cpus(node.cpu_order(), reqs.as_slice(), mask, free, nres);
            }
            reuse.record(c.kind, reqs.as_slice(), mask);
            if c.kind != ContainerKind::Init && later {
                let table = copy.get_or_insert_with(|| ZoneTable::copy_of(node.free()));
                allocate(table, nres, mask, reqs.as_slice());
            }
            match may_leave {
                Some(may) => {
                    let free = copy.as_deref().unwrap_or(node.free());
                    let left = may.both_ways() && choices >> points & 1 == 1;
                    reuse.settle_cpus(may, left, free, nres);
                    points += u32::from(may.both_ways());
                }
                None => reuse.took_cpus(c.kind, reqs.as_slice()),
            }
        }
        if record {
            placed.push(mask.map(|m| node.numa_set(m)));
        }
    }
    let placement = Placement {
        zones: union.map(|m| node.numa_set(m)),
        containers: placed,
        aligned: all_aligned,
    };
    Ok((placement, points))
}
