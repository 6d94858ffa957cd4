//! The `device` variable of a selector, built once per device when the node's pools
//! are gathered and borrowed by every evaluation.
//!
//! Its shape is the Kubernetes one: `driver` (string), `attributes` (domain → id →
//! bool, int, string or semver), `capacity` (domain → id → quantity) and
//! `allowMultipleAllocations` (bool). An attribute or capacity name without a domain
//! belongs to the driver's domain. As in Kubernetes, looking up a domain the device
//! has nothing in yields an empty map, so `device.attributes["other.io"].x` fails on
//! `x`, not on the domain.

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use ::cel::ExecutionError;
use ::cel::common::traits::{Container, Indexer, Iterable, Sizer};
use ::cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString, MAP_TYPE, Type};
use ::cel::common::value::{CowVal, StaticVal, Val};
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};

use super::quantity::Quantity;
use super::semver::Semver;

/// What a selector sees of one device.
#[derive(Debug, Clone)]
pub struct DeviceValue(CelMap<'static>);

/// Why a device cannot be shown to selectors (the API server's validation makes
/// both impossible for objects it admitted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceValueError {
    /// An attribute holds no value, or a version that is not a semantic version.
    #[error("attribute {name}: {reason}")]
    Attribute { name: String, reason: String },
    /// A capacity is not a quantity this scheduler can hold.
    #[error("capacity {name}: {reason}")]
    Capacity { name: String, reason: String },
}

impl DeviceValue {
    /// Builds the value of `device` for one device of `driver`.
    pub fn build(
        driver: &str,
        attributes: &BTreeMap<String, DeviceAttribute>,
        capacity: &BTreeMap<String, DeviceCapacity>,
        allow_multiple_allocations: bool,
    ) -> Result<Self, DeviceValueError> {
        let mut attribute_domains = Domains::default();
        for (name, attribute) in attributes {
            let value =
                attribute_value(attribute).map_err(|reason| DeviceValueError::Attribute {
                    name: name.clone(),
                    reason,
                })?;
            attribute_domains.insert(driver, name, value);
        }
        let mut capacity_domains = Domains::default();
        for (name, capacity) in capacity {
            let value =
                Quantity::parse(&capacity.value.0).map_err(|e| DeviceValueError::Capacity {
                    name: name.clone(),
                    reason: e.to_string(),
                })?;
            capacity_domains.insert(driver, name, Box::new(value));
        }
        let fields: [(&str, Box<dyn Val>); 4] = [
            ("driver", Box::new(CelString::from(driver.to_owned()))),
            ("attributes", Box::new(attribute_domains.finish())),
            ("capacity", Box::new(capacity_domains.finish())),
            (
                "allowMultipleAllocations",
                Box::new(CelBool::from(allow_multiple_allocations)),
            ),
        ];
        let map: HashMap<CelMapKey<'static>, Box<dyn Val>> = fields
            .into_iter()
            .map(|(name, value)| (CelMapKey::from(name.to_owned()), value))
            .collect();
        Ok(Self(CelMap::from(map)))
    }

    /// The value as CEL sees it.
    pub(super) fn as_val(&self) -> &(dyn Val + 'static) {
        &self.0
    }
}

/// The fields of `device`, for the compile-time check of `device.<field>`.
pub const DEVICE_FIELDS: [&str; 4] = [
    "driver",
    "attributes",
    "capacity",
    "allowMultipleAllocations",
];

/// One attribute's value: the one field set of bool, int, string, version.
fn attribute_value(attribute: &DeviceAttribute) -> Result<Box<dyn Val>, String> {
    let DeviceAttribute {
        bool,
        int,
        string,
        version,
    } = attribute;
    match (bool, int, string, version) {
        (Some(b), None, None, None) => Ok(Box::new(CelBool::from(*b))),
        (None, Some(i), None, None) => Ok(Box::new(CelInt::from(*i))),
        (None, None, Some(s), None) => Ok(Box::new(CelString::from(s.clone()))),
        (None, None, None, Some(v)) => Semver::parse(v)
            .map(|v| Box::new(v) as Box<dyn Val>)
            .map_err(|e| e.to_string()),
        _ => Err("exactly one of bool, int, string and version must be set".to_owned()),
    }
}

/// Values grouped by domain while a device is built.
#[derive(Default)]
struct Domains(BTreeMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>>);

impl Domains {
    fn insert(&mut self, driver: &str, name: &str, value: Box<dyn Val>) {
        let (domain, id) = split_name(driver, name);
        self.0
            .entry(domain.to_owned())
            .or_default()
            .insert(CelMapKey::from(id.to_owned()), value);
    }

    fn finish(self) -> DomainMap {
        let domains: HashMap<CelMapKey<'static>, Box<dyn Val>> = self
            .0
            .into_iter()
            .map(|(domain, ids)| {
                (
                    CelMapKey::from(domain),
                    Box::new(CelMap::from(ids)) as Box<dyn Val>,
                )
            })
            .collect();
        DomainMap(CelMap::from(domains))
    }
}

/// `(domain, id)` of an attribute or capacity name; a bare id is the driver's.
pub fn split_name<'a>(driver: &'a str, name: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// The empty map a lookup of an absent domain yields.
static NO_IDS: LazyLock<CelMap<'static>> = LazyLock::new(CelMap::default);

/// `attributes` / `capacity`: a map of domains whose absent keys read as empty maps.
#[derive(Debug, Clone)]
struct DomainMap(CelMap<'static>);

impl Val for DomainMap {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.0.as_container()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.0.as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.0.as_sizer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<DomainMap>() {
            Some(other) => self.0.equals(&other.0),
            None => self.0.equals(other),
        }
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl StaticVal for DomainMap {}

impl Indexer for DomainMap {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match self.0.get(idx) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::Borrowed(&*NO_IDS)),
            found => found,
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}
