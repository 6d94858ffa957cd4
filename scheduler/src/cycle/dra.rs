//! The DRA step of the filter on one node: once the NUMA fit has chosen the zones
//! where the kubelet will put the pod's exclusive CPUs and memory, allocate the pod's
//! ResourceClaims on the node's devices, inside those zones.
//!
//! The zone rule follows the pod and the node: a pod whose placement names zones (it
//! has exclusive CPUs or pinned memory, on a node with a NodeResourceTopology) takes
//! devices inside them ([`ZoneRule::Within`], devices of unknown zones refused); any
//! other pod, or a node without topology, takes devices from any zone
//! ([`ZoneRule::Any`]). When no device set fits inside the zones, the `draAlignment`
//! setting decides: `Required` rejects the node, saying which claim's devices are
//! elsewhere; `Preferred` takes devices from any zone and the node scores below every
//! node where they line up ([`ALIGNED_BONUS`]).
//!
//! Errors that hold on every node (a missing class, a selector that does not compile,
//! an unsupported feature) are found once per attempt by [`DraInput::check`], before
//! any node is filtered, so the pod's message names them once.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tas_api::tas::DraAlignment;

use crate::dra::{
    AllocateError, Allocation, AllocationInput, DEFAULT_MAX_STEPS, DeviceId, NodeDevices,
    PcieRootZones, SelectorCache, ZoneRule, Zones, allocate,
};
use crate::dra_state::DraSnapshot;
use crate::filter::NodeInfo;
use crate::numa::NumaSet;

/// Added to the score of a node whose devices line up with the pod's zones, so that
/// under `Preferred` it beats every node where they do not (node scores stay far
/// below it, cluster-wide scores add at most a few hundred).
pub const ALIGNED_BONUS: u32 = 10_000;

/// A pod's claims and what their allocation reads, taken once per attempt.
#[derive(Debug)]
pub struct DraInput {
    /// The pod's claims, in `spec.resourceClaims` order.
    pub claims: Vec<ResourceClaim>,
    /// Classes, devices per node and devices in use, as of the attempt.
    pub cluster: DraSnapshot,
    /// The `draAlignment` setting.
    pub alignment: DraAlignment,
    /// Compiled selectors, shared by every attempt.
    pub selectors: Arc<SelectorCache>,
}

/// How an allocation lines up with the pod's NUMA zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraOutcome {
    /// Every device of the pod sits in the zones of its CPUs and memory.
    Aligned,
    /// Some device is elsewhere or has unknown zones (`Preferred` only).
    Unaligned,
    /// The pod has no NUMA zones to line up with (no exclusive CPUs or pinned memory,
    /// or a node without topology).
    Unconstrained,
}

impl DraOutcome {
    /// The metric label and span attribute value.
    pub fn label(self) -> &'static str {
        match self {
            Self::Aligned => "aligned",
            Self::Unaligned => "unaligned",
            Self::Unconstrained => "unconstrained",
        }
    }

    /// What the outcome adds to the node's score.
    pub fn bonus(self) -> u32 {
        match self {
            Self::Aligned => ALIGNED_BONUS,
            Self::Unaligned | Self::Unconstrained => 0,
        }
    }
}

/// The allocation of the pod's claims on one node.
#[derive(Debug, Clone)]
pub struct DraChoice {
    /// Per claim, the result to write (new allocations) and the devices.
    pub allocation: Allocation,
    /// How it lines up with the pod's zones.
    pub outcome: DraOutcome,
    /// The zones the devices had to sit in, if any.
    pub zones: Option<Zones>,
}

impl DraChoice {
    /// `driver/pool/device (NUMA 0)` for every device of the pod, for Events and spans.
    pub fn devices(&self) -> Vec<String> {
        self.allocation
            .claims
            .iter()
            .flat_map(|c| &c.devices)
            .map(|d| match &d.zones {
                Some(z) if !z.is_empty() => format!("{} (NUMA {})", d.id, list(z)),
                _ => format!("{} (NUMA unknown)", d.id),
            })
            .collect()
    }
}

impl DraInput {
    /// Errors that hold on every node: the claims need a change (or a class to be
    /// created) before any node can take the pod. Claims already allocated are
    /// judged per node.
    pub fn check(&self) -> Result<(), AllocateError> {
        let open: Vec<ResourceClaim> = self
            .claims
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.allocation.as_ref())
                    .is_none()
            })
            .cloned()
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        let nowhere = NodeDevices::gather(&Node::default(), [], &PcieRootZones::new());
        let input = AllocationInput {
            claims: &open,
            classes: &self.cluster,
            in_use: &HashSet::new(),
            zone_rule: &ZoneRule::Any,
            max_steps: DEFAULT_MAX_STEPS,
        };
        match allocate(&nowhere, &input, &self.selectors) {
            Err(e) if e.is_permanent() => Err(e),
            _ => Ok(()),
        }
    }

    /// Allocates the pod's claims on `node`, inside `zones` (the NUMA fit's zones of
    /// the pod on that node, `None`: no zones to line up with); see the module
    /// documentation. The error is the node's reason, for a human.
    pub fn fit(&self, node: &NodeInfo, zones: Option<NumaSet>) -> Result<DraChoice, String> {
        self.fit_with(node, zones, &self.cluster.in_use)
    }

    /// [`Self::fit`] with `in_use` as the devices nobody else may be given (the
    /// preemption search: without the devices the victims' eviction frees).
    pub fn fit_with(
        &self,
        node: &NodeInfo,
        zones: Option<NumaSet>,
        in_use: &HashSet<DeviceId>,
    ) -> Result<DraChoice, String> {
        let gathered;
        let devices = match self.cluster.devices.get(node.name()) {
            Some(devices) => devices.as_ref(),
            None => {
                gathered = no_devices(node);
                &gathered
            }
        };
        let Some(zones) = zones.map(|z| z.iter().collect::<Zones>()) else {
            return self
                .allocate(devices, &ZoneRule::Any, in_use)
                .map(|allocation| DraChoice {
                    allocation,
                    outcome: DraOutcome::Unconstrained,
                    zones: None,
                })
                .map_err(|e| reason(&e));
        };
        let within = ZoneRule::Within {
            zones: zones.clone(),
            allow_unknown: false,
        };
        let error = match self.allocate(devices, &within, in_use) {
            Ok(allocation) if allocation.aligned => {
                return Ok(DraChoice {
                    allocation,
                    outcome: DraOutcome::Aligned,
                    zones: Some(zones),
                });
            }
            // Devices of claims allocated before (by an earlier attempt, or for
            // another pod sharing the claim) are not moved, and the kubelet puts the
            // CPUs where it will, blind to them: off the zones, only `Preferred`
            // takes the node.
            Ok(allocation) => {
                return match self.alignment {
                    DraAlignment::Preferred => Ok(DraChoice {
                        allocation,
                        outcome: DraOutcome::Unaligned,
                        zones: Some(zones),
                    }),
                    DraAlignment::Required => Err(misaligned(&allocation, &zones)
                        .unwrap_or_else(|| "DRA devices are not aligned".to_owned())),
                };
            }
            Err(e) if e.is_permanent() => return Err(reason(&e)),
            Err(e) => e,
        };
        match self.allocate(devices, &ZoneRule::Any, in_use) {
            Ok(allocation) => match self.alignment {
                DraAlignment::Preferred => Ok(DraChoice {
                    allocation,
                    outcome: DraOutcome::Unaligned,
                    zones: Some(zones),
                }),
                DraAlignment::Required => {
                    Err(misaligned(&allocation, &zones).unwrap_or_else(|| reason(&error)))
                }
            },
            // Not even without the zones: the plain shortage says more.
            Err(anywhere) => Err(reason(&anywhere)),
        }
    }

    fn allocate(
        &self,
        devices: &NodeDevices,
        rule: &ZoneRule,
        in_use: &HashSet<DeviceId>,
    ) -> Result<Allocation, AllocateError> {
        let input = AllocationInput {
            claims: &self.claims,
            classes: &self.cluster,
            in_use,
            zone_rule: rule,
            max_steps: DEFAULT_MAX_STEPS,
        };
        allocate(devices, &input, &self.selectors)
    }
}

/// A node without devices, for claims allocated elsewhere to be judged against its
/// name and labels.
fn no_devices(node: &NodeInfo) -> NodeDevices {
    let object = Node {
        metadata: ObjectMeta {
            name: Some(node.name().to_owned()),
            labels: Some(node.labels().clone()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    NodeDevices::gather(&object, [], &PcieRootZones::new())
}

/// A node's reason from an allocator error.
fn reason(error: &AllocateError) -> String {
    format!("DRA: {error}")
}

/// Why an allocation found without the zone rule is not aligned: the first claim with
/// a device outside `zones` or of unknown zones.
fn misaligned(allocation: &Allocation, zones: &Zones) -> Option<String> {
    for claim in &allocation.claims {
        for device in &claim.devices {
            match &device.zones {
                Some(z) if z.is_subset(zones) => {}
                Some(_) => {
                    return Some(format!(
                        "DRA devices of claim {} are not on NUMA zone(s) {} where the kubelet will put the pod's CPUs",
                        claim.claim,
                        list(zones)
                    ));
                }
                None => {
                    return Some(format!(
                        "DRA devices of claim {} have no known NUMA zone, and the kubelet will put the pod's CPUs on zone(s) {} (draAlignment: Required)",
                        claim.claim,
                        list(zones)
                    ));
                }
            }
        }
    }
    None
}

/// `0,1`.
fn list(zones: &Zones) -> String {
    zones
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

pub mod settled;

#[cfg(test)]
mod tests;
