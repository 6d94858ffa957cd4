//! A claim's constraints across its requests, checked as devices are added during the
//! search and undone as it backtracks.
//!
//! - `matchAttribute`: every device of the named requests (all requests when none
//!   are named) has the attribute, all with one value.
//! - `distinctAttribute`: every such device has the attribute, all values different.
//!
//! A request is named by its own name, or a subrequest by `request/subrequest`; naming
//! the parent covers all its subrequests. Both kinds are monotonic: once a device is
//! refused, adding more devices cannot make it acceptable, so the search can prune.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::Device;

use super::attribute::{self, AttributeValue};

/// What a constraint requires of its devices' attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConstraintKind {
    Match(String),
    Distinct(String),
}

/// One constraint and the values of the devices added so far.
#[derive(Debug, Clone)]
pub struct Constraint {
    kind: ConstraintKind,
    /// Empty: every request.
    requests: BTreeSet<String>,
    /// The attribute values of the devices added, in order.
    values: Vec<AttributeValue>,
}

impl Constraint {
    pub fn new(kind: ConstraintKind, requests: BTreeSet<String>) -> Self {
        Self {
            kind,
            requests,
            values: Vec::new(),
        }
    }

    /// The attribute the constraint is about.
    pub fn attribute(&self) -> &str {
        let (ConstraintKind::Match(attribute) | ConstraintKind::Distinct(attribute)) = &self.kind;
        attribute
    }

    /// Whether devices of request `request` (result name `result_name`) count.
    pub fn applies_to(&self, request: &str, result_name: &str) -> bool {
        self.requests.is_empty()
            || self.requests.contains(request)
            || self.requests.contains(result_name)
    }

    /// Whether `device` of `driver` may join the devices added so far.
    pub fn admits(&self, driver: &str, device: &Device) -> bool {
        let Some(value) = self.value_of(driver, device) else {
            return false;
        };
        match &self.kind {
            ConstraintKind::Match(_) => self.values.first().is_none_or(|first| *first == value),
            ConstraintKind::Distinct(_) => !self.values.contains(&value),
        }
    }

    /// Adds an admitted device.
    pub fn push(&mut self, driver: &str, device: &Device) {
        if let Some(value) = self.value_of(driver, device) {
            self.values.push(value);
        }
    }

    /// Removes the device added last.
    pub fn pop(&mut self) {
        self.values.pop();
    }

    fn value_of(&self, driver: &str, device: &Device) -> Option<AttributeValue> {
        let attributes = device.attributes.as_ref()?;
        attribute::lookup(driver, attributes, self.attribute()).and_then(AttributeValue::of)
    }
}
