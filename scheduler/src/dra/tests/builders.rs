//! Small builders for the objects the tests allocate from.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CELDeviceSelector, Device, DeviceAttribute, DeviceCapacity, DeviceClaim,
    DeviceClaimConfiguration, DeviceClass, DeviceClassConfiguration, DeviceClassSpec,
    DeviceConstraint, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceTaint,
    ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaim, ResourceClaimSpec,
    ResourceClaimStatus, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

use crate::dra::{
    AllocateError, Allocation, AllocationInput, DEFAULT_MAX_STEPS, DeviceId, NodeDevices,
    PcieRootZones, SelectorCache, ZoneRule, allocate,
};

pub const DRIVER: &str = "gpu.example.com";
pub const NODE: &str = "node-a";

pub fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A device with attributes and capacity added by its methods.
pub fn device(name: &str) -> Device {
    Device {
        name: name.to_owned(),
        ..Default::default()
    }
}

/// An attribute with the one value `set` sets.
fn attribute(set: impl FnOnce(&mut DeviceAttribute)) -> DeviceAttribute {
    let mut attribute = DeviceAttribute::default();
    set(&mut attribute);
    attribute
}

pub trait DeviceExt: Sized {
    fn attr(self, name: &str, value: DeviceAttribute) -> Self;
    fn capacity(self, name: &str, quantity: &str) -> Self;
    fn taint(self, effect: &str) -> Self;

    fn int(self, name: &str, v: i64) -> Self {
        self.attr(name, attribute(|a| a.int = Some(v)))
    }
    fn string(self, name: &str, v: &str) -> Self {
        self.attr(name, attribute(|a| a.string = Some(v.to_owned())))
    }
    fn boolean(self, name: &str, v: bool) -> Self {
        self.attr(name, attribute(|a| a.bool = Some(v)))
    }
    fn version(self, name: &str, v: &str) -> Self {
        self.attr(name, attribute(|a| a.version = Some(v.to_owned())))
    }
    fn numa(self, zone: i64) -> Self {
        self.int("resource.kubernetes.io/numaNode", zone)
    }
}

impl DeviceExt for Device {
    fn attr(mut self, name: &str, value: DeviceAttribute) -> Self {
        self.attributes
            .get_or_insert_default()
            .insert(name.to_owned(), value);
        self
    }
    fn capacity(mut self, name: &str, quantity: &str) -> Self {
        let capacity = DeviceCapacity {
            value: ApiQuantity(quantity.to_owned()),
            ..Default::default()
        };
        self.capacity
            .get_or_insert_default()
            .insert(name.to_owned(), capacity);
        self
    }
    fn taint(mut self, effect: &str) -> Self {
        self.taints.get_or_insert_default().push(DeviceTaint {
            key: "broken".to_owned(),
            effect: effect.to_owned(),
            ..Default::default()
        });
        self
    }
}

/// A one-slice pool of `driver` on [`NODE`], generation 1.
pub fn slice(name: &str, pool: &str, devices: Vec<Device>) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.to_owned(),
            node_name: Some(NODE.to_owned()),
            pool: ResourcePool {
                name: pool.to_owned(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..Default::default()
        },
    }
}

pub trait SliceExt: Sized {
    fn generation(self, generation: i64, count: i64) -> Self;
    fn reach_all(self) -> Self;
    fn reach_label(self, key: &str, value: &str) -> Self;
    fn on_node(self, node: &str) -> Self;
}

impl SliceExt for ResourceSlice {
    fn generation(mut self, generation: i64, count: i64) -> Self {
        self.spec.pool.generation = generation;
        self.spec.pool.resource_slice_count = count;
        self
    }
    fn reach_all(mut self) -> Self {
        self.spec.node_name = None;
        self.spec.all_nodes = Some(true);
        self
    }
    fn reach_label(mut self, key: &str, value: &str) -> Self {
        self.spec.node_name = None;
        self.spec.node_selector = Some(label_selector(key, value));
        self
    }
    fn on_node(mut self, node: &str) -> Self {
        self.spec.node_name = Some(node.to_owned());
        self
    }
}

pub fn label_selector(key: &str, value: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![value.to_owned()]),
            }]),
            ..Default::default()
        }],
    }
}

pub fn selectors(expressions: &[&str]) -> Option<Vec<DeviceSelector>> {
    Some(
        expressions
            .iter()
            .map(|e| DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: e.to_string(),
                }),
            })
            .collect(),
    )
    .filter(|s: &Vec<_>| !s.is_empty())
}

fn opaque(parameters: &str) -> Option<OpaqueDeviceConfiguration> {
    Some(OpaqueDeviceConfiguration {
        driver: DRIVER.to_owned(),
        parameters: RawExtension(serde_json::json!({ "p": parameters })),
    })
}

/// A class selecting the devices of [`DRIVER`] that satisfy `expressions`, with one
/// opaque config named after the class.
pub fn class(name: &str, expressions: &[&str]) -> DeviceClass {
    let mut all = vec![format!("device.driver == {DRIVER:?}")];
    all.extend(expressions.iter().map(|e| e.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        spec: DeviceClassSpec {
            selectors: selectors(&all),
            config: Some(vec![DeviceClassConfiguration {
                opaque: opaque(name),
            }]),
            ..Default::default()
        },
    }
}

pub fn classes(list: Vec<DeviceClass>) -> BTreeMap<String, DeviceClass> {
    list.into_iter()
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
        .collect()
}

/// An `exactly` request for `count` devices of `class`.
pub fn exact(name: &str, class: &str, count: i64, expressions: &[&str]) -> DeviceRequest {
    DeviceRequest {
        name: name.to_owned(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_owned(),
            count: Some(count),
            selectors: selectors(expressions),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The claims of a pod with one claim `ns/c` asking for `count` devices of class
/// `gpu` that satisfy `expressions`.
pub fn gpus(count: i64, expressions: &[&str]) -> [ResourceClaim; 1] {
    [claim("c", vec![exact("gpu", "gpu", count, expressions)])]
}

/// An `exactly` request for all devices of `class`.
pub fn all(name: &str, class: &str) -> DeviceRequest {
    let mut request = exact(name, class, 1, &[]);
    if let Some(exactly) = request.exactly.as_mut() {
        exactly.allocation_mode = Some("All".to_owned());
        exactly.count = None;
    }
    request
}

/// A `firstAvailable` request: `(subrequest, class, count)` in order.
pub fn first_available(name: &str, subs: &[(&str, &str, i64)]) -> DeviceRequest {
    DeviceRequest {
        name: name.to_owned(),
        first_available: Some(
            subs.iter()
                .map(|(sub, class, count)| DeviceSubRequest {
                    name: sub.to_string(),
                    device_class_name: class.to_string(),
                    count: Some(*count),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    }
}

pub fn claim(name: &str, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("ns".to_owned()),
            ..Default::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                ..Default::default()
            }),
        },
        ..Default::default()
    }
}

pub trait ClaimExt: Sized {
    fn constraint(self, constraint: DeviceConstraint) -> Self;
    fn config(self, requests: &[&str], parameters: &str) -> Self;
    fn allocated(self, allocation: AllocationResult) -> Self;

    fn match_attribute(self, attribute: &str, requests: &[&str]) -> Self {
        self.constraint(DeviceConstraint {
            match_attribute: Some(attribute.to_owned()),
            requests: Some(requests.iter().map(|r| r.to_string()).collect()),
            ..Default::default()
        })
    }
    fn distinct_attribute(self, attribute: &str) -> Self {
        self.constraint(DeviceConstraint {
            distinct_attribute: Some(attribute.to_owned()),
            ..Default::default()
        })
    }
}

impl ClaimExt for ResourceClaim {
    fn constraint(mut self, constraint: DeviceConstraint) -> Self {
        if let Some(devices) = self.spec.devices.as_mut() {
            devices.constraints.get_or_insert_default().push(constraint);
        }
        self
    }
    fn config(mut self, requests: &[&str], parameters: &str) -> Self {
        if let Some(devices) = self.spec.devices.as_mut() {
            devices
                .config
                .get_or_insert_default()
                .push(DeviceClaimConfiguration {
                    requests: Some(requests.iter().map(|r| r.to_string()).collect())
                        .filter(|r: &Vec<_>| !r.is_empty()),
                    opaque: opaque(parameters),
                });
        }
        self
    }
    fn allocated(mut self, allocation: AllocationResult) -> Self {
        self.status = Some(ResourceClaimStatus {
            allocation: Some(allocation),
            ..Default::default()
        });
        self
    }
}

/// One allocation scenario on [`NODE`]: its slices, classes, in-use devices and zone
/// rule, with [`Case::run`] to allocate claims.
pub struct Case {
    pub node: Node,
    pub slices: Vec<ResourceSlice>,
    pub classes: BTreeMap<String, DeviceClass>,
    pub in_use: HashSet<DeviceId>,
    pub rule: ZoneRule,
    pub pcie_roots: PcieRootZones,
    pub max_steps: u64,
}

impl Case {
    pub fn new(slices: Vec<ResourceSlice>) -> Self {
        Self {
            node: node(NODE, &[("rack", "r1")]),
            slices,
            classes: classes(vec![class("gpu", &[])]),
            in_use: HashSet::new(),
            rule: ZoneRule::Any,
            pcie_roots: PcieRootZones::new(),
            max_steps: DEFAULT_MAX_STEPS,
        }
    }

    pub fn devices(&self) -> NodeDevices {
        NodeDevices::gather(&self.node, &self.slices, &self.pcie_roots)
    }

    pub fn run(&self, claims: &[ResourceClaim]) -> Result<Allocation, AllocateError> {
        let input = AllocationInput {
            claims,
            classes: &self.classes,
            in_use: &self.in_use,
            zone_rule: &self.rule,
            max_steps: self.max_steps,
        };
        allocate(&self.devices(), &input, &SelectorCache::new())
    }

    /// The error of a failing allocation, as text.
    pub fn reason(&self, claims: &[ResourceClaim]) -> String {
        match self.run(claims) {
            Ok(allocation) => panic!("expected a failure, got {allocation:#?}"),
            Err(e) => e.to_string(),
        }
    }
}

/// `n` devices `dev-0`.. with no attributes.
pub fn plain_devices(n: usize) -> Vec<Device> {
    (0..n).map(|i| device(&format!("dev-{i}"))).collect()
}

/// The device names of every claim of an allocation, in result order.
pub fn names(allocation: &Allocation) -> Vec<Vec<String>> {
    allocation
        .claims
        .iter()
        .map(|c| c.devices.iter().map(|d| d.id.device.clone()).collect())
        .collect()
}

pub fn id(pool: &str, device: &str) -> DeviceId {
    DeviceId::new(DRIVER, pool, device)
}
