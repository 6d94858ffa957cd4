//! Memory manager groups the kubelet may have split without any NRT showing it.
//!
//! The kubelet's `Static` memory manager keeps, per NUMA zone, the group (`Cells`) of
//! the newest allocation that touched the zone, and resets it only when the zone's
//! assignment count falls to 0. It checks group consistency only for multi-zone
//! allocations, so under `best-effort` (where the Topology Manager may hand it a single
//! zone no memory hint named) a container's memory can go to one zone of a multi-zone
//! group, and the zone's cells become that zone alone. When the kubelet then
//! refuses the pod part-way (a later container's devices, CPUs or memory are missing),
//! the containers it already allocated are removed again, but the zone keeps its new
//! cells while the group's blocks remain. The node agent never sees the refused pod
//! (podresources lists admitted pods only), so the NRT keeps showing the old group.
//!
//! The scheduler does see the refusal: the pod's phase turns `Failed` with the
//! kubelet's rejection message. From then on, a zone of a multi-zone group that a
//! container admitted before the refused one could have taken alone is *doubted* while
//! it still shows that group: its cells may be the group or the zone alone (still
//! assigned: the group's blocks remain). Only two things differ between the two: the
//! zone alone becomes one of the memory manager's hints, and the group stops being one
//! (a multi-zone hint over a zone holding single-zone cells) and is refused. So the fit
//! replays the memory manager in every world the doubted zones allow (each one with
//! the group's cells or its own; `2^n` replays, hints and merges included) and the pod
//! fits only when it fits in all of them; its placement is the one of the groups the
//! NRT shows. With more doubted zones than [`crate::numa::fit`] replays worlds for, or
//! more zones than it replays the memory manager for, no memory allocation may land on
//! a doubted zone, alone or with others, while the hints stay those of the NRT's
//! groups (taking every hint on the zone away instead would make the memory manager
//! look indifferent to the Topology Manager's merge, which then picks zones the
//! kubelet's own hints would not; the differential test found such false-admits).
//! The doubt ends when the zone no longer shows the group (its group's blocks left,
//! which resets the kubelet's cells).

use tas_api::nrt::{TopologyManagerPolicy, TopologyManagerScope};

use super::NumaSet;
use super::request::{ContainerKind, PodRequest};
use super::resources::{ResourceKind, Resources};
use super::topology::NodeTopology;

/// The zones of one node whose memory manager group a kubelet refusal put in doubt.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MemoryDoubt {
    /// (NUMA id of the zone, the group it showed).
    zones: Vec<(u32, NumaSet)>,
}

impl MemoryDoubt {
    /// Whether no zone is doubted.
    pub fn is_empty(&self) -> bool {
        self.zones.is_empty()
    }

    /// The doubted zones (NUMA ids) with the group each showed.
    pub fn zones(&self) -> &[(u32, NumaSet)] {
        &self.zones
    }

    /// Records that the node's kubelet refused the pod asking for `refused` (`None`
    /// when its request is unreadable), with `view` the node as the scheduler sees it
    /// then (what it may have free at most). A refusal can split a group only with the
    /// memory manager `Static` under the `best-effort` policy (see [`splits_groups`]),
    /// for a Guaranteed pod (the only class whose memory is pinned) with a container
    /// admitted before the refused one: the kubelet allocates container by container,
    /// the memory manager last of its managers, so the refused container leaves no
    /// memory allocation of its own. A zone of a multi-zone group is doubted when such
    /// an earlier container could have been handed the zone alone (another provider's
    /// hints may narrow the merge: [`could_narrow`]) and its memory fits in what the
    /// zone has free. Returns
    /// whether a zone was added.
    pub fn note_refusal(&mut self, view: &NodeTopology, refused: Option<&PodRequest>) -> bool {
        if !splits_groups(view) {
            return false;
        }
        let earlier = match refused {
            Some(r) if !r.is_guaranteed() => return false,
            Some(r) => match r.containers().split_last() {
                Some((_, earlier)) if !earlier.is_empty() => Some((r, earlier)),
                _ => return false,
            },
            None => None,
        };
        let mut added = false;
        for zone in 0..view.zone_count() {
            let group = view.memory_group_mask(zone);
            if group.count_ones() < 2 {
                continue;
            }
            let id = view.numa_ids()[zone];
            let split_here = earlier.is_none_or(|(pod, containers)| {
                containers.iter().any(|c| {
                    let hinted = match view.scope() {
                        TopologyManagerScope::Container => {
                            could_narrow(view, zone, group, &c.resources, c.exclusive_cpu, pod)
                        }
                        TopologyManagerScope::Pod => {
                            could_narrow(view, zone, group, pod.numa_request(), true, pod)
                        }
                    };
                    hinted
                        && c.resources
                            .entries()
                            .iter()
                            .filter(|r| r.kind.is_memory())
                            .all(|r| view.available(id, &r.name).unwrap_or(0) >= r.amount)
                })
            });
            let entry = (id, view.numa_set(group));
            if split_here && !self.zones.contains(&entry) {
                self.zones.push(entry);
                added = true;
            }
        }
        added
    }

    /// Forgets the zones of `view` (built from the node's latest NRT) that no longer
    /// show the group they were doubted with.
    pub fn prune(&mut self, view: &NodeTopology) {
        self.zones.retain(|&(id, group)| shows(view, id, group));
    }

    /// Marks the doubted zones of `view` that still show their group.
    pub fn apply(&self, view: &mut NodeTopology) {
        for &(id, group) in &self.zones {
            if shows(view, id, group)
                && let Ok(zone) = view.numa_ids().binary_search(&id)
            {
                view.doubt_memory_zone(zone);
            }
        }
    }
}

/// Whether zone `id` of `view` shows the memory manager group `group`.
fn shows(view: &NodeTopology, id: u32, group: NumaSet) -> bool {
    view.numa_ids()
        .binary_search(&id)
        .is_ok_and(|zone| view.numa_set(view.memory_group_mask(zone)) == group)
}

/// Whether the node's kubelet can leave a zone of a multi-zone group with other cells:
/// the memory manager `Static` under `best-effort`. The memory manager never hints a
/// zone of a multi-zone group alone, so a container's memory goes to such a zone alone
/// only when the Topology Manager hands it that zone: under `best-effort` when another
/// provider's hint narrows the merge to it. Under `none` it hands no hint, and the
/// memory manager takes its own best hint (extended only over its own hints); under
/// `restricted` and `single-numa-node` a merge narrower than every memory hint is not
/// preferred and the pod is refused before any allocation.
fn splits_groups(view: &NodeTopology) -> bool {
    view.static_memory() && view.policy() == TopologyManagerPolicy::BestEffort
}

/// Whether a hint provider other than the memory manager could narrow the
/// `best-effort` merge for `request` (a container's, or the pod's in `pod` scope) to
/// zone index `zone` of the multi-zone group `group`: the memory manager's only hint on
/// the zone is the group, and the merge intersects it with one hint per provider, so
/// some provider needs a hint holding the zone but none of the group's other zones.
/// That is the CPU manager `static` for exclusive CPUs (`exclusive_cpu`), or the device
/// manager for a device resource, with enough free outside the group's other zones
/// (reusable CPUs and devices of `pod`'s init containers counted as free, as the
/// kubelet's hints count them).
fn could_narrow(
    view: &NodeTopology,
    zone: usize,
    group: u64,
    request: &Resources,
    exclusive_cpu: bool,
    pod: &PodRequest,
) -> bool {
    let others = group & !(1 << zone);
    let outside = |name: &str| -> i64 {
        (0..view.zone_count())
            .filter(|z| others >> z & 1 == 0)
            .filter_map(|z| view.available(view.numa_ids()[z], name))
            .fold(0i64, i64::saturating_add)
    };
    let reusable = |name: &str| -> i64 {
        pod.containers()
            .iter()
            .filter(|c| c.kind == ContainerKind::Init)
            .map(|c| c.resources.get(name))
            .fold(0i64, i64::saturating_add)
    };
    request.entries().iter().any(|r| {
        let aligned = match r.kind {
            ResourceKind::Cpu => exclusive_cpu && view.static_cpus(),
            ResourceKind::Device => view.reports(&r.name),
            _ => false,
        };
        aligned && outside(&r.name).saturating_add(reusable(&r.name)) >= r.amount
    })
}
