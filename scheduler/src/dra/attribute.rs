//! Looking up a device attribute by its fully qualified name, as constraints and the
//! NUMA zone attributes do.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::DeviceAttribute;

/// The attribute `qualified` (`domain/id`) of a device of `driver`: stored under the
/// qualified name, or under the bare id when the domain is the driver's.
pub fn lookup<'a>(
    driver: &str,
    attributes: &'a BTreeMap<String, DeviceAttribute>,
    qualified: &str,
) -> Option<&'a DeviceAttribute> {
    attributes.get(qualified).or_else(|| {
        let (domain, id) = qualified.split_once('/')?;
        (domain == driver).then(|| attributes.get(id)).flatten()
    })
}

/// An attribute value as constraints compare it: equal when of the same type and
/// value (versions compare as strings, semver's canonical form being unique).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttributeValue {
    Bool(bool),
    Int(i64),
    String(String),
    Version(String),
}

impl AttributeValue {
    /// The value of an attribute with exactly one field set.
    pub fn of(attribute: &DeviceAttribute) -> Option<Self> {
        match attribute {
            DeviceAttribute {
                bool: Some(b),
                int: None,
                string: None,
                version: None,
            } => Some(Self::Bool(*b)),
            DeviceAttribute {
                bool: None,
                int: Some(i),
                string: None,
                version: None,
            } => Some(Self::Int(*i)),
            DeviceAttribute {
                bool: None,
                int: None,
                string: Some(s),
                version: None,
            } => Some(Self::String(s.clone())),
            DeviceAttribute {
                bool: None,
                int: None,
                string: None,
                version: Some(v),
            } => Some(Self::Version(v.clone())),
            _ => None,
        }
    }
}
