//! Which zone each container of the pods on a node holds its pinned resources on, when
//! the node's object publishes the containers' NUMA placement
//! ([`tas_api::nrt::numa_placement`], as resource-topology-exporter and TAS's agent
//! write it).
//!
//! The placement names containers by hash only; decoding it needs the exact set of
//! containers its writer encoded: the app containers and sidecars of the pods on the
//! node that hold exclusive resources (exclusive CPUs under the `static` CPU manager,
//! memory and hugepages of Guaranteed pods under the `Static` memory manager, devices).
//! [`zones_of`] rebuilds that set from the pods the scheduler knows on the node; when
//! its size differs from the writer's (a pod the scheduler has not seen yet, a
//! container whose resources span several zones, which the format cannot say) nothing
//! is decoded and callers fall back to not knowing.

use std::collections::HashMap;
use std::sync::Arc;

use tas_api::nrt::numa_placement::ContainerRef;

use super::request::{ContainerKind, PodRequest};
use super::resources::{ResourceKind, Resources};
use super::topology::NodeTopology;

/// A container that may hold NUMA-pinned resources, and what it would pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPin {
    /// The container name.
    pub name: Arc<str>,
    /// Whether its CPUs are exclusive (Guaranteed, whole CPUs).
    pub exclusive_cpu: bool,
    /// Whether the pod is Guaranteed (its memory and hugepages can be pinned).
    pub guaranteed: bool,
    /// What it would pin: exclusive CPUs, memory and hugepages (Guaranteed), devices.
    pub footprint: Resources,
}

impl ContainerPin {
    /// Whether `node`'s kubelet pins anything of it (so a writer lists it).
    pub fn pinned_on(&self, node: &NodeTopology) -> bool {
        self.footprint.entries().iter().any(|e| match e.kind {
            ResourceKind::Cpu => self.exclusive_cpu && node.static_cpus(),
            ResourceKind::Memory | ResourceKind::Hugepages => {
                self.guaranteed && node.static_memory()
            }
            ResourceKind::Device => true,
            ResourceKind::Unaligned => false,
        })
    }

    /// What `node`'s kubelet pins of it.
    pub fn pinned_amounts(&self, node: &NodeTopology) -> Resources {
        Resources::from_amounts(
            self.footprint
                .entries()
                .iter()
                .filter(|e| match e.kind {
                    ResourceKind::Cpu => node.static_cpus(),
                    ResourceKind::Memory | ResourceKind::Hugepages => node.static_memory(),
                    _ => true,
                })
                .map(|e| (&*e.name, e.amount)),
        )
    }
}

/// The app containers and sidecars of `request` that may hold pinned resources.
pub fn of(request: &PodRequest) -> Vec<ContainerPin> {
    let guaranteed = request.is_guaranteed();
    request
        .containers()
        .iter()
        .filter(|c| c.kind != ContainerKind::Init)
        .filter_map(|c| {
            let footprint = Resources::from_amounts(
                c.resources
                    .entries()
                    .iter()
                    .filter(|e| match e.kind {
                        ResourceKind::Cpu => c.exclusive_cpu,
                        ResourceKind::Memory | ResourceKind::Hugepages => guaranteed,
                        ResourceKind::Device => true,
                        ResourceKind::Unaligned => false,
                    })
                    .map(|e| (&*e.name, e.amount)),
            );
            (!footprint.is_empty()).then(|| ContainerPin {
                name: c.name.clone(),
                exclusive_cpu: c.exclusive_cpu,
                guaranteed,
                footprint,
            })
        })
        .collect()
}

/// The NUMA id of every pinned container of `pods` (namespace, name, pins) on `node`,
/// from the placement its object publishes; `None` when it publishes none, it is
/// malformed, or the pods do not make up the set it encodes.
pub fn zones_of<'a>(
    node: &NodeTopology,
    pods: impl IntoIterator<Item = (&'a str, &'a str, &'a [ContainerPin])>,
) -> Option<HashMap<ContainerRef, u32>> {
    let payload = node.placement()?.as_ref().ok()?;
    let known = pods.into_iter().flat_map(|(namespace, pod, pins)| {
        pins.iter()
            .filter(|p| p.pinned_on(node))
            .map(move |p| ContainerRef::new(namespace, pod, &p.name))
    });
    let decoded = payload.decode(known).ok()?;
    Some(
        decoded
            .into_iter()
            .filter_map(|(c, zone)| Some((c, u32::try_from(zone).ok()?)))
            .collect(),
    )
}
